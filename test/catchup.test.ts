// The gap between a REQ's stored snapshot and joining the live topic: events committed while
// the query runs must arrive exactly once (from the catch-up ring), none missed, none twice.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type NostrEvent, serializeEvent } from "../src/protocol/event.ts";
import { compileFilter, matchAny } from "../src/protocol/filter.ts";
import { Fanout } from "../src/relay/fanout/fanout.ts";
import { startRelay } from "../src/relay/server.ts";
import { SqliteStore } from "../src/store/sqlite/store.ts";
import { allRows, type Store } from "../src/store/types.ts";
import { Client, signer, testConfig } from "./helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "bunstr-catchup-"));
const real = new SqliteStore({ path: join(dir, "db.sqlite"), synchronous: "normal", readerWorkers: 1 });
// A store whose queries, once their snapshot is taken, wait until the test lets them finish.
let snapshotTaken = () => {};
let finish: Promise<void> = Promise.resolve();
const slow: Store = {
  has: (id) => real.has(id),
  hasNow: (id) => real.hasNow(id),
  shareEphemeral: (e, json) => real.shareEphemeral(e, json),
  purgeStep: (ms) => real.purgeStep(ms),
  watchPurges: (watch) => real.watchPurges(watch),
  writePipeline: Number.POSITIVE_INFINITY,
  cancelReads: (owner) => real.cancelReads(owner),
  ready: () => real.ready(),
  writeBatch: (b, rules) => real.writeBatch(b, rules),
  count: (job) => real.count(job),
  negentropyItems: (job) => real.negentropyItems(job),
  sweepExpired: (now) => real.sweepExpired(now),
  lastSeq: () => real.lastSeq(),
  sizeBytes: () => real.sizeBytes(),
  admin: real.admin,
  admission: real.admission,
  groups: real.groups,
  subscribe: (feed) => real.subscribe(feed),
  close: () => real.close(),
  query: async function* (job) {
    const rows = await allRows(real.query(job));
    snapshotTaken();
    await finish;
    yield rows;
  },
};
const relay = startRelay({ config: testConfig(), store: slow });
afterAll(async () => {
  await relay.close();
  rmSync(dir, { recursive: true, force: true });
});

test("events committed during a slow stored query arrive once, before EOSE, with none missed", async () => {
  const s = signer();
  const p = await Client.connect(relay.url);
  const before = Array.from({ length: 5 }, (_, i) => s.sign({ kind: 1, content: `before ${i}`, created_at: 1000 + i }));
  for (const e of before) await p.publish(e);

  const c = await Client.connect(relay.url);
  let release!: () => void;
  finish = new Promise((r) => (release = r));
  const taken = new Promise<void>((r) => (snapshotTaken = r));
  c.send(["REQ", "gap", { authors: [s.pubkey] }]);
  await taken; // the query has its snapshot and is still running
  const during = Array.from({ length: 10 }, (_, i) => s.sign({ kind: 1, content: `during ${i}`, created_at: 2000 + i }));
  await Promise.all(during.map((e) => p.publish(e)));
  release();
  const eose = await c.next((f) => f[0] === "EOSE");
  expect(eose).toEqual(["EOSE", "gap"]);
  // Committed while the query ran: each arrives before EOSE.
  const eoseAt = c.frames.indexOf(eose);
  const duringIds = new Set(during.map((e) => e.id));
  expect(c.frames.slice(0, eoseAt).filter((f) => f[0] === "EVENT" && duringIds.has(f[2].id))).toHaveLength(10);
  const after = s.sign({ kind: 1, content: "after", created_at: 3000 });
  await p.publish(after);
  await c.next((f) => f[0] === "EVENT" && f[2].id === after.id);

  const ids = c.eventsFor("gap").map((e) => e.id);
  expect(ids.slice(0, 5)).toEqual(before.map((e) => e.id).reverse()); // stored, newest first
  expect(new Set(ids.slice(5, 15))).toEqual(new Set(during.map((e) => e.id))); // caught up
  expect(ids.slice(15)).toEqual([after.id]); // live
  expect(ids).toHaveLength(16);
  c.close();
  p.close();
});

test("the catch-up ring is bounded in bytes as well as count", () => {
  const fanout = new Fanout({ publish: () => 0, restricted: () => false, canRead: () => true, ringSize: 1000, ringBytes: 100_000 });
  const s = signer();
  const big = "x".repeat(10_000);
  const events = Array.from({ length: 50 }, (_, i) => s.sign({ kind: 20001, content: `${i}${big}` }));
  for (const e of events) fanout.broadcast(e, JSON.stringify(e));
  const all = compileFilter({}, { maxValues: 10 });
  const { events: kept, complete } = fanout.recent(0, [all]);
  // About 100 kB of 10 kB events: the newest ~9, and the ring says it lost the older ones.
  expect(kept.length).toBeLessThanOrEqual(10);
  expect(kept.at(-1)!.event.id).toBe(events.at(-1)!.id);
  expect(complete).toBe(false);
  // A subscriber that started after the 45th event still gets everything after it.
  expect(fanout.recent(45, [all])).toEqual({ events: kept.filter((r) => r.seq > 45), complete: true });
});

// Both JSON layouts: the relay's (serializeEvent: id and pubkey read off the text) and any other.
for (const layout of ["serializeEvent", "other key order"] as const)
  test(`the ring keeps JSON only: a catch-up returns exactly the matching events past its snapshot (${layout})`, () => {
    const fanout = new Fanout({ publish: () => 0, restricted: () => false, canRead: () => true, ringSize: 64 });
    const s = signer();
    const other = signer();
    const events = Array.from({ length: 100 }, (_, i) =>
      (i % 3 === 0 ? other : s).sign({
        kind: [1, 7, 30023][i % 3]!,
        created_at: 1000 + i,
        content: `é ${i}`,
        tags: [
          ["t", `t${i % 4}`],
          ["x", `t${i % 5}`],
        ], // "x" values are found in the text but do not match "#t"
      }),
    );
    const jsonOf = (e: NostrEvent) =>
      layout === "serializeEvent"
        ? serializeEvent(e)
        : JSON.stringify({
            sig: e.sig,
            content: e.content,
            tags: e.tags,
            kind: e.kind,
            created_at: e.created_at,
            pubkey: e.pubkey,
            id: e.id,
          });
    for (const e of events) fanout.broadcast(e, jsonOf(e));
    const filters = [
      compileFilter({ kinds: [1, 30023], since: 1050, "#t": ["t1", "t2"] }, { maxValues: 10 }),
      compileFilter({ authors: [other.pubkey], until: 1060 }, { maxValues: 10 }),
      compileFilter({ ids: [events[97]!.id, events[5]!.id] }, { maxValues: 10 }),
      compileFilter({ kinds: [7], since: 2000 }, { maxValues: 10 }),
    ];
    const expected = events.map((e, i) => ({ seq: i + 1, e })).filter(({ seq, e }) => seq > 40 && matchAny(filters, e));
    const { events: got, complete } = fanout.recent(40, filters);
    expect(complete).toBe(true); // 60 of 100 past the snapshot, in a ring of 64
    expect(got.map((r) => r.seq)).toEqual(expected.map((x) => x.seq));
    expect(got.map((r) => r.event)).toEqual(expected.map((x) => x.e));
    expect(got.map((r) => r.json)).toEqual(expected.map((x) => jsonOf(x.e)));
    expect(got.map((r) => r.kind)).toEqual(expected.map((x) => x.e.kind));
    expect(expected.length).toBeGreaterThan(10);
    expect(fanout.recent(30, filters).complete).toBe(false);
  });
