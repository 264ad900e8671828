// Many events in one second (anyone can publish them): what a REQ with a small limit costs when
// its walk has to settle the ties of the second it stops in. In-process, one engine, a fresh
// database of N events, TIES of them at one created_at and the rest in the 1,000 seconds before;
// every answer checked against NIP-01 order (newest first, then the lowest id).
//   npx bun bench/many-ties.ts [--events 21000] [--ties 20000] [--reps 3]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { NostrEvent } from "../src/protocol/event.ts";
import { newestFirst } from "../src/store/semantics.ts";
import { openDatabase } from "../src/store/sqlite/db.ts";
import { runQuery, StatementCache } from "../src/store/sqlite/query.ts";
import { SqliteWriter } from "../src/store/sqlite/write.ts";
import { storeEvents } from "../test/helpers.ts";

const { values: o } = parseArgs({
  options: {
    events: { type: "string", default: "21000" },
    ties: { type: "string", default: "20000" },
    reps: { type: "string", default: "3" },
  },
});
const [n, ties, reps] = [Number(o.events), Number(o.ties), Number(o.reps)];
const hex = (bytes: number) => Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString("hex");
const dir = mkdtempSync(join(tmpdir(), "bunstr-many-ties-"));
try {
  const db = openDatabase({ path: join(dir, "db.sqlite"), synchronous: "normal" });
  const T = 1_700_000_000;
  const events: NostrEvent[] = Array.from({ length: n }, (_, i) => ({
    ...{ id: hex(32), pubkey: hex(32), created_at: i < ties ? T : T - 1 - (i % 1000), kind: 1 },
    ...{ tags: [], content: "x", sig: "0".repeat(128) },
  }));
  const writer = new SqliteWriter(db);
  for (let i = 0; i < n; i += 5000) storeEvents(writer, events.slice(i, i + 5000));
  const cache = new StatementCache(db);
  const want = [...events]
    .sort(newestFirst)
    .slice(0, 10)
    .map((e) => e.id);
  let failed = false;
  for (const filter of [{}, { kinds: [1] }]) {
    const job = { filters: [filter], limits: [10], maxSeq: n, now: 0 };
    runQuery(cache, job);
    const c0 = process.cpuUsage();
    let got: string[] = [];
    for (let r = 0; r < reps; r++) got = runQuery(cache, job).map((j) => (JSON.parse(j) as NostrEvent).id);
    const c = process.cpuUsage(c0);
    const ok = JSON.stringify(got) === JSON.stringify(want);
    failed ||= !ok;
    console.log(
      `${JSON.stringify(filter)} limit 10, ${ties} of ${n} events in one second: ${((c.user + c.system) / 1000 / reps).toFixed(1)} CPU-ms per REQ; answer ${ok ? "ok" : "WRONG"}`,
    );
  }
  db.close();
  process.exitCode = failed ? 1 : 0;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
