// bunstr on Postgres with several nodes: 1 node, then 2 nodes (bunstr serve processes
// on different ports, one fresh Postgres database, one Redis bus), measured the same way:
//   ingest  the pre-signed bench corpus (corpus.ts) over C pipelined connections split across the
//           nodes; events/s until the last OK; every event OK true (older versions of replaceable
//           events may be refused "duplicate:"), and the events table afterwards holds exactly the
//           events the oracle keeps, each once.
//   fanout  the mixed live workload of fanout.ts (subscriptions of many shapes, limit 0) split
//           across the nodes, one publisher per node; deliveries/s and EVENT-sent -> delivery
//           latency; every (subscription, event) pair exactly once, checked against the reference
//           matcher: a missing, duplicated or extra delivery fails the run.
// Relays run with signature checks on (the default; --no-verify turns them off) and [rate_limits]
// off. Redis: a private redis-server on a free port, so its CPU is this run's alone (the bus
// channels are named per database, so a shared Redis would work too: --redis URL).
//
//   npx bun bench/cluster.ts [--events 20000] [--nodes 1|2|both] [--subs 400] [--fanout-events 3000]
//
// Progress on stderr; stdout gets the table and a one-line JSON result. Exit 0 = every check
// passed, 1 = a check failed or the run timed out, 2 = bad arguments.
import { SQL } from "bun";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { NostrEvent } from "../src/protocol/event.ts";
import { createDatabase, dropDatabase, PG_URL } from "../test/postgres-env.ts";
import { loadCorpus, lineHead, type Corpus } from "./corpus.ts";
import { Conn } from "./lib/conn.ts";
import { naiveMatch, naiveOf } from "./lib/match.ts";
import { isAddressableKind, metaOf, Oracle } from "./lib/oracle.ts";
import { clockTicks, cpuSeconds, freePort, RATE_LIMITS_OFF, RelayProcess } from "./lib/relay.ts";
import { Failures, summarize } from "./lib/stats.ts";
import { makeWorkload, type Sub } from "./scenarios/fanout.ts";

const USAGE = `usage: npx bun bench/cluster.ts [options]
  --events N         ingest corpus size (default 20000)
  --nodes 1|2|both   cluster sizes to run (default both)
  --conns C          ingest connections, split across the nodes (default 8)
  --window W         unacknowledged EVENTs per ingest connection (default 200)
  --subs S           live subscriptions (default 400) over --sub-conns connections (default 40)
  --sub-conns R      receiving connections, split across the nodes
  --fanout-events E  events published in the fanout phase (default 3000; ephemeral ones are left out)
  --pub-window P     unacknowledged EVENTs per publisher (default 50)
  --no-verify        relays started with verify_signatures = false
  --redis URL        use this Redis instead of a private redis-server
  --timeout S        hard limit for the whole run (default 600)`;

class UsageError extends Error {}
const log = (m: string) => console.error(`[cluster] ${m}`);
const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(" ");
const STALL_MS = 20_000;

function options(argv: string[]) {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      events: { type: "string", default: "20000" },
      nodes: { type: "string", default: "both" },
      conns: { type: "string", default: "8" },
      window: { type: "string", default: "200" },
      subs: { type: "string", default: "400" },
      "sub-conns": { type: "string", default: "40" },
      "fanout-events": { type: "string", default: "3000" },
      "pub-window": { type: "string", default: "50" },
      "no-verify": { type: "boolean", default: false },
      redis: { type: "string" },
      timeout: { type: "string", default: "600" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) console.log(USAGE), process.exit(0);
  const int = (name: string, v: string, max: number, min = 1) => {
    if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) throw new UsageError(`--${name} must be an integer from ${min} to ${max}`);
    return Number(v);
  };
  if (!["1", "2", "both"].includes(values.nodes)) throw new UsageError("--nodes must be 1, 2 or both");
  return {
    events: int("events", values.events, 2_000_000, 100),
    nodes: values.nodes === "both" ? [1, 2] : [Number(values.nodes)],
    conns: int("conns", values.conns, 256, 2),
    window: int("window", values.window, 1000),
    subs: int("subs", values.subs, 5000),
    subConns: int("sub-conns", values["sub-conns"], 500, 2),
    fanoutEvents: int("fanout-events", values["fanout-events"], 100_000, 10),
    pubWindow: int("pub-window", values["pub-window"], 1000),
    verify: !values["no-verify"],
    redis: values.redis,
    timeoutSec: int("timeout", values.timeout, 7200),
  };
}
type Options = ReturnType<typeof options>;

// ---------------------------------------------------------------- processes

/** A private redis-server (no persistence) on a free port. */
async function startRedis(): Promise<{ url: string; pid: number; stop(): Promise<void> }> {
  const port = await freePort();
  const proc = Bun.spawn(["redis-server", "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
    stdout: "pipe",
    stderr: "pipe",
  });
  process.on("exit", () => proc.kill("SIGKILL"));
  for (let i = 0; i < 100; i++) {
    const ok = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {} } })
      .then((s) => (s.end(), true))
      .catch(() => false);
    if (ok) return { url: `redis://127.0.0.1:${port}`, pid: proc.pid, stop: async () => (proc.kill("SIGTERM"), void (await proc.exited)) };
    await Bun.sleep(50);
  }
  proc.kill("SIGKILL");
  throw new Error("redis-server did not start");
}

interface Cluster {
  db: string;
  url: string;
  nodes: RelayProcess[];
  sql: SQL;
}

async function startCluster(n: number, opts: Options, busUrl: string, tag: string): Promise<Cluster> {
  const db = `bunstr_bench_cluster_${process.pid}_${tag}`;
  const url = await createDatabase(db);
  const dir = mkdtempSync(join(tmpdir(), "bunstr-cluster-"));
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  const config = join(dir, "bunstr.toml");
  writeFileSync(
    config,
    `[database]\nengine = "postgres"\npostgres_url = "${url}"\npostgres_pool = 10\nbus_url = "${busUrl}"\n\n` +
      `[options]\nverify_signatures = ${opts.verify}\n\n[limits]\nquery_ms_per_second = 1000000\n\n${RATE_LIMITS_OFF}`,
  );
  const nodes: RelayProcess[] = [];
  // One after the other: the first migrates the schema (the others would wait on its advisory lock anyway).
  for (let i = 0; i < n; i++)
    nodes.push(await RelayProcess.spawn({ verify: opts.verify, args: ["--config", config], startTimeoutMs: 30_000 }));
  const sql = new SQL({ url, max: 2 } as ConstructorParameters<typeof SQL>[0]);
  return { db, url, nodes, sql };
}

async function stopCluster(c: Cluster, failures: Failures): Promise<void> {
  await c.sql.close();
  for (const [i, node] of c.nodes.entries()) {
    const code = await node.stop();
    if (code !== 0) failures.add("relay exit", `node ${i + 1} exited with ${code}: ${node.stderr.text.slice(-500)}`);
    node.removeDataDir();
  }
  await dropDatabase(c.db);
}

/**
 * CPU seconds of the Postgres server: every postgres process, plus the CPU of its exited children
 * (backends of closed connections), which the postmaster collects as cutime + cstime. The server
 * is shared with whatever else runs on this box.
 */
function postgresCpu(): number {
  let total = 0;
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      if (!stat.includes("(postgres)")) continue;
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      total += (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / clockTicks();
    } catch {
      // gone meanwhile
    }
  }
  return total;
}

interface CpuMeter {
  stop(): { relays: number; postgres: number; redis: number; client: number };
}
function cpuMeter(relays: RelayProcess[], redisPid: number | undefined): CpuMeter {
  const relayCpu = () => relays.reduce((s, r) => s + cpuSeconds(r.pid), 0);
  const redisCpu = () => (redisPid ? cpuSeconds(redisPid) : NaN);
  const self = () => cpuSeconds(process.pid);
  const start = { relays: relayCpu(), postgres: postgresCpu(), redis: redisCpu(), client: self() };
  return {
    stop: () => ({
      relays: relayCpu() - start.relays,
      postgres: postgresCpu() - start.postgres,
      redis: redisCpu() - start.redis,
      client: self() - start.client,
    }),
  };
}

// ---------------------------------------------------------------- ingest

interface IngestResult {
  events: number;
  okTrue: number;
  refusedOlder: number;
  seconds: number;
  eventsPerSec: number;
  latencyMs: { p50: number; p99: number };
  stored: number;
  cpu: ReturnType<CpuMeter["stop"]>;
}

async function ingest(
  c: Cluster,
  corpus: Corpus,
  oracle: Oracle,
  opts: Options,
  redisPid: number | undefined,
  failures: Failures,
): Promise<IngestResult> {
  const n = corpus.size;
  const C = opts.conns;
  // Connection k goes to node k mod nodes; it sends events k, k+C, k+2C, …
  const conns = await Promise.all(Array.from({ length: C }, (_, k) => Conn.connect(c.nodes[k % c.nodes.length]!.url, `ingest-${k}`)));
  const state = new Uint8Array(n);
  const sentAt = new Float64Array(n);
  const latency: number[] = [];
  const next = conns.map((_, k) => k);
  const inFlight = conns.map(() => 0);
  let acked = 0;
  let okTrue = 0;
  let refusedOlder = 0;
  let lastOk = 0;
  let finish: () => void = () => {};
  const done = new Promise<void>((r) => (finish = r));
  const pump = (k: number) => {
    while (inFlight[k]! < opts.window && next[k]! < n) {
      const i = next[k]!;
      next[k] = i + C;
      inFlight[k]!++;
      state[i] = 1;
      sentAt[i] = performance.now();
      conns[k]!.send(`["EVENT",${corpus.lines[i]}]`);
    }
  };
  conns.forEach((conn, k) => {
    conn.onFrame = (f) => {
      if (f[0] !== "OK") {
        if (f[0] !== "AUTH") failures.add("unexpected frame during ingest", `${conn.name}: ${JSON.stringify(f).slice(0, 200)}`);
        return;
      }
      const [, id, accepted, message] = f as [string, string, boolean, string];
      const i = corpus.byId.get(id);
      if (i === undefined) return failures.add("OK for an unknown id", id);
      if (state[i] !== 1) return failures.add(state[i] === 2 ? "OK twice" : "OK before EVENT", `#${i} ${id}`);
      if (i % C !== k) failures.add("OK on the wrong connection", `#${i} on ${conn.name}`);
      state[i] = 2;
      acked++;
      lastOk = performance.now();
      latency.push(lastOk - sentAt[i]!);
      if (accepted === true) okTrue++;
      else if (typeof message === "string" && message.startsWith("duplicate:") && oracle.isGone(id)) refusedOlder++;
      else failures.add("OK false", `#${i} ${id}: ${JSON.stringify(message)}`);
      inFlight[k]!--;
      pump(k);
      if (acked === n) finish();
    };
  });
  const meter = cpuMeter(c.nodes, redisPid);
  const first = performance.now();
  for (let k = 0; k < C; k++) pump(k);
  let seen = -1;
  let progressAt = performance.now();
  while (acked < n) {
    if (await Promise.race([done.then(() => true), Bun.sleep(500).then(() => false)])) break;
    if (acked !== seen) (seen = acked), (progressAt = performance.now());
    if (performance.now() - progressAt > STALL_MS) {
      failures.add("no OK", `${n - acked} of ${n} events without an OK after ${STALL_MS} ms of silence`);
      break;
    }
    const dead = conns.find((x) => x.closed);
    if (dead) {
      failures.add("connection closed during ingest", `${dead.name} code ${dead.closeCode}`);
      break;
    }
  }
  const cpu = meter.stop();
  const seconds = (lastOk - first) / 1000;
  await Promise.all(conns.map((x) => x.close()));
  // Exactly the oracle's events, each once.
  const rows = (await c.sql`SELECT encode(id, 'hex') AS id FROM events`) as { id: string }[];
  const ids = new Set<string>();
  for (const r of rows) {
    if (ids.has(r.id)) failures.add("stored twice", r.id);
    ids.add(r.id);
    if (oracle.isGone(r.id) || !corpus.byId.has(r.id)) failures.add("stored but should not be", r.id);
  }
  for (let i = 0; i < n; i++)
    if (!oracle.isGone(corpus.id(i)) && !ids.has(corpus.id(i))) failures.add("not stored", `#${i} ${corpus.id(i)}`);
  if (rows.length !== oracle.size) failures.add("stored count", `${rows.length} rows in events, the oracle keeps ${oracle.size}`);
  const lat = summarize(latency);
  return {
    events: n,
    okTrue,
    refusedOlder,
    seconds,
    eventsPerSec: okTrue / seconds,
    latencyMs: { p50: lat.p50, p99: lat.p99 },
    stored: rows.length,
    cpu,
  };
}

// ---------------------------------------------------------------- fanout

interface FanoutResult {
  subs: number;
  events: number;
  expected: number;
  received: number;
  seconds: number;
  deliveriesPerSec: number;
  latencyMs: { p50: number; p99: number; max: number };
  cpu: ReturnType<CpuMeter["stop"]>;
}

function fanoutWorkload(opts: Options): { events: NostrEvent[]; subs: Sub[] } {
  // Ephemeral events are left out: they are fanned out only by the node that received them (see the report).
  const w = makeWorkload("mixed", Math.ceil(opts.fanoutEvents * 1.06), opts.subs, opts.subConns, 1);
  const events = w.events.filter((e) => e.kind < 20000 || e.kind >= 30000).slice(0, opts.fanoutEvents);
  return { events, subs: w.subs };
}

async function fanout(
  c: Cluster,
  work: { events: NostrEvent[]; subs: Sub[] },
  opts: Options,
  redisPid: number | undefined,
  failures: Failures,
): Promise<FanoutResult> {
  const { events, subs } = work;
  const E = events.length;
  const index = new Map(events.map((e, i) => [e.id, i]));
  const wire = events.map((e) =>
    JSON.stringify({ id: e.id, pubkey: e.pubkey, created_at: e.created_at, kind: e.kind, tags: e.tags, content: e.content, sig: e.sig }),
  );
  // expected[s*E + i] = 1 when subscription s must get event i; counts the same shape.
  const expected = new Uint8Array(subs.length * E);
  const counts = new Uint8Array(subs.length * E);
  let due = 0;
  for (const s of subs) {
    const ns = s.filters.map((f) => naiveOf(f));
    for (let i = 0; i < E; i++) if (ns.some((nf) => naiveMatch(nf, events[i]!))) (expected[s.slot * E + i] = 1), due++;
  }
  const bySlot = new Map(subs.map((s) => [`s${s.num}`, s.slot]));
  const sentAt = new Float64Array(E);
  const latency: number[] = [];
  let received = 0;
  let lastDelivery = 0;
  // Receiving connection r goes to node r mod nodes.
  const receivers = await Promise.all(
    Array.from({ length: opts.subConns }, (_, r) => Conn.connect(c.nodes[r % c.nodes.length]!.url, `recv-${r}`)),
  );
  let eoses = 0;
  receivers.forEach((conn) => {
    conn.onFrame = (f, raw) => {
      if (f[0] === "EOSE") return void eoses++;
      if (f[0] !== "EVENT") {
        if (f[0] !== "AUTH") failures.add("unexpected frame on a subscriber", `${conn.name}: ${raw.slice(0, 200)}`);
        return;
      }
      const slot = bySlot.get(f[1] as string);
      const ev = f[2] as NostrEvent;
      const i = index.get(ev?.id);
      if (slot === undefined || i === undefined) return failures.add("delivery of an unknown subscription or event", raw.slice(0, 200));
      const k = slot * E + i;
      const seen = counts[k]!;
      if (seen < 255) counts[k] = seen + 1;
      if (!expected[k]) return failures.add("extra delivery", `${f[1]} got #${i}`);
      if (seen >= 1) return failures.add("duplicate delivery", `${f[1]} got #${i} ${seen + 1} times`);
      if (JSON.stringify(ev) !== wire[i]) failures.add("wrong event bytes", `${f[1]} #${i}`);
      received++;
      lastDelivery = performance.now();
      latency.push(lastDelivery - sentAt[i]!);
    };
  });
  for (const s of subs) receivers[s.conn]!.send(JSON.stringify(["REQ", `s${s.num}`, ...s.filters]));
  for (let t = 0; eoses < subs.length && t < 200; t++) await Bun.sleep(50);
  if (eoses < subs.length) failures.add("EOSE", `${eoses} of ${subs.length} subscriptions answered EOSE`);

  // One publisher per node; publisher p sends events p, p+P, … with at most pubWindow without OK.
  const P = Math.max(2, c.nodes.length);
  const pubs = await Promise.all(Array.from({ length: P }, (_, p) => Conn.connect(c.nodes[p % c.nodes.length]!.url, `pub-${p}`)));
  const next = pubs.map((_, p) => p);
  const inFlight = pubs.map(() => 0);
  let oks = 0;
  const pump = (p: number) => {
    while (inFlight[p]! < opts.pubWindow && next[p]! < E) {
      const i = next[p]!;
      next[p] = i + P;
      inFlight[p]!++;
      sentAt[i] = performance.now();
      pubs[p]!.send(`["EVENT",${wire[i]}]`);
    }
  };
  pubs.forEach((conn, p) => {
    conn.onFrame = (f) => {
      if (f[0] !== "OK") return;
      if (f[2] !== true) failures.add("publisher OK false", JSON.stringify(f).slice(0, 200));
      oks++;
      inFlight[p]!--;
      pump(p);
    };
  });
  const meter = cpuMeter(c.nodes, redisPid);
  const first = performance.now();
  for (let p = 0; p < P; p++) pump(p);
  let seen = -1;
  let progressAt = performance.now();
  while (received < due || oks < E) {
    await Bun.sleep(100);
    if (received + oks !== seen) (seen = received + oks), (progressAt = performance.now());
    if (performance.now() - progressAt > STALL_MS) break;
  }
  const cpu = meter.stop();
  const seconds = (Math.max(lastDelivery, first) - first) / 1000;
  await Bun.sleep(500); // late duplicates
  let missing = 0;
  const examples: string[] = [];
  for (const s of subs)
    for (let i = 0; i < E; i++)
      if (expected[s.slot * E + i] && counts[s.slot * E + i] === 0) {
        missing++;
        if (examples.length < 3)
          examples.push(
            `s${s.num} (${s.label}, node ${(s.conn % c.nodes.length) + 1}) #${i} kind ${events[i]!.kind} published on node ${((i % P) % c.nodes.length) + 1}`,
          );
      }
  if (missing > 0) failures.add("missing delivery", `${missing} of ${due} deliveries missing, e.g. ${examples.join("; ")}`);
  if (oks < E) failures.add("publisher OK missing", `${E - oks} of ${E}`);
  await Promise.all([...pubs, ...receivers].map((x) => x.close()));
  const lat = summarize(latency);
  return {
    subs: subs.length,
    events: E,
    expected: due,
    received,
    seconds,
    deliveriesPerSec: received / seconds,
    latencyMs: { p50: lat.p50, p99: lat.p99, max: lat.max },
    cpu,
  };
}

/** Whether an ephemeral event published on node 1 reaches a subscriber on node 2 (a finding, not a failure). */
async function ephemeralAcross(c: Cluster): Promise<boolean | undefined> {
  if (c.nodes.length < 2) return undefined;
  const w = makeWorkload("mixed", 200, 1, 1, 7).events.find((e) => e.kind === 20001);
  if (!w) return undefined;
  const sub = await Conn.connect(c.nodes[1]!.url, "eph-sub");
  const pub = await Conn.connect(c.nodes[0]!.url, "eph-pub");
  let got = false;
  let eose = false;
  sub.onFrame = (f) => (f[0] === "EOSE" ? (eose = true) : f[0] === "EVENT" && (f[2] as NostrEvent).id === w.id && (got = true));
  sub.send(JSON.stringify(["REQ", "eph", { kinds: [20001] }]));
  for (let t = 0; !eose && t < 100; t++) await Bun.sleep(20);
  pub.send(JSON.stringify(["EVENT", w]));
  for (let t = 0; !got && t < 100; t++) await Bun.sleep(20);
  await Promise.all([sub.close(), pub.close()]);
  return got;
}

// ---------------------------------------------------------------- main

const fmt = (x: number, d = 0) =>
  Number.isFinite(x) ? x.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d }) : "—";

async function main(): Promise<number> {
  let opts: Options;
  try {
    opts = options(process.argv.slice(2));
  } catch (err) {
    console.error(`error: ${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const hard = setTimeout(() => {
    console.error(`[cluster] FAIL: timed out after ${opts.timeoutSec} s`);
    process.exit(1);
  }, opts.timeoutSec * 1000);
  hard.unref();
  log(
    `bun ${Bun.version}, ${availableParallelism()} cores, load ${load()}; postgres ${new URL(PG_URL).host}; signatures ${opts.verify ? "verified" : "not verified"}`,
  );
  const corpus = loadCorpus(opts.events, log);
  const oracle = new Oracle({ keepEvents: false });
  for (let i = 0; i < corpus.size; i++) {
    const head = lineHead(corpus.lines[i]!);
    oracle.addMeta(head && !isAddressableKind(head.kind) ? head : metaOf(corpus.event(i)));
  }
  const work = fanoutWorkload(opts);
  log(
    `corpus ${corpus.size} events (the oracle keeps ${oracle.size}); fanout: ${work.subs.length} subscriptions, ${work.events.length} events`,
  );
  const redis = opts.redis ? undefined : await startRedis();
  const busUrl = opts.redis ?? redis!.url;
  const failures = new Failures();
  const results: { nodes: number; load: string; ingest: IngestResult; fanout: FanoutResult; ephemeralAcross?: boolean }[] = [];
  try {
    for (const n of opts.nodes) {
      // A fresh database per phase, so the fanout phase does not pay for the ingested rows' indexes.
      log(`${n} node(s): ingest (load ${load()})`);
      let c = await startCluster(n, opts, busUrl, `${n}i`);
      let ing: IngestResult;
      try {
        ing = await ingest(c, corpus, oracle, opts, redis?.pid, failures);
      } finally {
        await stopCluster(c, failures);
      }
      log(`${n} node(s): ingest ${fmt(ing.eventsPerSec)} ev/s; fanout (load ${load()})`);
      c = await startCluster(n, opts, busUrl, `${n}f`);
      let fan: FanoutResult;
      let eph: boolean | undefined;
      try {
        fan = await fanout(c, work, opts, redis?.pid, failures);
        eph = await ephemeralAcross(c);
      } finally {
        await stopCluster(c, failures);
      }
      log(`${n} node(s): fanout ${fmt(fan.deliveriesPerSec)} deliveries/s`);
      results.push({ nodes: n, load: load(), ingest: ing, fanout: fan, ephemeralAcross: eph });
    }
  } finally {
    await redis?.stop();
  }

  const col = (f: (r: (typeof results)[number]) => string) => results.map(f).join(" | ");
  console.log(
    `\nbunstr cluster on Postgres (${new Date().toISOString().slice(0, 16)}Z, bun ${Bun.version}, ${availableParallelism()} cores shared by relays, Postgres, Redis and this client; signatures ${opts.verify ? "verified" : "not verified"})`,
  );
  console.log(`| | ${col((r) => `${r.nodes} node${r.nodes > 1 ? "s" : ""}`)} |`);
  console.log(`|---|${col(() => "---:")}|`);
  console.log(`| load average (1 min) after the run | ${col((r) => r.load.split(" ")[0]!)} |`);
  console.log(`| ingest: events (OK true + older refused) | ${col((r) => `${fmt(r.ingest.okTrue)} + ${fmt(r.ingest.refusedOlder)}`)} |`);
  console.log(`| ingest: events/s (${opts.conns} conns, window ${opts.window}) | ${col((r) => fmt(r.ingest.eventsPerSec))} |`);
  console.log(
    `| ingest: EVENT -> OK p50 / p99 ms | ${col((r) => `${fmt(r.ingest.latencyMs.p50, 1)} / ${fmt(r.ingest.latencyMs.p99, 1)}`)} |`,
  );
  console.log(
    `| ingest: CPU-s per 1k events relays / postgres / redis | ${col((r) => `${fmt((r.ingest.cpu.relays / r.ingest.events) * 1000, 3)} / ${fmt((r.ingest.cpu.postgres / r.ingest.events) * 1000, 3)} / ${fmt((r.ingest.cpu.redis / r.ingest.events) * 1000, 3)}`)} |`,
  );
  console.log(`| fanout: deliveries (${work.subs.length} subs, ${work.events.length} events) | ${col((r) => fmt(r.fanout.received))} |`);
  console.log(`| fanout: deliveries/s | ${col((r) => fmt(r.fanout.deliveriesPerSec))} |`);
  console.log(
    `| fanout: EVENT sent -> delivery p50 / p99 ms | ${col((r) => `${fmt(r.fanout.latencyMs.p50, 1)} / ${fmt(r.fanout.latencyMs.p99, 1)}`)} |`,
  );
  console.log(
    `| fanout: CPU-s relays / postgres / redis / client | ${col((r) => `${fmt(r.fanout.cpu.relays, 1)} / ${fmt(r.fanout.cpu.postgres, 1)} / ${fmt(r.fanout.cpu.redis, 2)} / ${fmt(r.fanout.cpu.client, 1)}`)} |`,
  );
  console.log(
    `| ephemeral event from node 1 reaches node 2 | ${col((r) => (r.ephemeralAcross === undefined ? "—" : r.ephemeralAcross ? "yes" : "no"))} |`,
  );
  for (const r of results)
    if (r.ephemeralAcross === false)
      console.log(`WARN ephemeral events are not carried by the bus: a subscriber on another node never gets them`);
  for (const line of failures.lines()) console.log(`FAIL ${line}`);
  console.log(
    JSON.stringify({
      format: "cluster-1",
      at: new Date().toISOString(),
      opts: { ...opts, redis: opts.redis ?? "private" },
      results,
      failures: failures.count,
    }),
  );
  return failures.count === 0 ? 0 : 1;
}

process.exit(await main());
