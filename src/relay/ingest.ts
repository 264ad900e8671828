// The EVENT pipeline, top to bottom. The order of the steps is the specification:
//   shape -> policies -> id hash -> duplicate -> signature -> write-policy plugin
//   -> store (or fan out ephemeral)
//   -> OK (only after the commit) -> fanout (done by the writer, right after the commit).
// A request to vanish (kind 62) refused only for the sender's standing (AUTH, bans, allow and
// deny lists, kind lists: policy/defaults.ts judgeEvent) goes on through id and signature to the
// writer, which carries out the deletion but stores nothing (NIP-62: "regardless of the user's
// status"); its OK is false with that refusal, saying the deletion was done.
import { hasValidId, serializeEvent, validateEventShape, type NostrEvent } from "../protocol/event.ts";
import { isEphemeral } from "../protocol/kinds.ts";
import { ProtocolError, refusalText } from "../protocol/reasons.ts";
import { judgeEvent } from "../policy/defaults.ts";
import { askWritePolicy } from "./plugin.ts";
import { MAX_VERIFY_BACKLOG } from "../verify/pool.ts";
import type { RelayContext } from "./context.ts";
import { policyContext } from "./policy-context.ts";
import { okFrame, send, sendSoon, type Socket } from "./session.ts";

/** The id to answer an unparseable event with: the claimed one if it is a string, else "". */
const claimedId = (raw: unknown): string => {
  const id = (raw as { id?: unknown } | null)?.id;
  return typeof id === "string" ? id.slice(0, 64) : "";
};

export async function handleEvent(ctx: RelayContext, ws: Socket, raw: unknown): Promise<void> {
  const s = ws.data;
  let e: NostrEvent;
  try {
    e = validateEventShape(raw);
  } catch (err) {
    if (!(err instanceof ProtocolError)) throw err;
    ctx.metrics.countEventResult(undefined, false, err.text);
    return send(ws, okFrame(ctx.metrics, claimedId(raw), false, err.text));
  }
  // OKs of one committed batch leave in one write per socket (sendSoon corks them).
  const ok = (accepted: boolean, message: string) => {
    ctx.metrics.countEventResult(e.kind, accepted, message);
    sendSoon(ws, okFrame(ctx.metrics, e.id, accepted, message));
  };

  if (ctx.closing) return ok(false, "error: relay is shutting down");
  if (s.inflight >= ctx.config.limits.max_pending_events) return ok(false, "rate-limited: too many events in flight on this connection");
  if (ctx.verifier.depth >= MAX_VERIFY_BACKLOG) return ok(false, "rate-limited: relay is overloaded, try again shortly");

  const { refusal, vanishOnly } = judgeEvent(ctx.policies, policyContext(ctx, s), e);
  if (refusal && !vanishOnly) return ok(false, refusalText(refusal));

  // The id before the duplicate check, so nobody learns which ids are stored without the event.
  if (!hasValidId(e)) return ok(false, "invalid: event id does not match the event");

  const ephemeral = isEphemeral(e.kind);
  // Cheaper than a signature check, and the common case for a busy relay. (A Postgres store
  // answers over the network: that can fail, and the EVENT still gets its OK.)
  let known: boolean;
  try {
    known = !ephemeral && (await ctx.store.has(e.id));
  } catch (err) {
    console.error("event pipeline error:", err);
    return ok(false, "error: could not check the event, try again");
  }
  if (known) return refusal ? ok(false, refusalText(refusal)) : ok(true, "duplicate: already have this event");

  s.inflight++;
  ctx.inflight++;
  try {
    if (!(await ctx.verifier.verify(e))) return ok(false, "invalid: signature verification failed");
    const json = serializeEvent(e);
    if (refusal) {
      // vanishOnly: nothing of it is stored, so the write-policy plugin is not asked.
      const outcome = await ctx.writer.enqueue({ event: e, json, vanishOnly: refusalText(refusal) });
      return ok(false, outcome.stored || outcome.duplicate ? refusalText(refusal) : outcome.reason);
    }
    // The operator's plugin (strfry's protocol) is the costliest check: it sees only valid, new events.
    const verdict = await askWritePolicy(ctx, s, e, json);
    if (verdict) return ok(verdict.accepted, verdict.message); // a shadow reject is OK true, never stored
    if (ephemeral) {
      ctx.ephemeral(e, json);
      return ok(true, "");
    }
    const outcome = await ctx.writer.enqueue({ event: e, json });
    if (outcome.stored) ok(true, "");
    else if (outcome.duplicate) ok(true, "duplicate: already have this event");
    else ok(false, outcome.reason);
  } catch (err) {
    console.error("event pipeline error:", err);
    ok(false, "error: could not store the event");
  } finally {
    s.inflight--;
    ctx.inflight--;
  }
}
