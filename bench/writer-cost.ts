// The SQLite writer alone (store/sqlite/write.ts SqliteWriter, as the writer thread runs it) on a
// store of a given size: JSON lines written in batches of the relay's size into a database (a
// copy of a `bunstr import` of the corpus's first N events: the file is changed), CPU-s per 1k
// events and WAL pages written per event. The WAL is checkpointed every 10,000 events, and its
// frames counted first: pages written is the same number run after run, whatever the box's load,
// where CPU time on a shared box is not. Issue 35 (bench/RESULTS.md, "the writer at 500k").
//   head -n 500000 CORPUS > a; sed -n 500001,600000p CORPUS > b
//   npx bun src/main.ts import a --no-verify --db /tmp/w/500k.sqlite; cp /tmp/w/500k.sqlite /tmp/w/run.sqlite
//   npx bun bench/writer-cost.ts --db /tmp/w/run.sqlite --events b [--batch 200] [--no-search]
import { parseArgs } from "node:util";
import type { NostrEvent } from "../src/protocol/event.ts";
import { openDatabase } from "../src/store/sqlite/db.ts";
import { SqliteWriter } from "../src/store/sqlite/write.ts";

const { values: o } = parseArgs({
  options: {
    db: { type: "string" },
    events: { type: "string" },
    batch: { type: "string", default: "200" },
    "no-search": { type: "boolean", default: false },
  },
});
if (!o.db || !o.events) throw new Error("usage: npx bun bench/writer-cost.ts --db FILE --events FILE.jsonl [--batch 200] [--no-search]");
const batch = Number(o.batch);
const CHECKPOINT_EVENTS = 10_000;
const db = openDatabase({ path: o.db, synchronous: "normal" });
db.exec("PRAGMA wal_autocheckpoint = 0");
let frames = 0;
const checkpoint = () => {
  frames += (db.query("PRAGMA wal_checkpoint(PASSIVE)").get() as { log: number }).log;
  db.query("PRAGMA wal_checkpoint(TRUNCATE)").get();
};
const writer = new SqliteWriter(db);
// The relay's defaults: NIP-09 and NIP-62 on, search on, the restricted kinds (DMs, gift wraps) skipped.
const rules = { deletion: true, vanish: true, search: !o["no-search"], searchSkipKinds: new Set([4, 1059]) };
const lines = (await Bun.file(o.events).text()).split("\n").filter((l) => l.length > 0);
const cpu0 = process.cpuUsage();
const t0 = performance.now();
let stored = 0;
let sinceCheckpoint = 0;
for (let i = 0; i < lines.length; i += batch) {
  const part = lines.slice(i, i + batch).map((json) => ({ event: JSON.parse(json) as NostrEvent, json }));
  for (const out of writer.writeBatch(part, rules)) if (out.stored) stored++;
  while (writer.purgeStep(5));
  sinceCheckpoint += part.length;
  if (sinceCheckpoint >= CHECKPOINT_EVENTS) {
    sinceCheckpoint = 0;
    checkpoint();
  }
}
checkpoint();
const cpu = process.cpuUsage(cpu0);
const seconds = (performance.now() - t0) / 1000;
const perK = lines.length / 1000;
console.log(
  JSON.stringify({
    events: lines.length,
    stored,
    batch,
    seconds: +seconds.toFixed(1),
    cpuPer1k: +((cpu.user + cpu.system) / 1e6 / perK).toFixed(3),
    walPagesPerEvent: +(frames / lines.length).toFixed(2),
  }),
);
db.close();
