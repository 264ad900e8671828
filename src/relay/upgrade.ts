// The websocket upgrade on the relay path: who is let in (blocked addresses, the connection
// limits, the connection rate), the session a connection starts with (connection/session.ts),
// and the guard told of it (connection/fd-guard.ts).
import type { Server } from "bun";
import { ipGroup, tally } from "../policy/ip.ts";
import { chargeRate } from "../policy/rate-limit.ts";
import { clientIp, warnIfProxied } from "./connection/client-address.ts";
import { newSession, type Session } from "./connection/session.ts";
import type { Live } from "./wiring.ts";

const CLOSE = { Connection: "close" };

/** Upgrades the request to a websocket, or answers why not; undefined once upgraded. */
export function upgrade(live: Live, req: Request, srv: Server<Session>): Response | undefined {
  const { ctx, config, sockets, perIp } = live;
  const ip = clientIp(req, srv, config);
  if (!live.proxyWarned) live.proxyWarned = warnIfProxied(config, req, srv);
  // Refusals close the connection: a client kept alive would hold a descriptor for nothing.
  if (ctx.admin.blockedIps.has(ip)) return new Response("this address is blocked", { status: 403, headers: CLOSE });
  // Until the group state is rebuilt (at start, on every hand-over) the read rule cannot tell a
  // private group's events: nobody is let in to ask (the old process of a hand-over still serves).
  if (config.groups.enabled && ctx.groups && !ctx.groups.ready)
    return new Response("starting", { status: 503, headers: { ...CLOSE, "Retry-After": "1" } });
  // While closing, a connection accepted before the listener closed is still upgraded, then
  // told to reconnect (in open): a close code clients act on rather than a failed connect, and
  // whatever it sends before it reads the NOTICE is answered first (connection/drain.ts).
  if (!ctx.closing) {
    if (config.limits.max_connections > 0 && sockets.size >= config.limits.max_connections)
      return new Response("too many connections", { status: 503, headers: CLOSE });
    const group = ipGroup(ip);
    if ((perIp.get(group) ?? 0) >= config.limits.max_connections_per_ip)
      return new Response("too many connections from this address", { status: 429, headers: CLOSE });
    // Before AUTH nobody is known, so new connections are limited per IP only.
    const wait = chargeRate(config, ctx.rates, "connections", { ip, group });
    if (wait > 0)
      return new Response("rate-limited: too many new connections from this address", {
        status: 429,
        headers: { ...CLOSE, "Retry-After": String(Math.ceil(wait / 1000)) },
      });
  }
  const compression = config.network.compression !== "off";
  const data = newSession(ip, req.headers.get("host") ?? "", compression, {
    handshake: handshakeBytes(req),
    deflated: compression && offersDeflate(live, req, ipGroup(ip)),
  });
  // Read before upgrade(): the request has no socket of its own after it.
  const peer = live.guard && srv.requestIP(req);
  if (srv.upgrade(req, { data })) {
    tally(perIp, data.group, 1);
    if (peer) live.peers.set(data, live.guard!.addWebsocket(peer.address, peer.port, data.wire));
    return undefined;
  }
  return new Response("websocket upgrade failed", { status: 400 });
}

/**
 * Whether the client offers permessage-deflate and may have it. An address over its inflation
 * budget (connection/inflation.ts) does not: the offer is taken out of the request, and Bun then upgrades
 * without the extension.
 */
function offersDeflate(live: Live, req: Request, group: string): boolean {
  if (!/permessage-deflate/i.test(req.headers.get("sec-websocket-extensions") ?? "")) return false;
  if (live.inflation.mayDeflate(group)) return true;
  req.headers.delete("sec-websocket-extensions");
  return false;
}

/**
 * The upgrade request's size on the wire, near enough (the kernel counts it among the socket's
 * bytes received; connection/fd-guard.ts): request line, headers as "name: value", the blank line.
 */
function handshakeBytes(req: Request): number {
  const url = new URL(req.url);
  let n = `GET ${url.pathname}${url.search} HTTP/1.1\r\n\r\n`.length;
  for (const [k, v] of req.headers) n += k.length + v.length + 4;
  return n;
}
