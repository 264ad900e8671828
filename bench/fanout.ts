// bunstr fanout benchmark: live subscriptions, events published after EOSE, every delivery
// checked exactly against the reference matcher. See bench/scenarios/fanout.ts and the
// "Fanout" section of bench/README.md.
//
//   npx bun bench/fanout.ts [--scenario mixed|shared|both] [--subs 1000] [--conns 100] [--events N] [--no-verify]
//
// Progress goes to stderr; stdout gets one table per scenario, any WARN/FAIL lines and, last, a
// one-line JSON result. Exit status 0 = every delivery exact, 1 = a check failed (dropped,
// duplicated, extra or wrong delivery, OK false, relay exit not 0, timeout), 2 = bad arguments.
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { availableParallelism, loadavg } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { runFanout, type FanoutResult, type ScenarioName } from "./scenarios/fanout.ts";

const USAGE = `usage: npx bun bench/fanout.ts [options]
  --scenario S      mixed | shared | both (default both)
  --subs N          subscriptions (mixed) / connections holding the shared subscription (shared); default 1000
  --conns C         receiving connections for mixed (default 100; shared has one per subscription)
  --events N        events published under load (default: mixed 20000, shared 5000)
  --probe K         then K events one at a time, for the latency of an unloaded relay (default 200; 0 = none)
  --no-verify       start the relay with --no-verify (events are signed either way)
  --mock            run against a trivial in-memory relay instead of bunstr: what the client side can take
  --calibrate       before each scenario, run it against the mock relay too and show that rate as the client ceiling
  --window W        EVENTs the publisher may have without an OK (default 100)
  --lag L           deliveries due but not received yet, at most (default 100000)
  --recv-threads T  worker threads holding the receiving sockets (default 1)
  --seed S          workload seed (default 1)
  --relay-cpu-prof DIR  run the relay under bun --cpu-prof; the .cpuprofile lands in DIR
  --relay URL       measure a running relay instead (one --scenario, on an empty database each time)
  --relay-pid N     with --relay: its process id, for CPU and memory (required)
  --sorted-keys     with --relay: it sends events with their keys sorted (strfry); expect those bytes
  --timeout S       hard limit for the whole run, seconds (default 300)
  --no-save         do not write bench/out/fanout-last.json (nor rotate fanout-prev.json)`;

// Goals from the performance issue, and what strfry does on this machine (shown, not enforced).
const TARGETS = {
  mixed: { deliveriesPerSec: 75_000, cpuPer1k: 0.015, note: "strfry: 24,400/s, 0.042 CPU s/1k" },
  shared: { deliveriesPerSec: 300_000, cpuPer1k: NaN, note: "bare Bun server.publish: ~1,000,000/s" },
};

const OUT_DIR = join(import.meta.dir, "out");
const LAST = join(OUT_DIR, "fanout-last.json");
const PREV = join(OUT_DIR, "fanout-prev.json");

interface Params {
  scenarios: ScenarioName[];
  subs: number;
  conns: number;
  events: { mixed: number; shared: number };
  probe: number;
  verify: boolean;
  mock: boolean;
  calibrate: boolean;
  window: number;
  lag: number;
  recvThreads: number;
  seed: number;
  /** "spawned" (bunstr, or the mock), or the URL given with --relay. */
  relay?: string;
  sortedKeys?: boolean;
}

interface RunRecord {
  format: "fanout-1";
  at: string;
  params: Params;
  machine: { cpus: number; bun: string; platform: string; loadAvg: number };
  results: Partial<Record<ScenarioName, FanoutResult>>;
  ok: boolean;
  failures: string[];
  warnings: string[];
}

class UsageError extends Error {}

function parseOptions(argv: string[]): Params & { timeoutSec: number; save: boolean; cpuProfDir?: string; relayPid?: number } {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      scenario: { type: "string", default: "both" },
      subs: { type: "string", default: "1000" },
      conns: { type: "string", default: "100" },
      events: { type: "string" },
      probe: { type: "string", default: "200" },
      "no-verify": { type: "boolean", default: false },
      mock: { type: "boolean", default: false },
      calibrate: { type: "boolean", default: false },
      window: { type: "string", default: "100" },
      lag: { type: "string", default: "100000" },
      "recv-threads": { type: "string", default: "1" },
      seed: { type: "string", default: "1" },
      "relay-cpu-prof": { type: "string" },
      relay: { type: "string" },
      "relay-pid": { type: "string" },
      "sorted-keys": { type: "boolean", default: false },
      timeout: { type: "string", default: "300" },
      "no-save": { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const int = (name: string, v: string, max: number) => {
    const n = Number(v);
    if (!/^\d+$/.test(v) || n < 1 || n > max)
      throw new UsageError(`--${name} must be an integer from 1 to ${max}, got ${JSON.stringify(v)}`);
    return n;
  };
  const scenarios: ScenarioName[] =
    values.scenario === "both" ? ["mixed", "shared"] : values.scenario === "mixed" || values.scenario === "shared" ? [values.scenario] : [];
  if (!scenarios.length) throw new UsageError(`--scenario must be mixed, shared or both, got ${JSON.stringify(values.scenario)}`);
  const subs = int("subs", values.subs, 20_000);
  const conns = int("conns", values.conns, 20_000);
  if (conns > subs)
    throw new UsageError(`--conns (${conns}) cannot exceed --subs (${subs}): every connection holds at least one subscription`);
  if (values.relay !== undefined) {
    if (!/^wss?:\/\//.test(values.relay)) throw new UsageError("--relay must be a ws:// or wss:// URL");
    if (values["relay-pid"] === undefined) throw new UsageError("--relay needs --relay-pid (CPU and memory are read from /proc)");
    if (scenarios.length !== 1) throw new UsageError("--relay needs one --scenario (mixed or shared), each on a fresh database");
    if (values.mock || values.calibrate || values["relay-cpu-prof"])
      throw new UsageError("--relay excludes --mock, --calibrate and --relay-cpu-prof");
  } else if (values["relay-pid"] !== undefined || values["sorted-keys"]) throw new UsageError("--relay-pid and --sorted-keys need --relay");
  const relayPid = values["relay-pid"] === undefined ? undefined : int("relay-pid", values["relay-pid"], 2 ** 22);
  if (relayPid !== undefined && !existsSync(`/proc/${relayPid}/stat`)) throw new UsageError(`--relay-pid ${relayPid}: no such process`);
  const events = values.events === undefined ? undefined : int("events", values.events, 1_000_000);
  return {
    scenarios,
    subs,
    conns,
    events: { mixed: events ?? 20_000, shared: events ?? 5_000 },
    probe: values.probe === "0" ? 0 : int("probe", values.probe, 100_000),
    verify: !values["no-verify"],
    mock: values.mock,
    calibrate: values.calibrate && !values.mock,
    window: int("window", values.window, 1000),
    lag: int("lag", values.lag, 100_000_000),
    recvThreads: int("recv-threads", values["recv-threads"], 64),
    seed: int("seed", values.seed, 2 ** 31),
    timeoutSec: int("timeout", values.timeout, 86_400),
    cpuProfDir: values["relay-cpu-prof"],
    relay: values.relay ?? "spawned",
    sortedKeys: values["sorted-keys"],
    relayPid,
    save: !values["no-save"],
  };
}

const t0 = performance.now();
const log = (m: string) => console.error(`[fanout] ${((performance.now() - t0) / 1000).toFixed(1)} s: ${m}`);

async function main(): Promise<number> {
  let opts: ReturnType<typeof parseOptions>;
  try {
    opts = parseOptions(process.argv.slice(2));
  } catch (err) {
    console.error(`error: ${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const loadAvg = Number(loadavg()[0]!.toFixed(2));
  const warnings: string[] = [];
  if (loadAvg > 0.5) warnings.push(`load average was ${loadAvg} before the run: other work on this machine skews the numbers`);
  const hardStop = setTimeout(() => {
    console.error(`timeout: the run took longer than ${opts.timeoutSec} s`);
    process.exit(1); // the exit hooks kill the relay and remove its temp directory
  }, opts.timeoutSec * 1000);
  for (const sig of ["SIGINT", "SIGTERM"] as const) process.on(sig, () => process.exit(130));

  const { timeoutSec: _t, save, cpuProfDir, relayPid, ...params } = opts;
  const record: RunRecord = {
    format: "fanout-1",
    at: new Date().toISOString(),
    params,
    machine: { cpus: availableParallelism(), bun: Bun.version, platform: `${process.platform}-${process.arch}`, loadAvg },
    results: {},
    ok: true,
    failures: [],
    warnings,
  };
  for (const scenario of opts.scenarios) {
    const run = (mock: boolean) =>
      runFanout({
        scenario,
        subs: opts.subs,
        conns: scenario === "mixed" ? opts.conns : opts.subs,
        events: opts.events[scenario],
        probe: opts.probe,
        verify: opts.verify,
        mock,
        window: opts.window,
        lag: opts.lag,
        recvThreads: opts.recvThreads,
        stallMs: 20_000,
        cpuProfDir: cpuProfDir && !mock ? join(cpuProfDir, scenario) : undefined,
        external: params.relay !== "spawned" && relayPid !== undefined && !mock ? { url: params.relay!, pid: relayPid } : undefined,
        sortedKeys: params.sortedKeys,
        seed: opts.seed,
        log,
      });
    try {
      let ceiling: FanoutResult | undefined;
      if (opts.calibrate) {
        log(`${scenario}: calibration against the mock relay`);
        ceiling = await run(true);
        if (ceiling.failures.length) record.failures.push(...ceiling.failures.map((f) => `${scenario} (mock): ${f}`));
      }
      const r = await run(opts.mock);
      if (ceiling)
        r.clientCeiling = {
          deliveriesPerSec: ceiling.deliveriesPerSec,
          mockCpuSec: ceiling.relay.cpuSec,
          generatorCpuSec: ceiling.generator.cpuSec,
          latencyP50Ms: ceiling.latencyMs.p50,
        };
      record.results[scenario] = round(r);
      record.failures.push(...r.failures.map((f) => `${scenario}: ${f}`));
      record.warnings.push(...r.warnings.map((w) => `${scenario}: ${w}`));
    } catch (err) {
      record.failures.push(`${scenario}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    }
  }
  clearTimeout(hardStop);
  record.ok = record.failures.length === 0;
  return report(record, save);
}

/** Rounds every number in a result for storage and display. */
function round(r: FanoutResult): FanoutResult {
  const walk = (v: unknown): unknown => {
    if (typeof v === "number") return Number.isInteger(v) || !Number.isFinite(v) ? v : Number(v.toPrecision(4));
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  return walk(r) as FanoutResult;
}

type Better = "higher" | "lower" | "none";
interface Row {
  label: string;
  get: (r: FanoutResult) => (number | undefined)[];
  better: Better;
  text?: (r: FanoutResult) => string;
}

const int = (x: number) => Math.round(x).toLocaleString("en-US");
const rows = (s: ScenarioName): Row[] => [
  {
    label: "subscriptions / connections / topics",
    get: (r) => [r.subs],
    better: "none",
    text: (r) => `${int(r.subs)} / ${int(r.conns)} / ${int(r.topics)} (${int(r.filters)} filters)`,
  },
  {
    label: "events / deliveries expected",
    get: (r) => [r.expectedDeliveries],
    better: "none",
    text: (r) =>
      `${int(r.events)}${r.ephemeral ? ` (${int(r.ephemeral)} ephemeral)` : ""} / ${int(r.expectedDeliveries)}` +
      (r.probeEvents ? ` (+ probe ${int(r.probeEvents)} / ${int(r.probeDeliveries)})` : ""),
  },
  {
    label: "deliveries per event (avg)",
    get: (r) => [r.deliveriesPerEvent],
    better: "none",
    text: (r) => `${r.deliveriesPerEvent}${r.eventsMatchingNothing ? ` (${int(r.eventsMatchingNothing)} events match nothing)` : ""}`,
  },
  {
    label: "received ok / dropped / dup / extra / wrong",
    get: (r) => [r.received.ok],
    better: "none",
    text: (r) => `${int(r.received.ok)} / ${r.received.dropped} / ${r.received.duplicated} / ${r.received.extra} / ${r.received.wrong}`,
  },
  {
    label: "deliveries/s",
    get: (r) => [r.deliveriesPerSec],
    better: "higher",
    text: (r) =>
      `${int(r.deliveriesPerSec)} (target >= ${int(TARGETS[s].deliveriesPerSec)}: ${r.deliveriesPerSec >= TARGETS[s].deliveriesPerSec ? "met" : "MISSED"})`,
  },
  {
    label: "client ceiling (mock relay) deliveries/s",
    get: (r) => [r.clientCeiling?.deliveriesPerSec],
    better: "none",
    text: (r) =>
      r.clientCeiling
        ? `${int(r.clientCeiling.deliveriesPerSec)} (mock CPU ${r.clientCeiling.mockCpuSec} s, load generator ${r.clientCeiling.generatorCpuSec} s)`
        : "- (run with --calibrate)",
  },
  { label: "events/s", get: (r) => [r.eventsPerSec], better: "higher" },
  { label: "latency under load p50 / p99 ms", get: (r) => [r.latencyMs.p50, r.latencyMs.p99], better: "lower" },
  { label: "latency one at a time p50 / p99 ms", get: (r) => [r.probeLatencyMs.p50, r.probeLatencyMs.p99], better: "lower" },
  {
    label: "relay CPU s / 1k deliveries",
    get: (r) => [r.relay.cpuPer1kDeliveries],
    better: "lower",
    text: (r) =>
      `${r.relay.cpuPer1kDeliveries}` +
      (Number.isFinite(TARGETS[s].cpuPer1k)
        ? ` (target <= ${TARGETS[s].cpuPer1k}: ${r.relay.cpuPer1kDeliveries <= TARGETS[s].cpuPer1k ? "met" : "MISSED"})`
        : ""),
  },
  { label: "relay CPU ms / event", get: (r) => [r.relay.cpuPerEventMs], better: "lower" },
  {
    label: "relay CPU s: all / kernel / main thread",
    get: (r) => [r.relay.cpuSec, r.relay.sysSec, r.relay.mainThreadSec],
    better: "none",
    text: (r) => `${r.relay.cpuSec} / ${r.relay.sysSec} / ${r.relay.mainThreadSec} (${r.relay.cores} cores busy)`,
  },
  { label: "relay RSS end / peak MiB", get: (r) => [r.relay.rssMiB, r.relay.peakRssMiB], better: "lower" },
  {
    label: "load generator CPU s: all / kernel / receivers",
    get: (r) => [r.generator.cpuSec, r.generator.sysSec, r.generator.receiverSec],
    better: "none",
    text: (r) => `${r.generator.cpuSec} / ${r.generator.sysSec} / ${r.generator.receiverSec} (${r.generator.cores} cores busy)`,
  },
  { label: "fanout phase s", get: (r) => [r.seconds], better: "none" },
];

// null: a NaN that went through JSON (fanout-prev.json).
const fmt = (x: number | null | undefined): string => (x == null || Number.isNaN(x) ? "-" : String(x));

function delta(now: number | null | undefined, before: number | null | undefined, better: Better): string {
  if (now == null || before == null || !Number.isFinite(now) || !Number.isFinite(before) || before === 0) return "-";
  const pct = ((now - before) / Math.abs(before)) * 100;
  const mark = better === "none" || Math.abs(pct) < 5 ? "" : pct > 0 === (better === "higher") ? " (better)" : " (worse)";
  return `${pct > 0 ? "+" : ""}${pct.toFixed(1)}%${mark}`;
}

function table(s: ScenarioName, r: FanoutResult, prev?: FanoutResult): string {
  const head = ["metric", "value", ...(prev ? ["prev", "delta"] : [])];
  const body = rows(s).map((row) => {
    const now = row.get(r);
    const cells = [row.label, row.text ? row.text(r) : now.map(fmt).join(" / ")];
    if (prev) {
      const before = row.get(prev);
      cells.push(row.text ? row.text(prev) : before.map(fmt).join(" / "));
      cells.push(row.better === "none" ? "" : now.map((x, i) => delta(x, before[i], row.better)).join(" / "));
    }
    return cells;
  });
  const widths = head.map((_, c) => Math.max(head[c]!.length, ...body.map((b) => b[c]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((x, c) => x.padEnd(widths[c]!))
      .join("  ")
      .trimEnd();
  return [line(head), line(widths.map((w) => "-".repeat(w))), ...body.map(line)].join("\n");
}

/** Keys of the parameters that shape a scenario's numbers. */
function paramDiff(s: ScenarioName, a: RunRecord, b: RunRecord): string[] {
  const ra = a.results[s]!;
  const rb = b.results[s]!;
  const pick = (r: RunRecord, x: FanoutResult) => ({
    target: x.target,
    verify: x.verify,
    subs: x.subs,
    conns: x.conns,
    events: x.events,
    probe: x.probeEvents,
    window: x.window,
    lag: x.lag,
    recvThreads: x.generator.recvThreads,
    seed: r.params.seed,
  });
  const pa = pick(a, ra);
  const pb = pick(b, rb);
  return (Object.keys(pa) as (keyof typeof pa)[]).filter((k) => pa[k] !== pb[k]).map((k) => `${k} ${pb[k]} -> ${pa[k]}`);
}

function loadPrev(): RunRecord | undefined {
  try {
    const prev = JSON.parse(readFileSync(PREV, "utf8")) as RunRecord;
    return prev.format === "fanout-1" ? prev : undefined;
  } catch {
    return undefined;
  }
}

function report(record: RunRecord, save: boolean): number {
  let prev: RunRecord | undefined;
  if (record.ok && save) {
    mkdirSync(OUT_DIR, { recursive: true });
    if (existsSync(LAST)) renameSync(LAST, PREV);
    writeFileSync(LAST, JSON.stringify(record, null, 2) + "\n");
    prev = loadPrev();
  }
  const p = record.params;
  console.log(
    `\nbunstr fanout: ${p.mock ? "MOCK relay (client capacity)" : p.relay && p.relay !== "spawned" ? `external relay ${p.relay}${p.sortedKeys ? " (events expected with sorted keys)" : ""}` : `relay signature checks ${p.verify ? "on" : "off (--no-verify)"}`}, ` +
      `publisher window ${p.window} EVENTs, lag ${p.lag} deliveries, ${p.recvThreads} receiver thread(s); ` +
      `${record.machine.cpus} cores shared by relay and load generator (load average ${record.machine.loadAvg} at start)`,
  );
  if (prev) console.log(`compared with the previous run of ${prev.at} (${PREV})`);
  for (const s of p.scenarios) {
    const r = record.results[s];
    if (!r) continue;
    const before = prev?.results[s];
    console.log(`\n== ${s} (${TARGETS[s].note})`);
    if (before) {
      const diff = paramDiff(s, record, prev!);
      if (diff.length) console.log(`note: parameters differ (${diff.join(", ")}): deltas are not like for like`);
    }
    console.log(table(s, r, before));
  }
  for (const w of record.warnings) console.log(`\nWARN ${w}`);
  if (!record.ok) {
    console.log("");
    for (const f of record.failures) console.log(`FAIL ${f}`);
    console.log(`\nFAILED: ${record.failures.length} failure line(s); results not saved`);
  } else if (save) console.log(`\nsaved ${LAST}`);
  console.log(JSON.stringify(record));
  return record.ok ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
