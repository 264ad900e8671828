// The gap between a REQ's stored snapshot and joining the live topic: events committed while
// the query runs must arrive exactly once (from the catch-up ring), none missed, none twice.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startRelay } from "../src/relay/server.ts";
import { SqliteStore } from "../src/store/sqlite.ts";
import type { Store } from "../src/store/types.ts";
import { Client, signer, testConfig } from "./helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "bunstr-catchup-"));
const real = new SqliteStore({ path: join(dir, "db.sqlite"), synchronous: "normal", readerWorkers: 1 });
// A store whose queries take 150 ms longer than they need: the snapshot is taken first.
const slow: Store = {
  has: (id) => real.has(id),
  writeBatch: (b, rules) => real.writeBatch(b, rules),
  count: (job) => real.count(job),
  negentropyItems: (job) => real.negentropyItems(job),
  sweepExpired: (now) => real.sweepExpired(now),
  lastSeq: () => real.lastSeq(),
  close: () => real.close(),
  query: async (job) => {
    const rows = await real.query(job);
    await Bun.sleep(150);
    return rows;
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
  c.send(["REQ", "gap", { authors: [s.pubkey] }]);
  await Bun.sleep(30); // the query is running now
  const during = Array.from({ length: 10 }, (_, i) => s.sign({ kind: 1, content: `during ${i}`, created_at: 2000 + i }));
  await Promise.all(during.map((e) => p.publish(e)));
  const eose = await c.next((f) => f[0] === "EOSE");
  expect(eose).toEqual(["EOSE", "gap"]);
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
