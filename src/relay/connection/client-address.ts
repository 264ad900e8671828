// Who a connection is: the socket's peer, or behind a trusted proxy the address its
// remote_ip_header names ([network]). Every per-address limit counts by this address.
import { log } from "../../log.ts";
import type { Server } from "bun";
import type { Config } from "../../config/schema.ts";
import { clientAddress, proxyWarning } from "../../policy/ip.ts";
import type { Session } from "./session.ts";

/** The socket's peer address; an IPv4 peer on a dual-stack socket shows as ::ffff:a.b.c.d, read as a.b.c.d. */
const peerAddress = (req: Request, srv: Server<Session>): string =>
  (srv.requestIP(req)?.address ?? "").replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, "");

/** The socket's peer, or what remote_ip_header says when the peer is a trusted proxy. */
export function clientIp(req: Request, srv: Server<Session>, config: Config): string {
  return clientAddress(peerAddress(req, srv), req.headers, config.network);
}

/**
 * Warns when a proxy seems to forward connections and the config does not read it (proxyWarning);
 * true once it has, so the caller asks no more (once per relay).
 */
export function warnIfProxied(config: Config, req: Request, srv: Server<Session>): boolean {
  const { network, rate_limits } = config;
  const warning = proxyWarning(peerAddress(req, srv), req.headers, network, rate_limits.exempt_private_addresses);
  if (warning === undefined) return false;
  log.warn(warning);
  return true;
}
