// Checks the bench oracle (lib/oracle.ts) against brute force on a corpus prefix: the stored set
// against an independent replaceable-event resolution, and the answers to the query mix plus
// random filters against lib/match.ts naiveQuery over every stored event. Exit 0 when all agree.
//
//   npx bun bench/oracle-check.ts [--events 20000] [--filters 2000] [--seed 7]
import { parseArgs } from "node:util";
import { loadCorpus, type BenchEvent } from "./corpus.ts";
import { naiveQuery, nip01Order, type RawFilter } from "./lib/match.ts";
import { isAddressableKind, isEphemeralKind, isReplaceableKind, Oracle } from "./lib/oracle.ts";
import { prng } from "./lib/stats.ts";
import { buildRequests, QUERY_TYPES } from "./scenarios/query.ts";

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    events: { type: "string", default: "20000" },
    filters: { type: "string", default: "2000" },
    seed: { type: "string", default: "7" },
  },
  strict: true,
});
const n = Number(values.events);
const corpus = loadCorpus(n, (m) => console.error(m));
const events: BenchEvent[] = Array.from({ length: n }, (_, i) => corpus.event(i));
const oracle = new Oracle({ sweepEvery: 500 }); // sweep often, to check sweeping too
for (const e of events) oracle.add(e);

// Brute-force storage: group every event by its slot, keep the newest (lowest id on ties).
const winners = new Map<string, BenchEvent>();
const stored: BenchEvent[] = [];
for (const e of events) {
  if (isEphemeralKind(e.kind)) continue;
  if (!isReplaceableKind(e.kind) && !isAddressableKind(e.kind)) {
    stored.push(e);
    continue;
  }
  const d = isAddressableKind(e.kind) ? (e.tags.find((t) => t[0] === "d")?.[1] ?? "") : "";
  const key = JSON.stringify([e.kind, e.pubkey, d]);
  const cur = winners.get(key);
  if (!cur || e.created_at > cur.created_at || (e.created_at === cur.created_at && e.id < cur.id)) winners.set(key, e);
}
stored.push(...winners.values());
let bad = 0;
const fail = (msg: string) => {
  bad++;
  if (bad <= 10) console.log(`MISMATCH ${msg}`);
};
if (stored.length !== oracle.size) fail(`stored count: brute force ${stored.length}, oracle ${oracle.size}`);
for (const e of stored) if (!oracle.has(e.id)) fail(`oracle lacks stored event ${e.id}`);

const brute = (filters: RawFilter[]): BenchEvent[] => {
  const limits = oracle.limitsFor(filters);
  const byId = new Map<string, BenchEvent>();
  filters.forEach((f, i) => {
    for (const e of naiveQuery(f, stored, limits[i]!)) byId.set(e.id, e);
  });
  return [...byId.values()].sort(nip01Order);
};

const reqs: RawFilter[][] = buildRequests(oracle, corpus, Math.floor(Number(values.filters) / 2), Number(values.seed)).map(
  (r) => r.filters,
);
// Random filters from random events: every condition kind, alone and combined.
const rand = prng(Number(values.seed));
const any = () => events[Math.floor(rand() * n)]!;
const sub = <T>(xs: T[]) => xs.filter(() => rand() < 0.5);
while (reqs.length < Number(values.filters)) {
  const f: RawFilter = {};
  const e = any();
  if (rand() < 0.15) f.ids = [e.id, any().id];
  if (rand() < 0.4) f.authors = [e.pubkey, ...sub([any().pubkey, any().pubkey])];
  if (rand() < 0.5) f.kinds = sub([0, 1, 3, 6, 7, 30023, 5]);
  const tag = e.tags[Math.floor(rand() * e.tags.length)];
  if (tag && rand() < 0.5) f[`#${tag[0]}`] = [tag[1], ...sub([any().id, "nope"])];
  if (rand() < 0.3) f.until = e.created_at + Math.floor(rand() * 50);
  if (rand() < 0.3) f.since = e.created_at - Math.floor(rand() * 2000);
  if (rand() < 0.7) f.limit = Math.floor(rand() * 60);
  reqs.push(rand() < 0.2 ? [f, { kinds: [e.kind], limit: 5 }] : [f]);
}
let compared = 0;
let returned = 0;
for (const filters of reqs) {
  const want = brute(filters).map((e) => e.id);
  const got = oracle.answer(filters).map((e) => e.id);
  compared++;
  returned += got.length;
  if (want.join() !== got.join())
    fail(
      `${JSON.stringify(filters).slice(0, 300)}: brute force ${want.length} [${want.slice(0, 5).map((x) => x.slice(0, 8))}], oracle ${got.length} [${got.slice(0, 5).map((x) => x.slice(0, 8))}]`,
    );
}
console.log(
  `oracle check: ${n} events (${stored.length} stored), ${compared} REQs (${QUERY_TYPES.join("/")} mix + random filters), ${returned} events returned, ${bad} mismatches`,
);
process.exit(bad === 0 ? 0 : 1);
