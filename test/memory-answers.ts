// What the tests of REQs answered from memory share (relay/answers/replaceable.ts,
// relay/answers/tag.ts): a relay whose fanout ring answers nothing by itself, answers compared
// with the store's own, and the relay's counters of where each answer came from.
import { Database } from "bun:sqlite";
import { expect } from "bun:test";
import { nowSeconds, serializeEvent, type NostrEvent } from "../src/protocol/event.ts";
import type { Filter } from "../src/protocol/filter.ts";
import { visibilityFor } from "../src/policy/visibility.ts";
import { SqliteWriter } from "../src/store/sqlite/write.ts";
import { Client, now, signer, startTestRelay, type ConfigPatch, type TestRelay } from "./helpers.ts";

export const RULES = { deletion: true, vanish: true, search: false, searchSkipKinds: new Set<number>() };
let n = 0;

/** A REQ's answer; the subscription is closed after it (a connection holds at most 50). */
export async function once(client: Client, ...filters: Filter[]): Promise<{ events: NostrEvent[]; end: unknown[] }> {
  const id = `s${n++}`;
  const answer = await client.req(id, ...filters);
  client.send(["CLOSE", id]);
  return answer;
}

/** Another process (a CLI, the other relay of a restart) writes to the relay's database; `c` wakes the relay. */
async function elsewhere(r: TestRelay, c: Client, write: (w: SqliteWriter) => void): Promise<void> {
  const db = new Database(r.dbPath);
  try {
    write(new SqliteWriter(db));
  } finally {
    db.close();
  }
  // The relay looks for others' commits at most every 10 ms (store/sqlite/store.ts lastSeq).
  await Bun.sleep(30);
  await once(c, { ids: ["00".repeat(32)] });
}

/** Another process stores these events (as bunstr's own CLI writes them). */
export async function storedElsewhere(r: TestRelay, c: Client, ...events: NostrEvent[]): Promise<void> {
  await elsewhere(r, c, (w) => {
    for (const e of events) expect(w.writeBatchImmediate([{ event: e, json: serializeEvent(e) }], RULES)[0]!.stored).toBe(true);
  });
}

/**
 * The relay's next stored read calls `during` once its rows are read, before the relay has
 * them all (the last batch held back until it returns).
 */
export function duringNextRead(r: TestRelay, during: () => Promise<void>): void {
  const store = r.ctx.store;
  const query = store.query;
  store.query = (job, ctx) => {
    store.query = query;
    const rows = query.call(store, job, ctx);
    return (async function* () {
      let done = false;
      for await (const batch of rows) {
        if (batch.last) {
          await during();
          done = true;
        }
        yield batch;
      }
      if (!done) await during();
    })();
  };
}

/**
 * A relay and a client, after another process stored an event dated far ahead: the fanout's
 * ring (relay/answers/feeds.ts) then answers nothing older, so memory's other answers are seen.
 */
export async function relayWithoutRingAnswers(patch: ConfigPatch = {}): Promise<{ relay: TestRelay; c: Client }> {
  const relay = await startTestRelay(patch);
  const c = await Client.connect(relay.url);
  await storedElsewhere(relay, c, signer().sign({ kind: 1, content: "far ahead", created_at: now() + 10_000_000 }));
  return { relay, c };
}

/** The store's answer, read through the store itself (a reader worker), newest first; anonymous unless `viewers`. */
export async function storeIds(r: TestRelay, filter: Filter, viewers: string[] = []): Promise<string[]> {
  const store = r.ctx.store;
  const ids: string[] = [];
  const visibility = visibilityFor(r.ctx, new Set(viewers));
  const job = { filters: [filter], limits: [filter.limit ?? 500], maxSeq: store.lastSeq(), now: nowSeconds(), visibility };
  for await (const rows of store.query(job)) for (const json of rows) ids.push((JSON.parse(json) as NostrEvent).id);
  return ids;
}

/**
 * Waits until the relay's writer thread has said whose commits moved data_version, and has no
 * call in flight (a timer's purge step or expiry sweep): a stored read then counts as an ask and
 * may be kept (store/sqlite/store.ts stateMark, Store.changes.mark).
 */
export async function settled(r: TestRelay): Promise<void> {
  await Bun.sleep(12);
  r.ctx.store.lastSeq();
  while (!r.ctx.store.changes!.known() || !r.ctx.store.changes!.mark()) await Bun.sleep(1);
}

type From = "ring" | "replaceable" | "tag";

/** REQs the filter and checks the answer is the store's, given by memory's `from` or by the store. */
export async function expectAnswer(r: TestRelay, c: Client, filter: Filter, from: From | "store"): Promise<string[]> {
  await settled(r);
  const before = { ...r.ctx.metrics.memoryAnswers };
  const got = (await once(c, filter)).events.map((e: NostrEvent) => e.id);
  expect({ filter, got }).toEqual({ filter, got: await storeIds(r, filter) });
  const moved = Object.fromEntries(Object.entries(r.ctx.metrics.memoryAnswers).map(([k, v]) => [k, v - before[k as From]]));
  expect(moved).toEqual({ ring: 0, replaceable: 0, tag: 0, ...(from === "store" ? {} : { [from]: 1 }) });
  return got;
}
