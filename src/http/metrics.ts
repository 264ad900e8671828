// GET /metrics: the gate in front of the Prometheus text (enabled, method, bearer token, and
// without a token loopback only unless [metrics] public). The path is fixed, whatever
// [network] path is, because that is where scrapers look by default.
import { createHash, timingSafeEqual } from "node:crypto";
import type { Config } from "../config/schema.ts";
import { CONTENT_TYPE } from "./exposition.ts";

const METRICS_PATH = "/metrics";

/**
 * Is this request for the metrics? When the relay itself lives at /metrics, websocket upgrades
 * and NIP-11 requests (and everything, with metrics off) stay the relay's.
 */
export function wantsMetrics(req: Request, pathname: string, relayPath: string, config: Config): boolean {
  if (pathname !== METRICS_PATH) return false;
  if (relayPath !== METRICS_PATH) return true;
  return config.metrics.enabled && !req.headers.get("upgrade") && !(req.headers.get("accept") ?? "").includes("application/nostr+json");
}

const digest = (s: string): Buffer => createHash("sha256").update(s).digest();

/** Constant-time in the token's content and length: both sides are hashed to 32 bytes first. */
function tokenMatches(header: string | null, token: string): boolean {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? "");
  return timingSafeEqual(digest(m?.[1] ?? ""), digest(token)) && m !== null;
}

/** 127.0.0.0/8 and ::1, also as IPv4-mapped IPv6. */
function isLoopback(ip: string): boolean {
  const v4 = ip.replace(/^::ffff:/i, "");
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4) || ip === "::1" || /^(0{0,4}:){7}0{0,3}1$/.test(ip);
}

/**
 * Did the request come through a proxy? A reverse proxy on the same host connects from
 * loopback, so the peer address alone would make the whole internet local.
 */
function proxied(req: Request, config: Config): boolean {
  const h = req.headers;
  const own = config.network.remote_ip_header;
  return h.has("forwarded") || h.has("x-forwarded-for") || h.has("x-real-ip") || (own !== "" && h.has(own));
}

/**
 * Config is read per request: a reload may turn metrics off, change the token or make them
 * public. `peer` is the socket's address (not a forwarded one).
 */
export async function metricsResponse(req: Request, config: Config, render: () => Promise<string>, peer: string): Promise<Response> {
  if (!config.metrics.enabled) return new Response("not found", { status: 404 });
  if (req.method !== "GET" && req.method !== "HEAD")
    return new Response("method not allowed", { status: 405, headers: { Allow: "GET, HEAD" } });
  const token = config.metrics.token;
  if (token) {
    if (!tokenMatches(req.headers.get("authorization"), token))
      return new Response("unauthorized", { status: 401, headers: { "WWW-Authenticate": 'Bearer realm="metrics"' } });
  } else if (!config.metrics.public && (!isLoopback(peer) || proxied(req, config)))
    return new Response(
      "forbidden: /metrics is served to loopback only; set [metrics] token (or public = true) to scrape it from elsewhere",
      { status: 403 },
    );
  return new Response(await render(), { headers: { "Content-Type": CONTENT_TYPE, "Cache-Control": "no-store" } });
}
