// NIP-29 sybil private groups (issue 32 review finding 6): 10,000 fresh keys own 100,000 private
// groups (a 9007 and a 9002 `private` each, and one message each); a public group holds one
// message for every 50 private ones. On a SQLite store with its reader workers and writer thread,
// as the relay runs it, with the group state rebuilt from it:
//   1. the bytes of the job a stored read posts to a reader worker (the job as the store sends
//      it: packGroupLists), for an anonymous reader and a fresh AUTH key;
//   2. an anonymous REQ {kinds:[9]} limit 500: ms (the first, then the median of 30);
//   3. heap after 1,000 fresh AUTH keys each read once (a REQ {kinds:[9]} limit 10).
// Only public APIs the relay uses (policy/visibility.ts visibilityFor, Store.query), so the same
// file runs on an older tree for the "before".
//
//   npx bun bench/groups-sybil.ts [--groups 100000] [--keys 10000]
import { heapStats } from "bun:jsc";
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { defaults } from "../src/config/schema.ts";
import { GroupState } from "../src/groups/state.ts";
import { visibilityFor, writeRules } from "../src/policy/visibility.ts";
import type { NostrEvent } from "../src/protocol/event.ts";
import { freshRelayKey } from "../src/protocol/schnorr.ts";
import { packGroupLists } from "../src/store/sqlite/query.ts";
import { SqliteStore } from "../src/store/sqlite/store.ts";
import { allRows, type QueryJob } from "../src/store/types.ts";
import { intOption } from "./lib/args.ts";
import { fakePubkey, unsignedEvent } from "./lib/events.ts";

const { values } = parseArgs({
  options: { groups: { type: "string", default: "100000" }, keys: { type: "string", default: "10000" } },
});
const GROUPS = intOption("groups", values.groups);
const KEYS = intOption("keys", values.keys);
const root = mkdtempSync(join(tmpdir(), "bunstr-bench-sybil-"));
process.on("exit", () => rmSync(root, { recursive: true, force: true }));
const MiB = (b: number) => (b / 1048576).toFixed(1);
const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(" ");

const config = defaults();
config.database.data_directory = root;
config.groups.enabled = true;
config.groups.max_groups = Math.max(GROUPS + 1, config.groups.max_groups);
config.groups.max_groups_per_pubkey = Math.ceil(GROUPS / KEYS);
const relay = freshRelayKey();

console.log(`bench/groups-sybil: ${GROUPS} private groups of ${KEYS} keys; bun ${Bun.version}; load ${load()}`);
const store = new SqliteStore({ path: join(root, "bunstr.sqlite"), synchronous: "normal", readerWorkers: 2, writerThread: true });
await store.ready();

// The corpus, written through the store's writer as the relay writes.
const t0 = Math.floor(Date.now() / 1000) - 3600;
const keys = Array.from({ length: KEYS }, () => fakePubkey());
const events: NostrEvent[] = [unsignedEvent(keys[0]!, { kind: 9007, created_at: t0, tags: [["h", "lobby"]], content: "" })];
for (let g = 0; g < GROUPS; g++) {
  const owner = keys[g % KEYS]!;
  const id = `s${g.toString(36)}`;
  events.push(unsignedEvent(owner, { kind: 9007, created_at: t0, tags: [["h", id]], content: "" }));
  events.push(unsignedEvent(owner, { kind: 9002, created_at: t0, tags: [["h", id], ["private"]], content: "" }));
  events.push(unsignedEvent(owner, { kind: 9, created_at: t0 + 1 + g, tags: [["h", id]], content: `private ${g}` }));
  if (g % 50 === 0)
    events.push(unsignedEvent(keys[0]!, { kind: 9, created_at: t0 + 1 + g, tags: [["h", "lobby"]], content: `public ${g}` }));
}
let started = performance.now();
for (let i = 0; i < events.length; i += 5000)
  await store.writeBatch(
    events.slice(i, i + 5000).map((event) => ({ event, json: JSON.stringify(event) })),
    writeRules(config),
  );
console.log(`corpus: ${events.length} events written in ${((performance.now() - started) / 1000).toFixed(1)} s`);

const state = new GroupState({ config: () => config, relayPubkey: relay.pubkey });
const built = await state.rebuild(store.groups);
console.log(`state: ${built.groups} groups rebuilt in ${built.ms} ms`);
const rules = { config, groups: state, relayKey: relay };

const job = (authed: ReadonlySet<string>, limit: number): QueryJob => ({
  maxSeq: store.lastSeq(),
  now: 0,
  visibility: visibilityFor(rules, authed),
  filters: [{ kinds: [9] }],
  limits: [limit],
});

// 1. Bytes posted per reader job.
const anonymous = new Set<string>();
const bytes = (authed: ReadonlySet<string>) => JSON.stringify(packGroupLists(job(authed, 500))).length;
console.log(`job posted to a reader: anonymous ${bytes(anonymous)} bytes, a fresh AUTH key ${bytes(new Set([fakePubkey()]))} bytes`);

// 2. Anonymous REQ {kinds:[9]} limit 500.
const req = async (authed: ReadonlySet<string>, limit: number) => {
  const t = performance.now();
  const rows = await allRows(store.query(job(authed, limit)));
  return { ms: performance.now() - t, rows: rows.length };
};
const first = await req(anonymous, 500);
const times: number[] = [];
for (let i = 0; i < 30; i++) times.push((await req(anonymous, 500)).ms);
times.sort((a, b) => a - b);
console.log(
  `anonymous REQ {kinds:[9]} limit 500: first ${first.ms.toFixed(1)} ms (${first.rows} events), median of 30 ${times[15]!.toFixed(1)} ms (quickest ${times[0]!.toFixed(1)}); load ${load()}`,
);

// 3. Heap after 1,000 fresh AUTH keys read once each.
Bun.gc(true);
const heap0 = heapStats().heapSize;
started = performance.now();
for (let i = 0; i < 1000; i++) await req(new Set([fakePubkey()]), 10);
const ms = performance.now() - started;
Bun.gc(true);
console.log(
  `1,000 fresh AUTH keys, one REQ each: ${ms.toFixed(0)} ms (${(ms / 1000).toFixed(2)} ms a REQ), heap +${MiB(heapStats().heapSize - heap0)} MiB (${MiB(heapStats().heapSize)} MiB); load ${load()}`,
);
await store.close();
process.exit(0);
