// A client's EVENT: admit/admit.ts runs the pipeline (shape, policies, id, duplicate, signature,
// write-policy plugin, store or fan out); this file says what a connection adds to it (its
// policies' view, its throttle, the plugin) and answers OK from the outcome.
// OK true is sent only once the event is committed: the writer queue resolves an outcome after
// its batch's commit (store/queue.ts). It first hands each stored event to the fanout, in commit
// order, synchronously, so live subscribers are sent the event before its author gets the OK.
// (A Postgres store fans out from its commit feed instead, which can come after the OK.)
import { log } from "../../log.ts";
import { admit, type Source } from "../../admit/admit.ts";
import { okAccepted, okMessage, type Outcome } from "../../admit/outcome.ts";
import { isGroupActionKind } from "../../nips/nip29.ts";
import { refuse, refusalText } from "../../protocol/reasons.ts";
import { MAX_VERIFY_BACKLOG } from "../../verify/pool.ts";
import type { RelayContext } from "../context.ts";
import { askWritePolicy } from "../plugin/plugin.ts";
import { policyContext } from "./policy-context.ts";
import { okFrame, send, sendSoon, type Socket } from "../connection/session.ts";

const TOO_MANY = refuse("rate-limited", "too many events in flight on this connection");
const OVERLOADED = refuse("rate-limited", "relay is overloaded, try again shortly");
const STORE_FAILED = refusalText(refuse("error", "could not store the event"));

/** The id to answer an unparseable event with: the claimed one if it is a string, else "". */
const claimedId = (raw: unknown): string => {
  const id = (raw as { id?: unknown } | null)?.id;
  return typeof id === "string" ? id.slice(0, 64) : "";
};

/** What an EVENT from this connection is judged by. */
function clientSource(ctx: RelayContext, ws: Socket): Source {
  const s = ws.data;
  return {
    policies: ctx.policies,
    policy: policyContext(ctx, s),
    throttle: () =>
      s.inflight >= ctx.config.limits.max_pending_events ? TOO_MANY : ctx.verifier.depth >= MAX_VERIFY_BACKLOG ? OVERLOADED : undefined,
    session: s,
    writePolicy: (e, json) => askWritePolicy(ctx, s, e, json),
    // NIP-43 join and leave, answered by the relay (relay/membership.ts).
    relayRequest: ctx.membership && ((e) => ctx.membership?.relayRequest(e, s.authed)),
    // Paid per event (access/ledger.ts): a client's events only, never a mirror's.
    ledger: ctx.ledger,
  };
}

export async function handleEvent(ctx: RelayContext, ws: Socket, raw: unknown): Promise<void> {
  let o: Outcome;
  try {
    o = await admit(ctx, raw, clientSource(ctx, ws));
  } catch (err) {
    // The verifier or the writer failed (admit.ts): the event passed the shape check.
    log.error("event pipeline error:", err);
    ctx.metrics.countEventResult((raw as { kind: number }).kind, false, STORE_FAILED);
    return sendSoon(ws, okFrame(ctx.metrics, claimedId(raw), false, STORE_FAILED));
  }
  if (!o.event) {
    ctx.metrics.countOutcome(undefined, o);
    return send(ws, okFrame(ctx.metrics, claimedId(raw), false, okMessage(o)));
  }
  ctx.metrics.countOutcome(o.event.kind, o);
  // NIP-29: what follows from a group moderation, join or leave event (the relay's 9000 answering
  // a join, the group's new 39000-39005) is committed before the OK, so the client reads it at once.
  // Stored but skipped at its commit (admitted on a view a burst in flight made stale): told why.
  const skipped =
    o.fate === "accepted" && ctx.groupRelay && isGroupActionKind(o.event.kind) ? await ctx.groupRelay.accepted(o.event) : undefined;
  // OKs of one committed batch leave in one write per socket (sendSoon corks them).
  if (skipped) sendSoon(ws, okFrame(ctx.metrics, o.event.id, false, refusalText(skipped)));
  else sendSoon(ws, okFrame(ctx.metrics, o.event.id, okAccepted(o), okMessage(o)));
}
