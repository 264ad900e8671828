// NIP-42 AUTH: the signature is verified before the pubkey is trusted; a connection may
// authenticate several pubkeys.
import { checkAuthEvent, normalizeRelayUrl } from "../nips/nip42.ts";
import { chargeRate, rateLimitMessage } from "../policy/rate-limit.ts";
import { hasValidId, nowSeconds, validateEventShape, type NostrEvent } from "../protocol/event.ts";
import { ProtocolError, refusalText } from "../protocol/reasons.ts";
import type { RelayContext } from "./context.ts";
import { MAX_VERIFY_BACKLOG } from "../verify/pool.ts";
import { okFrame, send, type Socket } from "./connection/session.ts";

/** AUTHs of one connection being verified at once. */
const MAX_AUTH_PENDING = 4;
/**
 * AUTHs of one connection refused as rate-limited before it is closed (1008). A client signs in
 * once per pubkey and waits for the OK (one pipelining max_auth_pubkeys AUTHs at once gets 12
 * in-flight refusals); past this it is a flood, and each of its frames still costs a JSON parse
 * and an OK: closed, it must pay for new connections too ([rate_limits] connections_*). Measured
 * (test/auth-flood.test.ts): cut after 64, reconnecting attackers still took the honest client's
 * p50 from 3 ms to 60-100 ms; after 16, 3-4 ms.
 */
const MAX_AUTH_REFUSALS = 16;
const IN_FLIGHT = "rate-limited: too many AUTH messages in flight, wait for their OK";

/**
 * The URLs an AUTH relay tag may name: info.relay_url (normalized: its scheme, host, port and
 * path must match); without one, this connection's Host with the relay's path, over ws or wss
 * (the relay cannot tell whether a TLS proxy sits in front, so either scheme is this relay).
 */
function expectedRelayUrls(ctx: RelayContext, host: string): string[] {
  const configured = normalizeRelayUrl(ctx.config.info.relay_url);
  if (configured) return [configured];
  const path = ctx.config.network.path;
  return [`ws://${host}${path}`, `wss://${host}${path}`].map(normalizeRelayUrl).filter((u): u is string => u !== undefined);
}

/** The id to answer an AUTH with before its event is read (a string, cut to 64 characters), else "". */
function claimedId(raw: unknown): string {
  const id = (raw as { id?: unknown } | null)?.id;
  return typeof id === "string" ? id.slice(0, 64) : "";
}

/**
 * An AUTH costs a signature check and, before it, a shape check and a SHA-256 of the event: a
 * flood of them (an id is only a hash to forge, and a bad signature is free to make) must be
 * refused before any of that. So the cheap checks come first, on nothing but the frame's parsed
 * JSON: the address's AUTH bucket (every AUTH is charged), then how many are being verified.
 * Returns the verification's promise when the AUTH gets that far, else answers at once.
 */
export function handleAuth(ctx: RelayContext, ws: Socket, raw: unknown): Promise<void> | undefined {
  const s = ws.data;
  const wait = chargeRate(ctx.config, ctx.rates, "auths", s);
  if (wait > 0) return refuseFlood(ctx, ws, raw, `rate-limited: ${rateLimitMessage("auths", wait)}`);
  // A client waits for its AUTH's OK; a pipelined flood would fill the verify queue every EVENT
  // shares: a few per connection, none past the backlog.
  if (s.authPending >= MAX_AUTH_PENDING || ctx.authVerifier.depth >= MAX_VERIFY_BACKLOG) return refuseFlood(ctx, ws, raw, IN_FLIGHT);
  let e: NostrEvent;
  try {
    e = validateEventShape(raw);
  } catch (err) {
    if (!(err instanceof ProtocolError)) throw err;
    return refuse(ctx, ws, claimedId(raw), err.text);
  }
  const relayUrls = ctx.config.options.auth_relay_url_check ? expectedRelayUrls(ctx, s.host) : undefined;
  const refusal = checkAuthEvent(e, { challenge: s.challenge, relayUrls, now: nowSeconds() });
  if (refusal) return refuse(ctx, ws, e.id, refusalText(refusal));
  if (!hasValidId(e)) return refuse(ctx, ws, e.id, "invalid: event id does not match the event");
  return verifyAuth(ctx, ws, e);
}

/** OK false, answered at once. */
function refuse(ctx: RelayContext, ws: Socket, id: string, text: string): undefined {
  send(ws, okFrame(ctx.metrics, id, false, text));
  return undefined;
}

/** OK false `rate-limited:`; the connection is closed once it has had MAX_AUTH_REFUSALS of them. */
function refuseFlood(ctx: RelayContext, ws: Socket, raw: unknown, text: string): undefined {
  refuse(ctx, ws, claimedId(raw), text);
  if (++ws.data.authRefusals === MAX_AUTH_REFUSALS && !ws.data.closed) ws.close(1008, "too many AUTH messages");
  return undefined;
}

async function verifyAuth(ctx: RelayContext, ws: Socket, e: NostrEvent): Promise<void> {
  const s = ws.data;
  // AUTH is always verified, even with verify_signatures off: it grants identity.
  s.authPending++;
  let valid: boolean;
  try {
    valid = await ctx.authVerifier.verify(e);
  } finally {
    s.authPending--;
  }
  if (!valid) return send(ws, okFrame(ctx.metrics, e.id, false, "invalid: signature verification failed"));
  if (!s.authed.has(e.pubkey) && s.authed.size >= ctx.config.limits.max_auth_pubkeys)
    return send(
      ws,
      okFrame(ctx.metrics, e.id, false, `rate-limited: at most ${ctx.config.limits.max_auth_pubkeys} pubkeys per connection`),
    );
  s.authed.add(e.pubkey);
  send(ws, okFrame(ctx.metrics, e.id, true, ""));
}
