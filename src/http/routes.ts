// Plain HTTP on the relay path: NIP-11 for Accept: application/nostr+json (with CORS, also on
// OPTIONS), a status page for browsers; the admin page beside it (adminPagePath).
import { relayInfo } from "../nips/nip11.ts";
import { adminCsp, adminPage } from "./admin-page.ts";
import { landingPage, STATUS_CSP } from "./landing.ts";
import { eventsStored, formatUptime, policiesInForce, type StatusSource } from "./status.ts";

const CORS: Record<string, string> = {
  // NIP-11 is for any web client. NIP-86 (POST application/nostr+json+rpc with Authorization) is
  // not: the preflight allows neither header, so browsers refuse cross-origin admin calls; the
  // admin page (adminPagePath) calls from this origin and needs no CORS.
  "Access-Control-Allow-Origin": "*",
  "Access-Control-Allow-Headers": "Accept",
  "Access-Control-Allow-Methods": "GET, HEAD, OPTIONS",
  // The same URL answers JSON or HTML by Accept: caches must keep them apart.
  Vary: "Accept",
};

export function httpResponse(req: Request, src: StatusSource, version: string): Response | Promise<Response> {
  if (req.method === "OPTIONS") return new Response(null, { status: 204, headers: CORS });
  if (req.method !== "GET" && req.method !== "HEAD") return new Response("method not allowed", { status: 405, headers: CORS });
  const config = src.config;
  const info = relayInfo(config, version, src.relayKey?.pubkey);
  if ((req.headers.get("accept") ?? "").includes("application/nostr+json"))
    return new Response(JSON.stringify(info), { headers: { ...CORS, "Content-Type": "application/nostr+json" } });
  return statusPage(req, src, info);
}

async function statusPage(req: Request, src: StatusSource, info: Record<string, unknown>): Promise<Response> {
  const url = new URL(req.url);
  const wsUrl = src.config.info.relay_url || `${url.protocol === "https:" ? "wss" : "ws"}://${url.host}${url.pathname}`;
  const html = landingPage({
    info,
    wsUrl,
    uptime: formatUptime(Date.now() - src.startedAt),
    eventsStored: await eventsStored(src.store),
    connections: src.connections(),
    policies: policiesInForce(src.config, src.admin),
    statusJson: statusJsonPath(src.config.network.path),
  });
  // The numbers are live: a cached copy would show stale ones.
  return new Response(html, {
    headers: { ...CORS, "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store", "Content-Security-Policy": STATUS_CSP },
  });
}

/** The admin page's path: the relay path joined with "admin" ("/" -> "/admin", "/nostr" -> "/nostr/admin"). */
export const adminPagePath = (relayPath: string): string => `${relayPath.replace(/\/+$/, "")}/admin`;

/**
 * The status page's live numbers as JSON, under the relay path ("/" -> "/status.json", "/nostr" ->
 * "/nostr/status.json"): never the relay path itself, so NIP-11 and the websocket stay there.
 */
export const statusJsonPath = (relayPath: string): string => `${relayPath.replace(/\/+$/, "")}/status.json`;

const ADMIN_HEADERS = {
  "Content-Type": "text/html; charset=utf-8",
  // The page drives a signer: no framing (clickjacking; also frame-ancestors in its CSP), no referrer, no cache.
  "X-Frame-Options": "DENY",
  "Referrer-Policy": "no-referrer",
  "Cache-Control": "no-store",
};

/** GET on the admin page; its NIP-86 calls go to the relay path (admin-api.ts answers them). */
export function adminPageResponse(req: Request, relayPath: string): Response {
  if (req.method !== "GET" && req.method !== "HEAD")
    return new Response("method not allowed", { status: 405, headers: { Allow: "GET, HEAD" } });
  return new Response(adminPage(relayPath), {
    headers: { ...ADMIN_HEADERS, "Content-Security-Policy": adminCsp(req.headers.get("host")) },
  });
}
