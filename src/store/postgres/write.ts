// The Postgres writer: NIP-01/09/40/50/62 storage semantics, one transaction per batch, as the
// SQLite writer (store/sqlite/write.ts) but safe with several nodes writing at once. Every batch first
// takes the relay_seq row lock and a range of seqs: batches of all nodes are serialized and
// commit in seq order, so "all seqs up to N are committed" holds once N is (postgres/order.ts).
import type { SQL } from "bun";
import { deletionTargets, DELETION_KIND, type Address } from "../../nips/nip09.ts";
import { expirationOf } from "../../nips/nip40.ts";
import { tokens, searchableText } from "../../nips/nip50.ts";
import { VANISH_KIND } from "../../nips/nip62.ts";
import { raisedGate } from "../../nips/nip29.ts";
import { dTag, type NostrEvent } from "../../protocol/event.ts";
import type { Refusal } from "../../protocol/reasons.ts";
import { isAddressable } from "../../protocol/kinds.ts";
import {
  addressOf,
  deletionOf,
  GIFT_WRAP,
  GROUP_ACTIONS,
  giftWrapRecipients,
  OUTDATED,
  replacement,
  tombstoneRefusal,
} from "../semantics.ts";
import type { PendingWrite, WriteOutcome, WriteRules } from "../types.ts";
import { indexedTag, runStepsAsync, writeSteps } from "../write-steps.ts";
import { pgSafe, pgText } from "./text.ts";

type Tx = SQL;

/** Is an event with this id stored (on the pool, or inside a transaction)? */
export async function isStored(q: Tx, id: string): Promise<boolean> {
  return (await q`SELECT 1 FROM events WHERE id = decode(${id}, 'hex')`).length > 0;
}

/** Tag values Postgres text cannot hold are not indexed (the event is still stored; postgres/text.ts). */
const indexable = pgSafe;
/** A tsvector lexeme is at most 2,047 bytes. */
const MAX_LEXEME = 2000;
/**
 * Events a purge deletes per statement. One request to vanish of 40k events deleted in its batch
 * held the sequence lock (every node's writes) ~430 ms; now the batch deletes this many, and
 * the rest goes in steps of this many, each its own transaction, outside the lock.
 */
export const PG_PURGE_ROWS = 500;
/**
 * And at most about this much of their JSON: their tag rows go with them (ON DELETE CASCADE), and
 * 500 events of 1,800 tags are 900,000 rows (issue 36). The first event is always taken.
 */
export const PG_PURGE_BYTES = 256 * 1024;

/**
 * The tokens (already normalized as queries are, nips/nip50.ts) as a tsvector literal with their
 * positions, so no text-search parser re-splits them and ts_rank sees how often each occurs.
 */
function tsvectorOf(words: string[]): string | null {
  const positions = new Map<string, number[]>();
  words.forEach((w, i) => {
    if (w.length > MAX_LEXEME) return;
    // Postgres keeps positions up to 16,383 and 256 per lexeme; later words still match.
    const p = positions.get(w) ?? [];
    if (p.length < 256) p.push(Math.min(i + 1, 16383));
    positions.set(w, p);
  });
  if (positions.size === 0) return null;
  return [...positions].map(([w, p]) => `'${w.replaceAll("\\", "\\\\").replaceAll("'", "''")}':${p.join(",")}`).join(" ");
}

const refused = (refusal: Refusal): WriteOutcome => ({ stored: false, duplicate: false, refusal });

interface CommittedBatch {
  /** The seq range the batch took: every seq in it is either a stored event below or unused. */
  from: number;
  to: number;
  stored: { seq: number; event: NostrEvent; json: string }[];
  /** The batch recorded a purge it could not finish: purgeStep has work. */
  purgesLeft: boolean;
}

/** The batch's purges: whether one is left, and its byte budget for deleting at once. */
interface BatchPurges {
  left: boolean;
}

export async function writeBatch(
  sql: SQL,
  batch: PendingWrite[],
  rules: WriteRules,
): Promise<{ outcomes: WriteOutcome[]; committed: CommittedBatch }> {
  return sql.begin(async (tx) => {
    // statement_timeout is for reads (a REQ that runs too long); a write waits its turn for the
    // sequence lock behind other nodes' batches and must not be cancelled half-way.
    await tx`SET LOCAL statement_timeout = 0`;
    const [row] = await tx`UPDATE relay_seq SET value = value + ${batch.length} RETURNING value`;
    const to = Number(row.value);
    const from = to - batch.length + 1;
    const outcomes: WriteOutcome[] = new Array(batch.length);
    const purges: BatchPurges = { left: false };
    // Events that only affect themselves and their own address go in runs, a few statements per
    // run; the others (deletions, requests to vanish, gift wraps) one by one, in order, so each
    // sees what the events before it did.
    let run: number[] = [];
    const flush = async () => {
      if (run.length > 0) await writeRun(tx, batch, run, from, rules, outcomes);
      run = [];
    };
    for (let i = 0; i < batch.length; i++) {
      if (runs(batch[i]!.event)) {
        run.push(i);
        continue;
      }
      await flush();
      outcomes[i] = await writeOne(tx, batch[i]!, from + i, rules, purges);
    }
    await flush();
    const stored: CommittedBatch["stored"] = [];
    outcomes.forEach((o, i) => {
      if (o.stored) stored.push({ seq: o.seq, event: batch[i]!.event, json: batch[i]!.json });
    });
    await raiseGates(tx, stored);
    return { outcomes, committed: { from, to, stored, purgesLeft: purges.left } };
  });
}

/** NIP-29: what the batch's stored 9002s and 9008s may gate, in its transaction (nips/nip29.ts raisedGate; as SQLite's writer). */
async function raiseGates(tx: Tx, stored: CommittedBatch["stored"]): Promise<void> {
  const rows: [string, boolean, boolean, number][] = [];
  for (const s of stored) {
    const g = raisedGate(s.event);
    if (g) rows.push([g.group, g.events, g.metadata, s.seq]);
  }
  if (rows.length === 0) return;
  // In seq order, one row at a time: a group raised twice in one batch keeps the later seq.
  for (const [group, events, metadata, seq] of rows)
    await tx`INSERT INTO group_gates (value, events, metadata, seq) VALUES (${group}, ${events}, ${metadata}, ${seq})
             ON CONFLICT (value) DO UPDATE SET events = group_gates.events OR excluded.events,
               metadata = group_gates.metadata OR excluded.metadata, seq = excluded.seq`;
}

/** No effect on other events beyond its own address (regular, replaceable, addressable): the common case. */
const runs = (e: NostrEvent): boolean => e.kind !== DELETION_KIND && e.kind !== VANISH_KIND && e.kind !== GIFT_WRAP;

/** The d of a replaceable ("") or addressable event's address as stored (pgText); null for other kinds. */
const storedD = (e: NostrEvent): string | null => {
  const a = addressOf(e);
  return a === null ? null : pgText(a.d);
};

interface Version {
  created_at: number;
  id: string;
  /** Its row, when stored before this run. */
  seq?: number;
  /** Its index in the batch, when it came earlier in this run. */
  i?: number;
}

const indexedTags = (e: NostrEvent): [string, string][] => {
  const tags: [string, string][] = [];
  for (const t of e.tags) if (indexedTag(t) && indexable(t[1])) tags.push([t[0], t[1]]);
  return tags;
};

/**
 * A run (the batch indexes in `run`): the steps of store/write-steps.ts that apply to its events
 * (tombstoned, versions, replace, insert), each taken for the whole run at once, in a handful of
 * statements whatever its length: one finds
 * the tombstoned events, one reads the stored versions of the run's addresses, one deletes the
 * versions the run replaces, one inserts events and tags. Versions of one address within the run
 * are settled here in order, as one by one: each newer one replaces the one before (which was
 * stored and is reported so, then replaced, as the SQLite writer does); only the last is written.
 */
async function writeRun(
  tx: Tx,
  batch: PendingWrite[],
  run: number[],
  from: number,
  rules: WriteRules,
  outcomes: WriteOutcome[],
): Promise<void> {
  const keys = run.map((i) => {
    const e = batch[i]!.event;
    return { i, id: e.id, pubkey: e.pubkey, kind: e.kind, d: storedD(e) };
  });
  // The author's tombstones of each event (no gift wraps in a run: no recipients' to look up).
  const found = await tx.unsafe(
    `SELECT r.i,
            (SELECT v.until::float8 FROM vanished v WHERE v.pubkey = decode(r.pubkey, 'hex')) AS vanished,
            EXISTS (SELECT 1 FROM deleted_ids d WHERE d.id = decode(r.id, 'hex') AND d.pubkey = decode(r.pubkey, 'hex')) AS deleted,
            (SELECT a.until::float8 FROM deleted_addresses a WHERE r.d IS NOT NULL AND a.pubkey = decode(r.pubkey, 'hex') AND a.kind = r.kind AND a.d = r.d) AS address
     FROM jsonb_to_recordset($1::text::jsonb) AS r(i int, id text, pubkey text, kind int, d text)`,
    [JSON.stringify(keys)],
  );
  const live: number[] = [];
  for (const g of found as { i: number; vanished: number | null; deleted: boolean; address: number | null }[]) {
    const gone = tombstoneRefusal(batch[g.i]!.event, {
      vanishedUntil: () => g.vanished ?? undefined,
      deleted: () => g.deleted,
      addressDeletedUntil: () => g.address ?? undefined,
    });
    if (gone) outcomes[g.i] = refused(gone);
    else live.push(g.i);
  }
  if (live.length === 0) return;

  // The stored versions of every address in the run (replaceable: pubkey + kind; addressable: + d).
  const addressKey = (pubkey: string, kind: number, d: string) => `${pubkey}:${kind}:${d}`;
  const wanted = live.map((i) => ({ e: batch[i]!.event, d: storedD(batch[i]!.event) })).filter((x) => x.d !== null);
  const versions = new Map<string, Version[]>();
  if (wanted.length > 0) {
    const rows = await tx.unsafe(
      `SELECT DISTINCT e.seq, e.kind, e.d, encode(e.pubkey, 'hex') AS pubkey, e.created_at::float8 AS created_at, encode(e.id, 'hex') AS id
       FROM jsonb_to_recordset($1::text::jsonb) AS r(pubkey text, kind int, d text)
       JOIN events e ON e.pubkey = decode(r.pubkey, 'hex') AND e.kind = r.kind AND (r.d = '' AND e.d IS NULL OR e.d = r.d)`,
      [JSON.stringify(wanted.map(({ e, d }) => ({ pubkey: e.pubkey, kind: e.kind, d })))],
    );
    for (const r of rows as { seq: string; kind: number; d: string | null; pubkey: string; created_at: number; id: string }[]) {
      const key = addressKey(r.pubkey, r.kind, r.d ?? "");
      versions.set(key, [...(versions.get(key) ?? []), { seq: Number(r.seq), created_at: r.created_at, id: r.id }]);
    }
  }
  const replacedRows: number[] = [];
  const superseded = new Set<number>();
  const toInsert: number[] = [];
  for (const i of live) {
    const e = batch[i]!.event;
    const d = storedD(e);
    if (d === null) {
      toInsert.push(i);
      continue;
    }
    const key = addressKey(e.pubkey, e.kind, d);
    const current = versions.get(key) ?? [];
    const verdict = replacement(e, current);
    if (verdict !== "replaces") {
      outcomes[i] = verdict === "duplicate" ? { stored: false, duplicate: true } : refused(OUTDATED);
      continue;
    }
    for (const old of current) {
      if (old.seq !== undefined) replacedRows.push(old.seq);
      if (old.i !== undefined) superseded.add(old.i);
    }
    versions.set(key, [{ created_at: e.created_at, id: e.id, i }]);
    toInsert.push(i);
  }
  if (replacedRows.length > 0)
    await tx.unsafe("DELETE FROM events WHERE seq IN (SELECT x::bigint FROM jsonb_array_elements_text($1::text::jsonb) x)", [
      JSON.stringify(replacedRows),
    ]);
  const written = toInsert.filter((i) => !superseded.has(i));
  const inserted = await insertEvents(
    tx,
    written.map((i) => ({ w: batch[i]!, seq: from + i, d: isAddressable(batch[i]!.event.kind) ? dTag(batch[i]!.event) : null })),
    rules,
  );
  for (const i of toInsert)
    outcomes[i] = inserted.has(from + i) || superseded.has(i) ? { stored: true, seq: from + i } : { stored: false, duplicate: true };
}

/**
 * Inserts events and their tag rows in one statement (a duplicate id is skipped, and so are its
 * tags); returns the seqs inserted.
 */
async function insertEvents(tx: Tx, items: { w: PendingWrite; seq: number; d: string | null }[], rules: WriteRules): Promise<Set<number>> {
  const rows = items.map(({ w: { event: e, json }, seq, d }) => ({
    seq,
    id: e.id,
    pubkey: e.pubkey,
    created_at: e.created_at,
    kind: e.kind,
    d: d === null ? null : pgText(d),
    expiration: expirationOf(e) ?? null,
    json,
    fts: rules.search ? tsvectorOf(tokens(searchableText(e, rules.searchSkipKinds))) : null,
  }));
  const tags: (string | number)[][] = [];
  for (const {
    w: { event: e },
    seq,
  } of items)
    for (const [name, value] of indexedTags(e)) tags.push([name, value, e.created_at, seq, e.kind]);
  const inserted = await tx.unsafe(
    `WITH ins AS (
       INSERT INTO events (seq, id, pubkey, created_at, kind, d, expiration, json, fts)
       SELECT r.seq, decode(r.id, 'hex'), decode(r.pubkey, 'hex'), r.created_at, r.kind, r.d, r.expiration, r.json, r.fts::tsvector
       FROM jsonb_to_recordset($1::text::jsonb) AS r(seq bigint, id text, pubkey text, created_at bigint, kind int, d text, expiration bigint, json text, fts text)
       ORDER BY r.seq
       ON CONFLICT DO NOTHING RETURNING seq
     ), t AS (
       INSERT INTO tags (name, value, created_at, seq, kind)
       SELECT x->>0, x->>1, (x->>2)::bigint, (x->>3)::bigint, (x->>4)::int FROM jsonb_array_elements($2::text::jsonb) x
       WHERE (x->>3)::bigint IN (SELECT seq FROM ins)
       ON CONFLICT DO NOTHING
     )
     SELECT seq FROM ins`,
    [JSON.stringify(rows), JSON.stringify(tags)],
  );
  return new Set(inserted.map((r: { seq: string }) => Number(r.seq)));
}

/**
 * Deletions, requests to vanish and gift wraps (regular kinds, no address; see `runs`), one by
 * one, in the steps and order of store/write-steps.ts, each answered here in SQL. A stored request
 * to vanish (here the same request sent twice in flight) is a duplicate first: carried out again
 * it would delete the kept one. A vanish-only write's seq stays unused.
 */
async function writeOne(tx: Tx, w: PendingWrite, seq: number, rules: WriteRules, purges: BatchPurges): Promise<WriteOutcome> {
  const e = w.event;
  return runStepsAsync(writeSteps(w, rules), async (s) => {
    switch (s.step) {
      case "stored":
        return isStored(tx, e.id);
      case "vanish":
        if (!(await applyVanish(tx, e, s.keep, seq))) purges.left = true;
        return;
      case "tombstoned":
        return tombstoned(tx, e);
      case "versions":
      case "replace":
        throw new Error("replaceable and addressable events are written in runs (writeRun)");
      case "insert":
        return (await insertEvents(tx, [{ w, seq, d: null }], rules)).has(seq) ? seq : undefined;
      case "delete": {
        const purge = await applyDeletion(tx, e, s.seq);
        if (purge !== undefined) purges.left = true;
        return purge;
      }
    }
  });
}

/** Why an event may not (re)enter (semantics.ts tombstoneRefusal): the tombstones of its author and, for a gift wrap, its recipients. */
async function tombstoned(tx: Tx, e: NostrEvent): Promise<Refusal | undefined> {
  const rows = await tx.unsafe(
    `SELECT r AS pubkey,
            (SELECT until::float8 FROM vanished WHERE pubkey = decode(r, 'hex')) AS vanished,
            EXISTS (SELECT 1 FROM deleted_ids WHERE id = decode($2, 'hex') AND pubkey = decode(r, 'hex')) AS deleted
     FROM jsonb_array_elements_text($1::text::jsonb) r`,
    [JSON.stringify([e.pubkey, ...giftWrapRecipients(e)]), e.id],
  );
  const of = new Map((rows as { pubkey: string; vanished: number | null; deleted: boolean }[]).map((r) => [r.pubkey, r]));
  return tombstoneRefusal(e, {
    vanishedUntil: (pubkey) => of.get(pubkey)?.vanished ?? undefined,
    deleted: (_id, by) => of.get(by)?.deleted ?? false,
    // Only deletions, requests to vanish and gift wraps come here: regular kinds, no address.
    addressDeletedUntil: () => undefined,
  });
}

/**
 * NIP-09: the requester's own referenced events, and gift wraps addressed to the requester
 * (semantics.ts deletionOf). The tombstones are written here; the events go as a purge of the
 * listed targets, its first chunk in this batch, the rest in purgeStep, outside the sequence
 * lock, as SQLite's writer does. Returns the purge when it is not finished: the request's OK
 * waits for it (WriteOutcome.purge).
 */
async function applyDeletion(tx: Tx, req: NostrEvent, seq: number): Promise<number | undefined> {
  const { ids, addresses } = deletionTargets(req);
  const doomed: { seq: number; id: string }[] = [];
  for (const id of ids) {
    const [target] = await tx`SELECT seq, kind, encode(pubkey, 'hex') AS pubkey,
                                     EXISTS (SELECT 1 FROM tags t WHERE t.seq = events.seq AND t.name = 'p' AND t.value = ${req.pubkey}) AS "tagsRequester",
                                     EXISTS (SELECT 1 FROM tags h WHERE h.seq = events.seq AND h.name = 'h') AS "inGroup"
                              FROM events WHERE id = decode(${id}, 'hex')`;
    const { remove, tombstone } = deletionOf(req, target ?? null);
    if (remove) doomed.push({ seq: Number(target.seq), id });
    if (tombstone)
      await tx`INSERT INTO deleted_ids (id, pubkey) VALUES (decode(${id}, 'hex'), decode(${req.pubkey}, 'hex')) ON CONFLICT DO NOTHING`;
  }
  for (const a of addresses) doomed.push(...(await deleteAddress(tx, a, req.created_at)));
  if (doomed.length === 0) return undefined;
  const [p] =
    await tx`INSERT INTO purges (pubkey, until, keep, upto, wraps, listed) VALUES (decode(${req.pubkey}, 'hex'), NULL, ${seq}, NULL, false, true)
                       RETURNING id, encode(pubkey, 'hex') AS pubkey, until::float8 AS until, keep::float8 AS keep, upto::float8 AS upto, wraps, listed`;
  await tx.unsafe(
    `INSERT INTO purge_targets (purge, seq, id)
     SELECT $1, r.seq, decode(r.id, 'hex') FROM jsonb_to_recordset($2::text::jsonb) AS r(seq bigint, id text) ON CONFLICT DO NOTHING`,
    [p.id, JSON.stringify(doomed)],
  );
  return (await purgeChunk(tx, p as Purge)) ? undefined : Number(p.id);
}

/** The address's tombstone; returns its stored versions it covers (to delete). */
async function deleteAddress(tx: Tx, a: Address, until: number): Promise<{ seq: number; id: string }[]> {
  const d = pgText(a.d);
  const rows =
    await tx`SELECT seq, encode(id, 'hex') AS id FROM events WHERE pubkey = decode(${a.pubkey}, 'hex') AND kind = ${a.kind} AND coalesce(d, '') = ${d} AND created_at <= ${until}`;
  await tx`INSERT INTO deleted_addresses (pubkey, kind, d, until) VALUES (decode(${a.pubkey}, 'hex'), ${a.kind}, ${d}, ${until})
           ON CONFLICT (pubkey, kind, d) DO UPDATE SET until = greatest(deleted_addresses.until, excluded.until)`;
  return (rows as { seq: string; id: string }[]).map((r) => ({ seq: Number(r.seq), id: r.id }));
}

/**
 * NIP-62: everything of the pubkey up to the request (the request itself, `keep`, stays), and
 * gift wraps to it, among the events stored before it (seq up to `upto`). The tombstone is
 * written in the request's batch; the deletion is a purge: its first PG_PURGE_ROWS here, the
 * rest in purgeStep. True when it is all done.
 */
async function applyVanish(tx: Tx, req: NostrEvent, keep: number | null, upto: number): Promise<boolean> {
  await tx`INSERT INTO vanished (pubkey, until) VALUES (decode(${req.pubkey}, 'hex'), ${req.created_at})
           ON CONFLICT (pubkey) DO UPDATE SET until = greatest(vanished.until, excluded.until)`;
  const [p] =
    await tx`INSERT INTO purges (pubkey, until, keep, upto, wraps) VALUES (decode(${req.pubkey}, 'hex'), ${req.created_at}, ${keep}, ${upto}, true)
                       RETURNING id, encode(pubkey, 'hex') AS pubkey, until::float8 AS until, keep::float8 AS keep, upto::float8 AS upto, wraps, listed`;
  return purgeChunk(tx, p as Purge);
}

interface Purge {
  id: string;
  pubkey: string;
  until: number | null;
  keep: number | null;
  upto: number | null;
  wraps: boolean;
  /** A NIP-09 deletion: only the events listed in purge_targets. */
  listed: boolean;
}

/**
 * Deletes up to PG_PURGE_ROWS events (and about PG_PURGE_BYTES of their JSON) of a purge:
 * the listed ones of a NIP-09 deletion; else oldest first, then gift wraps. True (and the purge
 * forgotten) when none is left.
 */
async function purgeChunk(tx: Tx, p: Purge, rows = PG_PURGE_ROWS): Promise<boolean> {
  if (p.listed) return purgeListed(tx, p, rows);
  const until = p.until ?? Number.MAX_SAFE_INTEGER;
  const upto = p.upto ?? Number.MAX_SAFE_INTEGER;
  const keep = p.keep ?? -1;
  const authored = await deleteSized(
    tx,
    `SELECT seq FROM events WHERE pubkey = decode($1, 'hex') AND created_at <= $2 AND seq <> $3 AND seq <= $4
       AND NOT (kind BETWEEN ${GROUP_ACTIONS.min} AND ${GROUP_ACTIONS.max} AND EXISTS (SELECT 1 FROM tags h WHERE h.seq = events.seq AND h.name = 'h'))
     ORDER BY created_at LIMIT $5`,
    [p.pubkey, until, keep, upto, rows],
    rows,
  );
  if (!authored) return false;
  if (p.wraps) {
    const wraps = await deleteSized(
      tx,
      `SELECT seq FROM tags WHERE name = 'p' AND value = $1 AND kind = ${GIFT_WRAP} AND seq <= $2 LIMIT $3`,
      [p.pubkey, upto, rows],
      rows,
    );
    if (!wraps) return false;
  }
  await tx`DELETE FROM purges WHERE id = ${p.id}`;
  return true;
}

/**
 * Deletes the events among the seqs `pick` selects (at most `rows`) up to about PG_PURGE_BYTES of
 * JSON; true when that was all `pick` had (fewer than `rows`, none left out).
 */
async function deleteSized(tx: Tx, pick: string, params: unknown[], rows: number): Promise<boolean> {
  const [r] = await tx.unsafe(
    `WITH pick AS (${pick}),
          sized AS (SELECT e.seq, sum(octet_length(e.json)) OVER (ORDER BY e.seq ROWS UNBOUNDED PRECEDING) - octet_length(e.json) AS before
                    FROM events e WHERE e.seq IN (SELECT seq FROM pick)),
          gone AS (DELETE FROM events WHERE seq IN (SELECT seq FROM sized WHERE before < ${PG_PURGE_BYTES}) RETURNING 1)
     SELECT (SELECT count(*) FROM pick)::int AS picked, (SELECT count(*) FROM gone)::int AS n`,
    params,
  );
  return r.picked < rows && r.n === r.picked;
}

/** A NIP-09 purge's next chunk of listed targets (those still stored are deleted); true when none is left. */
async function purgeListed(tx: Tx, p: Purge, rows: number): Promise<boolean> {
  const [r] = await tx.unsafe(
    `WITH pick AS (SELECT t.seq, e.seq AS stored, coalesce(octet_length(e.json), 0) AS b
                   FROM purge_targets t LEFT JOIN events e ON e.seq = t.seq AND e.id = t.id
                   WHERE t.purge = $1 ORDER BY t.seq LIMIT $2),
          sized AS (SELECT seq, stored, sum(b) OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING) - b AS before FROM pick),
          chosen AS (SELECT seq, stored FROM sized WHERE before < ${PG_PURGE_BYTES}),
          gone AS (DELETE FROM events WHERE seq IN (SELECT stored FROM chosen WHERE stored IS NOT NULL) RETURNING 1),
          dropped AS (DELETE FROM purge_targets WHERE purge = $1 AND seq IN (SELECT seq FROM chosen) RETURNING 1)
     SELECT (SELECT count(*) FROM pick)::int AS picked, (SELECT count(*) FROM dropped)::int AS n, (SELECT count(*) FROM gone)::int AS g`,
    [p.id, rows],
  );
  if (r.picked >= rows || r.n < r.picked) return false;
  await tx`DELETE FROM purges WHERE id = ${p.id}`;
  return true;
}

/**
 * One step of the waiting purges (any node's: a purge another node is running is skipped), in a
 * transaction of its own, outside the sequence lock: of the first purge after `after`, round-robin
 * (from the oldest again past the last), so a small deletion's held OK waits a step of each purge
 * waiting, not every older purge to its end (issue 36). Returns the purge stepped; none: none left.
 */
export async function purgeStep(sql: SQL, after = 0): Promise<number | undefined> {
  return sql.begin(async (tx) => {
    await tx`SET LOCAL statement_timeout = 0`;
    const next = (from: number) =>
      tx`SELECT id, encode(pubkey, 'hex') AS pubkey, until::float8 AS until, keep::float8 AS keep, upto::float8 AS upto, wraps, listed
         FROM purges WHERE id > ${from} ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED`;
    let [p] = await next(after);
    if (!p && after > 0) [p] = await next(0);
    if (!p) return undefined;
    await purgeChunk(tx, p as Purge);
    return Number(p.id);
  });
}
