// NIP-42 AUTH: the signature is verified before the pubkey is trusted; a connection may
// authenticate several pubkeys.
import { checkAuthEvent, normalizeRelayUrl } from "../nips/nip42.ts";
import { hasValidId, nowSeconds, validateEventShape } from "../protocol/event.ts";
import { ProtocolError, refusalText } from "../protocol/reasons.ts";
import type { RelayContext } from "./context.ts";
import { MAX_VERIFY_BACKLOG } from "../verify/pool.ts";
import { okFrame, send, type Socket } from "./session.ts";

/** AUTHs of one connection being verified at once. */
const MAX_AUTH_PENDING = 4;

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

export async function handleAuth(ctx: RelayContext, ws: Socket, raw: unknown): Promise<void> {
  let e;
  try {
    e = validateEventShape(raw);
  } catch (err) {
    if (!(err instanceof ProtocolError)) throw err;
    const id = (raw as { id?: unknown } | null)?.id;
    return send(ws, okFrame(ctx.metrics, typeof id === "string" ? id.slice(0, 64) : "", false, err.text));
  }
  const s = ws.data;
  const relayUrls = ctx.config.options.auth_relay_url_check ? expectedRelayUrls(ctx, s.host) : undefined;
  const refusal = checkAuthEvent(e, { challenge: s.challenge, relayUrls, now: nowSeconds() });
  if (refusal) return send(ws, okFrame(ctx.metrics, e.id, false, refusalText(refusal)));
  if (!hasValidId(e)) return send(ws, okFrame(ctx.metrics, e.id, false, "invalid: event id does not match the event"));
  // A client waits for its AUTH's OK; a pipelined flood of them (an id is only a hash to forge)
  // would fill the verify queue every EVENT shares: a few per connection, none past the backlog.
  if (s.authPending >= MAX_AUTH_PENDING || ctx.authVerifier.depth >= MAX_VERIFY_BACKLOG)
    return send(ws, okFrame(ctx.metrics, e.id, false, "rate-limited: too many AUTH messages in flight, wait for their OK"));
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
