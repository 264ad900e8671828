// NIP-01 order among ties (newest first, then the lowest id) when thousands of events share a
// created_at: the time walks tie on seq (schema 11), so the id order is made where rows are held,
// and a single walk settling the ties of its last second keeps only the rows it can still answer
// with (query.ts singleWalk). Random ids, so commit order and id order differ.
import { expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NostrEvent } from "../src/protocol/event.ts";
import type { Filter } from "../src/protocol/filter.ts";
import { newestFirst } from "../src/store/semantics.ts";
import { openDatabase } from "../src/store/sqlite/db.ts";
import { planTuning, runQuery, StatementCache } from "../src/store/sqlite/query.ts";
import { SqliteWriter } from "../src/store/sqlite/write.ts";
import { storeEvents } from "./helpers.ts";

const hex = (seed: string) => createHash("sha256").update(seed).digest("hex");

test("thousands of events in one second: every REQ answers them in NIP-01 order", () => {
  const dir = mkdtempSync(join(tmpdir(), "bunstr-tie-order-"));
  try {
    const db = openDatabase({ path: join(dir, "db.sqlite"), synchronous: "normal" });
    const authors = Array.from({ length: 40 }, (_, i) => hex(`author ${i}`));
    const T = 1_700_000_000;
    // 3,000 at T, 1,500 at T-1, 500 older; kinds and authors spread over them.
    const events: NostrEvent[] = Array.from({ length: 5000 }, (_, i) => ({
      id: hex(`event ${i}`),
      pubkey: authors[(i * 7) % authors.length]!,
      created_at: i < 3000 ? T : i < 4500 ? T - 1 : T - 2 - (i % 20),
      kind: i % 3 === 0 ? 7 : 1,
      tags: [],
      content: `c${i}`,
      sig: "0".repeat(128),
    }));
    storeEvents(new SqliteWriter(db), events);
    const cache = new StatementCache(db);
    const sorted = [...events].sort(newestFirst);
    const ids = (rows: string[]) => rows.map((j) => (JSON.parse(j) as NostrEvent).id);
    const some = authors.slice(0, 20);
    const shapes: [Filter, (e: NostrEvent) => boolean][] = [
      [{}, () => true],
      [{ since: T, until: T }, (e) => e.created_at === T],
      [{ until: T - 1 }, (e) => e.created_at <= T - 1],
      [{ kinds: [1] }, (e) => e.kind === 1],
      [{ authors: some }, (e) => some.includes(e.pubkey)],
      [{ authors: some, kinds: [7] }, (e) => some.includes(e.pubkey) && e.kind === 7],
    ];
    const wrong: string[] = [];
    try {
      // The recent window (a single walk's bound before the feed's other plan takes over), at
      // its default and small enough to be crossed inside the ties.
      for (const window of [planTuning.recentWindow, 100, 16]) {
        planTuning.recentWindow = window;
        for (const limit of [1, 10, 500, 2999, 3000, 3001, 4600])
          for (const [filter, match] of shapes) {
            const want = sorted
              .filter(match)
              .slice(0, limit)
              .map((e) => e.id);
            const got = ids(runQuery(cache, { filters: [filter], limits: [limit], maxSeq: events.length, now: 0 }));
            if (JSON.stringify(got) !== JSON.stringify(want))
              wrong.push(`${JSON.stringify(filter).slice(0, 40)} limit ${limit} window ${window}`);
          }
      }
    } finally {
      planTuning.recentWindow = 10_000;
    }
    // Two filters at once (the merged plan), and a snapshot cut inside the ties.
    const two = ids(runQuery(cache, { filters: [{}, { kinds: [7] }], limits: [300, 3], maxSeq: events.length, now: 0 }));
    const twoWant = new Set([...sorted.slice(0, 300), ...sorted.filter((e) => e.kind === 7).slice(0, 3)].map((e) => e.id));
    expect(two).toEqual(sorted.filter((e) => twoWant.has(e.id)).map((e) => e.id));
    const cut = ids(runQuery(cache, { filters: [{}], limits: [10], maxSeq: 1234, now: 0 }));
    expect(cut).toEqual(
      [...events.slice(0, 1234)]
        .sort(newestFirst)
        .slice(0, 10)
        .map((e) => e.id),
    );
    expect(wrong).toEqual([]);
    db.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);
