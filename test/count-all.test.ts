// The status page's count of everything (countJob with one empty filter, store/sqlite/query.ts
// countAll) runs in slices of 20,000 time-index entries: exact across the slices' edges, with
// more than a slice in one second, and cut at the snapshot's seq.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "../src/store/sqlite/db.ts";
import { countJob, StatementCache } from "../src/store/sqlite/query.ts";
import { SqliteStore } from "../src/store/sqlite/store.ts";
import { storeEvents } from "./helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "bunstr-countall-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("counting every event: exact over 45,000 events, 25,000 of them in one second, at any snapshot", async () => {
  const path = join(dir, "bunstr.sqlite");
  const store = new SqliteStore({ path, synchronous: "normal", readerWorkers: 1 });
  store.db.exec("PRAGMA synchronous = OFF");
  const N = 45_000;
  for (let i = 0; i < N; i += 5000) {
    const batch = Array.from({ length: 5000 }, (_, j) => {
      const k = i + j;
      // Events 10,000..34,999 share one second; the rest have a second each, some before it.
      return {
        id: k.toString(16).padStart(64, "0"),
        pubkey: "ab".repeat(32),
        created_at: k >= 10_000 && k < 35_000 ? 1_700_050_000 : 1_700_000_000 + k * 7,
        kind: 1,
        tags: [],
        content: "",
        sig: "cd".repeat(64),
      };
    });
    storeEvents(store, batch);
  }
  await store.close();
  const db = openDatabase({ path, synchronous: "normal", readonly: true });
  const cache = new StatementCache(db);
  const count = (maxSeq: number) => {
    const steps = countJob(cache, { filters: [{}], maxSeq, now: 0 });
    let slices = 0;
    for (let r = steps.next(); ; r = steps.next(), slices++) if (r.done) return { n: r.value.count, slices };
  };
  const all = count(Number.MAX_SAFE_INTEGER);
  expect(all.n).toBe(N);
  expect(all.slices).toBeGreaterThanOrEqual(2); // the reader could take other jobs between them
  expect(count(30_000).n).toBe(30_000);
  expect(count(1).n).toBe(1);
  expect(count(0).n).toBe(0);
  db.close();
}, 60_000);
