// Plain HTTP on the relay path (httpRoutes): /metrics, /favicon.ico, the admin page and its NIP-86
// API, /join, status.json, NIP-11 for Accept: application/nostr+json (with CORS, also on OPTIONS) and a status
// page for browsers. A websocket upgrade on the relay path is the relay's (relay/upgrade.ts).
import { relayInfo } from "../nips/nip11.ts";
import { type AdminApiSource, handleAdminRequest, isAdminRequest } from "./admin-api.ts";
import { adminCsp, adminPage } from "./admin-page.ts";
import { FAVICON_PATH, faviconResponse } from "./favicon.ts";
import { landingPage, STATUS_CSP } from "./landing.ts";
import { metricsResponse, wantsMetrics } from "./metrics.ts";
import { accessRoutes, type JoinSource } from "./join.ts";
import { eventsStored, formatUptime, policiesInForce, type StatusSource } from "./status.ts";

/** What the routes read: the relay's state, and the texts only the relay can make. */
export interface HttpSources {
  /** For NIP-11, the status page and the NIP-86 API. */
  readonly relay: StatusSource & AdminApiSource & JoinSource;
  readonly version: string;
  /** The /metrics text (observe/metrics.ts). */
  readonly metrics: () => Promise<string>;
  /** The status page's charts as JSON (observe/history.ts). */
  readonly statusJson: () => string;
}

/** A request and the address of the socket it came on (for the /metrics gate). */
export type HttpRoute = (req: Request, peer: () => string) => Response | Promise<Response> | undefined;

/**
 * The relay path's HTTP, matched in this order: /metrics, /favicon.ico, the admin page, status.json, not found
 * off the relay path, the NIP-86 API, then NIP-11 or the status page. Undefined for a websocket
 * upgrade on the relay path: the relay takes it.
 */
export function httpRoutes(src: HttpSources): HttpRoute {
  const { config } = src.relay;
  // Not reloadable: read once.
  const path = config.network.path;
  return (req, peer) => {
    // Without a Host header (HTTP/1.0) Bun cannot build the URL: read the path from the request line.
    if (!URL.canParse(req.url)) return new Response("bad request", { status: 400 });
    const url = new URL(req.url);
    if (wantsMetrics(req, url.pathname, path, config)) return metricsResponse(req, config, src.metrics, peer());
    if (url.pathname === FAVICON_PATH) return faviconResponse(req);
    if (url.pathname === adminPagePath(path)) return adminPageResponse(req, path);
    if (url.pathname === statusJsonPath(path)) return statusJsonResponse(req, src.statusJson);
    // Paid admission (issue 33): /join, /join/invoice, /join/status, POST /lnbits; not found while pay is off.
    const joined = accessRoutes(req, url, src.relay, peer);
    if (joined) return joined;
    if (url.pathname !== path) return new Response("not found", { status: 404 });
    if (isAdminRequest(req)) return handleAdminRequest(req, src.relay);
    if (req.headers.get("upgrade")?.toLowerCase() !== "websocket") return httpResponse(req, src.relay, src.version);
    return undefined;
  };
}

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

function httpResponse(req: Request, src: StatusSource, version: string): Response | Promise<Response> {
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
function adminPageResponse(req: Request, relayPath: string): Response {
  if (req.method !== "GET" && req.method !== "HEAD")
    return new Response("method not allowed", { status: 405, headers: { Allow: "GET, HEAD" } });
  return new Response(adminPage(relayPath), {
    headers: { ...ADMIN_HEADERS, "Content-Security-Policy": adminCsp(req.headers.get("host")) },
  });
}

/** GET on the status page's JSON: the charts' history, top kinds and recent refusals (observe/history.ts). */
function statusJsonResponse(req: Request, text: () => string): Response {
  if (req.method !== "GET" && req.method !== "HEAD")
    return new Response("method not allowed", { status: 405, headers: { Allow: "GET, HEAD" } });
  return new Response(text(), {
    headers: { "Content-Type": "application/json", "Cache-Control": "no-store", "Access-Control-Allow-Origin": "*" },
  });
}
