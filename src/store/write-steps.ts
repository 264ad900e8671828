// The steps of writing one event, in the one order both writers take them (store/sqlite/write.ts
// and store/postgres/write.ts, writeOne), and which tags are indexed. Each step is asked of the
// backend, which looks up or writes in its own SQL; the decisions are semantics.ts's. A
// generator: the SQLite writer answers each step synchronously (runSteps), the Postgres writer
// awaits each (runStepsAsync). test/postgres/write-parity.pgtest.ts holds the two equal.
import { DELETION_KIND } from "../nips/nip09.ts";
import { VANISH_CARRIED_OUT, VANISH_KIND } from "../nips/nip62.ts";
import type { Refusal } from "../protocol/reasons.ts";
import { addressOf, OUTDATED, replacement, type Dated } from "./semantics.ts";
import type { PendingWrite, WriteOutcome, WriteRules } from "./types.ts";

/** Only the first value of single-letter tags is indexed (NIP-01). */
const SINGLE_LETTER = /^[a-zA-Z]$/;

/**
 * Is this tag a row of the tags table? Both writers write its rows (and SQLite deletes them) from
 * the event's own tags as parsed, bound the same way (issue 13: SQL's JSON functions gave back
 * other values than the ones written). Postgres also leaves out values its text cannot hold.
 */
export const indexedTag = (t: readonly string[]): t is [string, string, ...string[]] =>
  t[1] !== undefined && t[0] !== undefined && SINGLE_LETTER.test(t[0]);

/** What a writer is asked, and (in the comment) what it answers. */
export type WriteStep<V extends Dated> =
  /** Is an event with this id stored? -> boolean */
  | { step: "stored" }
  /** NIP-62: the tombstone written, the purge recorded (and begun), keeping the stored request at `keep`. -> nothing */
  | { step: "vanish"; keep: number | null }
  /** Why the event may not (re)enter (semantics.ts tombstoneRefusal), from the tombstones. -> Refusal | undefined */
  | { step: "tombstoned" }
  /** The stored versions of its address (a replaceable or addressable event). -> V[] */
  | { step: "versions" }
  /** Delete the versions it replaces. -> nothing */
  | { step: "replace"; versions: V[] }
  /** Insert the event, its tag rows (indexedTag) and its search text. -> its seq, or undefined for a duplicate */
  | { step: "insert" }
  /** NIP-09: the tombstones written, the targets purged (at once, else in steps). -> the purge left, or undefined */
  | { step: "delete"; seq: number };

export type Steps<V extends Dated> = Generator<WriteStep<V>, WriteOutcome, unknown>;

const DUPLICATE: WriteOutcome = { stored: false, duplicate: true };
const refused = (refusal: Refusal): WriteOutcome => ({ stored: false, duplicate: false, refusal });

/** The order of one event's write: the writer answers each step it yields. */
export function* writeSteps<V extends Dated>({ event: e, vanishOnly }: PendingWrite, rules: WriteRules): Steps<V> {
  // A request to vanish meets two steps before the insert that would take a stored one for
  // new: carried out again as a vanish-only write (deleting the kept request itself), and
  // refused by its own tombstone. Sent again (or its check said "not known": types.ts
  // hasNow), it is a duplicate first. Other events' duplicates are found by the insert.
  if (e.kind === VANISH_KIND && (yield { step: "stored" })) return DUPLICATE;
  if (vanishOnly !== undefined) {
    // Refused for the sender's standing, carried out anyway (NIP-62), never stored.
    if (e.kind !== VANISH_KIND || !rules.vanish) return refused(vanishOnly);
    yield { step: "vanish", keep: null };
    return refused({ prefix: vanishOnly.prefix, message: vanishOnly.message + VANISH_CARRIED_OUT });
  }
  const gone = (yield { step: "tombstoned" }) as Refusal | undefined;
  if (gone) return refused(gone);
  if (addressOf(e) !== null) {
    const versions = (yield { step: "versions" }) as V[];
    const verdict = replacement(e, versions);
    if (verdict === "duplicate") return DUPLICATE;
    if (verdict === "outdated") return refused(OUTDATED);
    if (versions.length > 0) yield { step: "replace", versions };
  }
  const seq = (yield { step: "insert" }) as number | undefined;
  if (seq === undefined) return DUPLICATE;
  if (e.kind === VANISH_KIND && rules.vanish) yield { step: "vanish", keep: seq };
  const purge = e.kind === DELETION_KIND && rules.deletion ? ((yield { step: "delete", seq }) as number | undefined) : undefined;
  return purge === undefined ? { stored: true, seq } : { stored: true, seq, purge };
}

/** Runs the steps with a writer that answers at once (SQLite, inside its transaction). */
export function runSteps<V extends Dated>(steps: Steps<V>, answer: (s: WriteStep<V>) => unknown): WriteOutcome {
  let r = steps.next();
  while (!r.done) r = steps.next(answer(r.value));
  return r.value;
}

/** Runs the steps with a writer that answers asynchronously (Postgres, a statement each). */
export async function runStepsAsync<V extends Dated>(
  steps: Steps<V>,
  answer: (s: WriteStep<V>) => Promise<unknown>,
): Promise<WriteOutcome> {
  let r = steps.next();
  while (!r.done) r = steps.next(await answer(r.value));
  return r.value;
}
