// Plain HTTP on the relay path: NIP-11 for Accept: application/nostr+json (with CORS, also on
// OPTIONS), a landing page for browsers.
import type { Config } from "../config/schema.ts";
import { relayInfo } from "../nips/nip11.ts";
import { landingPage } from "./landing.ts";

const CORS: Record<string, string> = {
  "Access-Control-Allow-Origin": "*",
  "Access-Control-Allow-Headers": "*",
  "Access-Control-Allow-Methods": "GET, OPTIONS",
  // The same URL answers JSON or HTML by Accept: caches must keep them apart.
  Vary: "Accept",
};

export function httpResponse(req: Request, config: Config, version: string): Response {
  if (req.method === "OPTIONS") return new Response(null, { status: 204, headers: CORS });
  if (req.method !== "GET" && req.method !== "HEAD") return new Response("method not allowed", { status: 405, headers: CORS });
  const info = relayInfo(config, version);
  if ((req.headers.get("accept") ?? "").includes("application/nostr+json"))
    return new Response(JSON.stringify(info), { headers: { ...CORS, "Content-Type": "application/nostr+json" } });
  const url = new URL(req.url);
  const wsUrl = config.info.relay_url || `${url.protocol === "https:" ? "wss" : "ws"}://${url.host}${url.pathname}`;
  return new Response(landingPage(info, wsUrl), { headers: { ...CORS, "Content-Type": "text/html; charset=utf-8" } });
}
