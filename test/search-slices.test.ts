// Issue 36, item 6: a full-text search could not be interrupted. FTS5 answers a MATCH of several
// words inside one statement, stepping every word's list until they meet; words that are each in
// almost every event but never all together made that one statement read every list to its end,
// holding a reader worker for the whole of it. Attackers on 2 addresses searching for such words
// held both readers, and an honest client's small REQs waited behind them. The search is now read
// a bounded piece per step (store/sqlite/query.ts searchWalk), so the readers' round-robin by
// address serves the honest client between two pieces. Over real websockets from 127.0.0.x
// addresses, rate limits as shipped (loopback not exempt).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RawWs } from "../bench/lib/rawws.ts";
import { defaults } from "../src/config/schema.ts";
import type { NostrEvent } from "../src/protocol/event.ts";
import { ftsExpression } from "../src/nips/nip50.ts";
import { runQuery, StatementCache } from "../src/store/sqlite/query.ts";
import { SEARCH_WINDOW } from "../src/store/semantics.ts";
import { SqliteStore } from "../src/store/sqlite/store.ts";
import type { PendingWrite } from "../src/store/types.ts";
import { now, startTestRelay, type TestRelay } from "./helpers.ts";

const N = 40_000;
/** 32 words (nips.nip50_max_terms): event k holds every one but word k % 32. */
const WORDS = Array.from(
  { length: 32 },
  (_, i) => `common${String.fromCharCode(97 + (i % 26))}${String.fromCharCode(97 + Math.floor(i / 26))}`,
);
const dir = mkdtempSync(join(tmpdir(), "bunstr-search-slices-"));
const hex64 = (seed: string) => Bun.hash(seed).toString(16).padStart(16, "0").repeat(4);
const sampleIds: string[] = [];
let ftsCounts = { one: -1, all: -1 };
let relay: TestRelay | undefined;
const sockets: RawWs[] = [];

beforeAll(async () => {
  const store = new SqliteStore({ path: join(dir, "bunstr.sqlite"), synchronous: "normal", readerWorkers: 1 });
  store.db.exec("PRAGMA synchronous = OFF");
  const rules = { deletion: false, vanish: false, search: true, searchSkipKinds: new Set<number>() };
  const base = now() - 10 * 86400;
  for (let i = 0; i < N; i += 2000) {
    const batch: PendingWrite[] = [];
    for (let k = i; k < i + 2000; k++) {
      const event: NostrEvent = {
        id: hex64(`ev ${k}`),
        pubkey: hex64(`pk ${k % 300}`),
        created_at: base + k,
        kind: 1,
        tags: [],
        content: WORDS.filter((_, j) => j !== k % WORDS.length).join(" "),
        sig: "ab".repeat(64),
      };
      if (k % 500 === 3) sampleIds.push(event.id);
      batch.push({ event, json: JSON.stringify(event) } as PendingWrite);
    }
    store.writeBatch(batch, rules);
  }
  // FTS5's own counts, in one statement with no timeout: the relay's check of them (a REQ of all
  // 32 words) ran past database.query_timeout_ms beside a CPU hog at load 11.
  const matches = (words: string[]) =>
    (store.db.query("SELECT count(*) AS n FROM events_fts WHERE events_fts MATCH ?").get(ftsExpression(words)) as { n: number }).n;
  ftsCounts = { one: matches([WORDS[0]!]), all: matches(WORDS) };
  await store.close();
  relay = await startTestRelay(
    { database: { reader_workers: 2 }, rate_limits: { ...defaults().rate_limits, exempt_private_addresses: false } },
    { dir },
  );
}, 60_000);

afterAll(async () => {
  for (const s of sockets) s.close();
  await relay?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function connect(address: string): Promise<RawWs> {
  const s = await RawWs.connect(Number(new URL(relay!.url).port), address);
  sockets.push(s);
  return s;
}

const percentile = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)]!;

test("searches for common words that never meet do not hold the readers: an honest client on another address stays fast", async () => {
  const honest = await connect("127.0.0.4");
  expect((await honest.req("warm", [{ ids: [sampleIds[0]!] }])).events).toBe(1);
  // The attack is what it claims: each word is in almost every event, all of them in none.
  expect(ftsCounts).toEqual({ one: N - N / WORDS.length, all: 0 });
  // And the relay says so for one word.
  const check = await connect("127.0.0.5");
  check.send(["COUNT", "one", { search: WORDS[0] }]);
  expect((await check.next((f) => f[1] === "one", 20_000))[2].count).toBe(N - N / WORDS.length);

  // Attackers: 2 addresses, 3 connections each, each connection keeps one such search running.
  let running = true;
  let attacks = 0;
  const attackers = await Promise.all(["127.0.0.2", "127.0.0.3"].flatMap((a) => [connect(a), connect(a), connect(a)]));
  const loops = attackers.map(async (a, n) => {
    for (let i = 0; running && !a.closed; i++) {
      // The words in another order each time (no answer kept anywhere can help).
      const words = [...WORDS].sort(() => Math.random() - 0.5).join(" ");
      await a.req(`s${n}-${i}`, [{ search: words, limit: 20 }], 30_000).catch(() => undefined);
      attacks++;
    }
  });
  // Wait until the attack is under way before measuring.
  for (const deadline = Date.now() + 10_000; attacks < 2 && Date.now() < deadline; ) await Bun.sleep(10);

  const times: number[] = [];
  for (let i = 0; i < 60; i++) {
    const r = await honest.req(`h${i}`, [{ ids: [sampleIds[i % sampleIds.length]!] }]);
    expect([r.end, r.events]).toEqual([["EOSE", `h${i}`], 1]);
    times.push(r.ms);
    await Bun.sleep(20);
  }
  running = false;
  await Promise.all(loops);
  const [p50, p90, p99] = [50, 90, 99].map((p) => percentile(times, p));
  console.log(
    `attack searches ${attacks}; honest ids REQs: n ${times.length}, p50 ${p50!.toFixed(1)} ms, p90 ${p90!.toFixed(1)} ms, p99 ${p99!.toFixed(1)} ms`,
  );
  expect(attacks).toBeGreaterThan(2);
  // Before: each search was one statement of the whole index, and the honest REQ waited for it
  // (fc9185b: p50 ~290 ms on a busy 2-core box); now p50 ~12 ms, p90 ~25 ms; beside a CPU hog at
  // load 10, p50 40 ms, p90 153 ms. A busy machine's stray waits make the single slowest of 60
  // (p99) a poor bound, so it is only printed; p50 and p90 keep a margin under the old p50.
  expect(p50).toBeLessThan(100);
  expect(p90).toBeLessThan(250);
}, 60_000);

test("a search with more words than nips.nip50_max_terms, or FTS5 syntax, is refused with CLOSED invalid:, as REQ and COUNT", async () => {
  const c = await connect("127.0.0.6");
  const many = [...WORDS, "more"].join(" ");
  for (const q of [many, `${WORDS[0]} OR ${WORDS[1]}`, `"${WORDS[0]} ${WORDS[1]}"`, `${WORDS[0]}*`]) {
    const r = await c.req("r", [{ search: q }]);
    expect([q, r.end]).toEqual([q, ["CLOSED", "r", expect.stringMatching(/^invalid: /)]]);
    c.send(["COUNT", "c", { search: q }]);
    expect([q, await c.next((f) => f[1] === "c" && f[0] === "CLOSED", 5000, c.frames.length - 1).catch(() => "none")]).toEqual([
      q,
      ["CLOSED", "c", expect.stringMatching(/^invalid: /)],
    ]);
  }
  // 32 words are allowed: the search runs. These 32 never meet, so it reads every word's list;
  // a loaded box (load 10 beside a CPU hog) ran it past database.query_timeout_ms, which stops
  // it with error: (a search that ran), never invalid: (one refused).
  const ok = (await c.req("ok", [{ search: WORDS.join(" ") }], 20_000)).end;
  if (ok[0] === "CLOSED") expect(ok).toEqual(["CLOSED", "ok", expect.stringMatching(/^error: query took too long/)]);
  else expect(ok).toEqual(["EOSE", "ok"]);
}, 60_000);

test("the pieces give FTS5's own answer: the newest SEARCH_WINDOW matches, in the order of its bm25 rank, then newest", async () => {
  const store = new SqliteStore({ path: ":memory:", synchronous: "normal", readerWorkers: 0 });
  const rules = { deletion: false, vanish: false, search: true, searchSkipKinds: new Set<number>() };
  const vocab = ["apple", "banana", "cherry", "date", "elder", "fig", "grape", "kiwi", "lemon", "mango"];
  let x = 1;
  const rnd = () => (x = (x * 1103515245 + 12345) % 2147483648) / 2147483648;
  const events: NostrEvent[] = Array.from({ length: 6000 }, (_, k) => ({
    id: hex64(`rank ${k}`),
    pubkey: hex64(`rank pk ${k % 50}`),
    created_at: 1_700_000_000 + Math.floor(rnd() * 5000),
    kind: 1,
    tags: [],
    // Skewed: the first words are common, the last rare; 1 to 30 words.
    content: Array.from({ length: 1 + Math.floor(rnd() * 30) }, () => vocab[Math.floor(rnd() * rnd() * vocab.length)]).join(" "),
    sig: "ab".repeat(64),
  }));
  store.writeBatch(
    events.map((event) => ({ event, json: JSON.stringify(event) }) as PendingWrite),
    rules,
  );
  const cache = new StatementCache(store.db);
  for (const q of ["fig", "apple", "fig kiwi", "apple banana", "apple mango lemon", "kiwi lemon mango", "banana cherry date elder"]) {
    const got = runQuery(cache, { filters: [{ search: q }], limits: [300], maxSeq: Number.MAX_SAFE_INTEGER, now: 0 }).map(
      (j) => (JSON.parse(j) as NostrEvent).id,
    );
    const want = (
      store.db
        .query(
          "SELECT lower(hex(e.id)) AS id FROM (SELECT rowid, rank FROM events_fts WHERE events_fts MATCH ? ORDER BY rowid DESC LIMIT ?) f JOIN events e ON e.seq = f.rowid ORDER BY f.rank, e.created_at DESC, e.id LIMIT 300",
        )
        .all(ftsExpression(q.split(" ")), SEARCH_WINDOW) as { id: string }[]
    ).map((r) => r.id);
    expect(want.length).toBeGreaterThan(0);
    expect([q, got]).toEqual([q, want]);
  }
  await store.close();
});
