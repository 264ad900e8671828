// NIP-29: the start's re-run of 9005 deletions (relay/groups-purge.ts GroupPurge.remains) on a
// SQLite store of 20,000 group events: G groups whose 9005s named K ids each, the first of each
// group's stored (deleted then) or, with `none`, none stored (the common case: their deletion ran).
// Prints the time, the queries it made, and how many targets are still stored after (must be 0).
//
//   npx bun bench/groups-remains.ts [groups=2000] [ids per group=2] [none]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { GroupPurge } from "../src/relay/groups-purge.ts";
import { SqliteStore } from "../src/store/sqlite/store.ts";
import { serializeEvent, type NostrEvent } from "../src/protocol/event.ts";
import { defaults } from "../src/config/schema.ts";

const G = Number(process.argv[2] ?? 2000),
  K = Number(process.argv[3] ?? 2);
const dir = mkdtempSync(join(tmpdir(), "rvg-remains-"));
const store = new SqliteStore({
  path: join(dir, "db.sqlite"),
  synchronous: "normal",
  readerWorkers: 2,
  queryTimeoutMs: 10000,
  writerThread: true,
});
const pk = "11".repeat(32);
const events: NostrEvent[] = Array.from({ length: 20000 }, (_, i) => ({
  id: randomBytes(32).toString("hex"),
  pubkey: pk,
  created_at: 1_700_000_000 + i,
  kind: 9,
  tags: [["h", `g${i % G}`]],
  content: `${i}`,
  sig: "00".repeat(64),
}));
await store.writeBatch(
  events.map((event) => ({ event, json: serializeEvent(event) })),
  { deletion: true, vanish: true, search: true, searchSkipKinds: new Set() },
);
// Each group deleted K ids: one of them stored (its own event: deleted now), the rest not stored.
const STORED = process.argv[4] !== "none";
const mods = Array.from({ length: G }, (_, g) => ({
  group: `g${g}`,
  ids: [STORED ? events[g]!.id : randomBytes(32).toString("hex"), ...Array.from({ length: K - 1 }, () => randomBytes(32).toString("hex"))],
}));
let queries = 0;
const q = store.query.bind(store);
(store as any).query = (job: any) => (queries++, q(job));
const ctx: any = {
  groups: { deleted: () => [], deletedByModerators: () => mods },
  store,
  closing: false,
  config: defaults(),
  relayKey: { pubkey: pk },
};
const t = performance.now();
await new GroupPurge(ctx).remains();
const ms = performance.now() - t;
const left = await Promise.all(mods.map(async (m) => ((await store.admin.deleteEvent(m.ids[0]!)) ? 1 : 0)));
console.log(
  `remains(): ${G} groups x ${K} deleted ids: ${ms.toFixed(0)} ms, ${queries} queries; targets still stored after: ${left.reduce((a, b) => a + b, 0 as number)}`,
);
await store.close();
rmSync(dir, { recursive: true, force: true });
