// NIP-42 AUTH: the signature is verified before the pubkey is trusted; a connection may
// authenticate several pubkeys.
import { checkAuthEvent } from "../nips/nip42.ts";
import { hasValidId, validateEventShape } from "../protocol/event.ts";
import { ProtocolError, refusalText } from "../protocol/reasons.ts";
import type { RelayContext } from "./context.ts";
import { okFrame, send, type Socket } from "./session.ts";

function hostOf(url: string): string | undefined {
  try {
    return url ? new URL(url).host : undefined;
  } catch {
    return undefined;
  }
}

export async function handleAuth(ctx: RelayContext, ws: Socket, raw: unknown): Promise<void> {
  let e;
  try {
    e = validateEventShape(raw);
  } catch (err) {
    if (!(err instanceof ProtocolError)) throw err;
    const id = (raw as { id?: unknown } | null)?.id;
    return send(ws, okFrame(typeof id === "string" ? id.slice(0, 64) : "", false, err.text));
  }
  const s = ws.data;
  const relayHost = !ctx.config.options.auth_relay_url_check ? undefined : (hostOf(ctx.config.info.relay_url) ?? s.host);
  const refusal = checkAuthEvent(e, { challenge: s.challenge, relayHost, now: Math.floor(Date.now() / 1000) });
  if (refusal) return send(ws, okFrame(e.id, false, refusalText(refusal)));
  if (!hasValidId(e)) return send(ws, okFrame(e.id, false, "invalid: event id does not match the event"));
  // AUTH is always verified, even with verify_signatures off: it grants identity.
  if (!(await ctx.authVerifier.verify(e))) return send(ws, okFrame(e.id, false, "invalid: signature verification failed"));
  if (!s.authed.has(e.pubkey) && s.authed.size >= ctx.config.limits.max_auth_pubkeys)
    return send(ws, okFrame(e.id, false, `rate-limited: at most ${ctx.config.limits.max_auth_pubkeys} pubkeys per connection`));
  s.authed.add(e.pubkey);
  send(ws, okFrame(e.id, true, ""));
}
