// The EVENT pipeline, top to bottom, for every way an event comes in: a client's EVENT
// (relay/write/ingest.ts), a [mirror] relay (relay/write/mirror.ts), and `bunstr import`, `sync` and
// `stream` (ops/import.ts). The order of the steps is the specification:
//   shape -> throttle -> policies -> writer queue full? -> id hash -> duplicate -> signature
//   -> ledger reserve -> write-policy plugin -> store (or a relay request answered, or fan out
//   ephemeral) -> ledger settle -> the outcome (the caller answers OK, or counts it)
// What differs between the entry points is handed in, never tested for here: the policies and
// what they see, a throttle, the plugin (Source); where ephemeral events go and which writer
// stores (AdmitContext). Whoever answers a client answers from the outcome only after the writer
// has committed the event (WriterQueue resolves after the commit).
// A request to vanish (kind 62) refused only for the sender's standing (AUTH, bans, allow and
// deny lists, kind lists: policy/defaults.ts judgeEvent) goes on through id and signature to the
// writer, which carries out the deletion but stores nothing (NIP-62: "regardless of the user's
// status"); its outcome is that refusal, saying the deletion was done.
import { log } from "../log.ts";
import { eventJson, hasValidId, serializeEvent, validateEventShape, type NostrEvent } from "../protocol/event.ts";
import { isEphemeral } from "../protocol/kinds.ts";
import { ProtocolError, refuse, type Refusal } from "../protocol/reasons.ts";
import { judgeEvent } from "../policy/defaults.ts";
import { chargedGroup } from "../policy/rate-limit.ts";
import type { Policy, PolicyContext } from "../policy/rules.ts";
import { writeCost } from "../policy/write-cost.ts";
import type { PendingWrite, Store, WriteOutcome } from "../store/types.ts";
import type { Outcome, RefusedFate } from "./outcome.ts";

/** Where admitted events go. The relay's context (relay/context.ts) is one as it is. */
export interface AdmitContext {
  /** Shutting down: nothing new is taken. */
  readonly closing: boolean;
  /** Events between their duplicate check and their outcome, from every source; shutdown waits for them. */
  inflight: number;
  /** The duplicate check (Store.hasNow, then Store.has when that has no answer). */
  readonly store: Pick<Store, "has" | "hasNow">;
  readonly verifier: { verify(e: NostrEvent): Promise<boolean> };
  /**
   * Resolves once the write is committed (or refused). refusalFor: a refusal when the queue (or
   * the sender's share of it) is full already, asked before the id and signature are checked.
   * `deleting`: a NIP-09 deletion with this id whose OK is held until its targets are gone
   * (store/queue.ts), resolving then.
   */
  readonly writer: {
    enqueue(w: PendingWrite): Promise<WriteOutcome>;
    refusalFor?(group: string | undefined): Refusal | undefined;
    deleting?(id: string): Promise<void> | undefined;
  };
  /** Fans an ephemeral event out to live subscribers; without it (an import) ephemeral events are dropped before their signature is checked. */
  ephemeral?(e: NostrEvent, json: string): void;
}

/** The write-policy plugin's answer (relay/plugin/plugin.ts); undefined: accepted. */
interface PluginVerdict {
  accepted: boolean;
  message: string;
}

/** Where one event comes from: what it is judged by. */
export interface Source {
  readonly policies: readonly Policy[];
  readonly policy: PolicyContext;
  /** Asked right after the shape: a refusal when too much is in flight (a client's connection, the verifier's backlog). */
  throttle?(): Refusal | undefined;
  /** The sending connection's own count of events in flight (the throttle reads it). */
  readonly session?: { inflight: number };
  /** The last check, of valid new events to be stored or fanned out: the operator's plugin. */
  writePolicy?(e: NostrEvent, json: string): PluginVerdict | undefined | Promise<PluginVerdict | undefined>;
  /**
   * Issue 33, NIP-43 (relay/membership.ts): an ephemeral event the relay answers itself (join
   * 28934, leave 28936 with [membership] on); undefined: not one, fanned out as usual. Its answer
   * is the OK (fate "answered"); it is never fanned out.
   */
  relayRequest?(e: NostrEvent): Promise<PluginVerdict> | undefined;
  /**
   * Issue 33, paid per event (access/ledger.ts): asked after the signature (a forged event never
   * touches a balance) and before the plugin; `reserve` refuses when the balance less what is
   * reserved does not cover the event; each reserve that did not refuse is settled once, with
   * whether the event was stored (charged) or not (released). On a client's Source only: a
   * mirror's or an import's events are the operator's choice, never charged. Absent: nothing is.
   */
  readonly ledger?: {
    /** A promise when the balance is the database's (Postgres: several nodes charge it). */
    reserve(pubkey: string): Refusal | undefined | Promise<Refusal | undefined>;
    settle(pubkey: string, stored: boolean): void;
  };
}

const INVALID_ID = refuse("invalid", "event id does not match the event");
const INVALID_SIG = refuse("invalid", "signature verification failed");
const SHUTTING_DOWN = refuse("error", "relay is shutting down");
const CHECK_FAILED = refuse("error", "could not check the event, try again");

/**
 * Takes an event (parsed JSON, of any shape) through the pipeline; resolves with what became of
 * it once that is final (stored means committed). Rejects only when the verifier or the writer
 * fails unexpectedly: the caller answers or stops.
 */
export async function admit(ctx: AdmitContext, raw: unknown, src: Source): Promise<Outcome> {
  let e: NostrEvent;
  try {
    e = validateEventShape(raw);
  } catch (err) {
    if (!(err instanceof ProtocolError)) throw err;
    return { event: undefined, fate: "badEvent", refusal: refuse(err.prefix, err.message) };
  }
  const no = (fate: RefusedFate, refusal: Refusal): Outcome => ({ event: e, fate, refusal });

  if (ctx.closing) return no("refused", SHUTTING_DOWN);
  const throttled = src.throttle?.();
  if (throttled) return no("refused", throttled);

  // Its write cost, found once: charged by the rate limit (policy/rules.ts eventRate), and the writer queue's.
  const cost = writeCost(e);
  const { refusal, vanishOnly } = judgeEvent(src.policies, { ...src.policy, cost }, e);
  if (refusal && !vanishOnly) return no("refused", refusal);
  // A writer queue that would refuse it anyway (full, or the sender's share full): before the work.
  const group = chargedGroup(src.policy.config, src.policy);
  const queueFull = isEphemeral(e.kind) ? undefined : ctx.writer.refusalFor?.(group);
  if (queueFull) return no("refused", queueFull);

  // The id before the duplicate check, so nobody learns which ids are stored without the event.
  // Tags and content are encoded once: for the id hash here and for the stored form below.
  const encoded = eventJson(e);
  if (!hasValidId(e, encoded)) return no("badId", INVALID_ID);

  const ephemeral = isEphemeral(e.kind);
  if (ephemeral && !ctx.ephemeral) return { event: e, fate: "ephemeral" }; // nobody to send it to
  // In flight from here: a relay closing waits for its outcome before it closes the connection.
  src.session && src.session.inflight++;
  ctx.inflight++;
  try {
    // Cheaper than a signature check, and the common case for a busy relay. A SQLite store answers
    // at once; a Postgres one over the network, which can fail (the event still gets its outcome).
    // hasNow may say "not known" rather than wait for a commit: the write then finds a stored
    // event and answers it the same (store/types.ts); or nothing, and has is asked. The plugin
    // must see only new events, so with one the answer is the exact one.
    let known = false;
    if (!ephemeral) {
      try {
        known = (src.writePolicy ? undefined : ctx.store.hasNow(e.id)) ?? (await ctx.store.has(e.id));
      } catch (err) {
        log.error("event pipeline error:", err);
        return no("refused", CHECK_FAILED);
      }
    }
    if (known) {
      // A deletion sent again while its first copy still deletes: answered after that one.
      const deleting = ctx.writer.deleting?.(e.id);
      if (deleting) await deleting;
      return refusal ? no("refused", refusal) : { event: e, fate: "duplicate" };
    }

    if (!(await ctx.verifier.verify(e))) return no("badSig", INVALID_SIG);
    const json = serializeEvent(e, encoded);
    if (refusal) {
      // vanishOnly: nothing of it is stored, so the write-policy plugin is not asked.
      const o = await ctx.writer.enqueue({ event: e, json, vanishOnly: refusal, group });
      return no("refused", o.stored || o.duplicate ? refusal : o.refusal);
    }
    // Paid per event: reserved now, charged once stored (released otherwise).
    const reserving = src.ledger?.reserve(e.pubkey);
    const held = reserving instanceof Promise ? await reserving : reserving;
    if (held) return no("refused", held);
    let stored = false;
    try {
      // The operator's plugin (strfry's protocol) is the costliest check: it sees only valid, new events.
      const verdict = src.writePolicy && (await src.writePolicy(e, json));
      if (verdict) return { event: e, fate: "plugin", ...verdict }; // a shadow reject is OK true, never stored
      if (ephemeral) {
        const answer = src.relayRequest?.(e);
        if (answer) return { event: e, fate: "answered", ...(await answer) };
        ctx.ephemeral!(e, json);
        return { event: e, fate: "ephemeral" };
      }
      // The writer queue is fair between the addresses charged for their events, and cuts its batches by cost.
      const o = written(e, await ctx.writer.enqueue({ event: e, json, group, cost }));
      stored = o.fate === "accepted";
      return o;
    } finally {
      src.ledger?.settle(e.pubkey, stored);
    }
  } finally {
    src.session && src.session.inflight--;
    ctx.inflight--;
  }
}

/** The writer's outcome as the pipeline's. */
function written(e: NostrEvent, o: WriteOutcome): Outcome {
  if (o.stored) return { event: e, fate: "accepted" };
  if (o.duplicate) return { event: e, fate: "duplicate" };
  const fate = o.refusal.prefix === "blocked" ? "deleted" : o.refusal.prefix === "duplicate" ? "older" : "refused";
  return { event: e, fate, refusal: o.refusal };
}
