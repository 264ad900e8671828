// bunstr local load check: ingest the deterministic corpus over C pipelined connections, then
// run a checked REQ mix, and report throughput, latency, relay CPU and memory.
//
//   npx bun bench/load.ts [--events 20000] [--conns 8] [--reqs 2000] [--no-verify] [--relay ws://...]
//
// Progress goes to stderr; stdout gets the table and, last, a one-line JSON result. Exit status
// 0 = all checks passed, 1 = a check failed (lost/false/double OK, wrong REQ answer, relay exit
// not 0, timeout), 2 = bad arguments. See bench/README.md.
import { availableParallelism, loadavg } from "node:os";
import { parseArgs } from "node:util";
import { loadCorpus } from "./corpus.ts";
import { cpuSeconds, memoryMiB, RelayProcess } from "./lib/relay.ts";
import { LAST, paramDiff, PREV, saveResult, table, tidy, type BenchParams, type BenchResult, type RelayStats } from "./lib/report.ts";
import { IngestRun } from "./scenarios/ingest.ts";
import { QueryRun } from "./scenarios/query.ts";

const USAGE = `usage: npx bun bench/load.ts [options]
  --events N          corpus size (default 20000)
  --conns C           ingest connections (default 8)
  --window W          unacknowledged EVENTs per ingest connection (default 500)
  --reqs R            REQs in the query phase (default 2000)
  --query-conns Q     query connections (default 4)
  --query-inflight K  REQs in flight per query connection (default 4)
  --no-verify         start the relay with --no-verify
  --relay URL         use a running relay instead of spawning one (no CPU/RSS numbers)
  --timeout S         hard limit for the whole run, seconds (default 600)
  --no-save           do not write bench/out/last.json or rotate prev.json`;

interface Options extends Omit<BenchParams, "verify" | "relay"> {
  verify: boolean;
  relayUrl?: string;
  timeoutSec: number;
  save: boolean;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      events: { type: "string", default: "20000" },
      conns: { type: "string", default: "8" },
      window: { type: "string", default: "500" },
      reqs: { type: "string", default: "2000" },
      "query-conns": { type: "string", default: "4" },
      "query-inflight": { type: "string", default: "4" },
      "no-verify": { type: "boolean", default: false },
      relay: { type: "string" },
      timeout: { type: "string", default: "600" },
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
    if (!/^\d+$/.test(v) || n < 1 || n > max) throw new UsageError(`--${name} must be an integer from 1 to ${max}, got ${JSON.stringify(v)}`);
    return n;
  };
  if (values.relay !== undefined && !/^wss?:\/\//.test(values.relay)) throw new UsageError(`--relay must be a ws:// or wss:// URL`);
  return {
    events: int("events", values.events, 10_000_000),
    conns: int("conns", values.conns, 1000),
    window: int("window", values.window, 100_000),
    reqs: int("reqs", values.reqs, 10_000_000),
    queryConns: int("query-conns", values["query-conns"], 1000),
    queryInflight: int("query-inflight", values["query-inflight"], 1000),
    verify: !values["no-verify"],
    relayUrl: values.relay,
    timeoutSec: int("timeout", values.timeout, 86_400),
    save: !values["no-save"],
  };
}

class UsageError extends Error {}

const log = (msg: string) => console.error(`[bench] ${msg}`);
const STALL_MS = 30_000;

async function main(): Promise<number> {
  let opts: Options;
  try {
    opts = parseOptions(process.argv.slice(2));
  } catch (err) {
    console.error(`error: ${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (opts.relayUrl && !opts.verify) log("warning: --no-verify has no effect with --relay (it is the relay's own setting)");

  // Anything else running on the box skews every number: record how busy it was before we started.
  const loadAvgAtStart = Number(loadavg()[0]!.toFixed(2));
  const warnings: string[] = [];
  if (loadAvgAtStart > 0.5) {
    warnings.push(`load average was ${loadAvgAtStart} before the run: other work on this machine skews the numbers`);
    log(`warning: ${warnings[0]}`);
  }
  const corpus = loadCorpus(opts.events, log);
  log(`corpus: ${corpus.events.length} events ${corpus.generated ? "signed" : "loaded"} in ${corpus.seconds.toFixed(1)}s (${corpus.path})`);

  let relay: RelayProcess | undefined;
  // Abnormal exits (timeout, signal, crash) must not leave a relay or its temp directory behind.
  const killRelay = () => {
    relay?.kill();
    relay?.removeDataDir();
  };
  process.on("exit", killRelay);
  for (const sig of ["SIGINT", "SIGTERM"] as const)
    process.on(sig, () => {
      log(`${sig}: stopping`);
      killRelay();
      process.exit(130);
    });
  const hardStop = setTimeout(() => {
    log(`timeout: the run took longer than ${opts.timeoutSec}s`);
    killRelay();
    process.exit(1);
  }, opts.timeoutSec * 1000);

  if (!opts.relayUrl) {
    relay = await RelayProcess.spawn({ verify: opts.verify });
    log(`relay: pid ${relay.pid} at ${relay.url} (data ${relay.dataDir}, verify ${opts.verify ? "on" : "off"})`);
  }
  const url = opts.relayUrl ?? relay!.url;
  const failures: string[] = [];
  let ingestRun: IngestRun | undefined;
  let queryRun: QueryRun | undefined;
  try {
    const pid = relay?.pid;
    const cpu0 = pid ? cpuSeconds(pid) : 0;
    const gen0 = process.cpuUsage();

    log(`ingest: ${opts.events} events over ${opts.conns} connections, window ${opts.window}`);
    ingestRun = new IngestRun({ url, corpus, conns: opts.conns, window: opts.window, stallMs: STALL_MS });
    const ingest = await ingestRun.run();
    const cpu1 = pid ? cpuSeconds(pid) : 0;
    log(`ingest: ${ingest.okTrue}/${ingest.events} OK true in ${ingest.seconds.toFixed(2)}s`);
    if (relay && !relay.running) throw new Error(`relay exited during ingest (code ${relay.proc.exitCode}, signal ${relay.proc.signalCode}):\n${relay.stderr.text}`);

    // Exact answers can be demanded only if the relay holds exactly the corpus.
    const allStored = ingest.okTrue === ingest.events;
    const exact = !!relay && allStored && ingest.duplicates === 0;
    log(`query: ${opts.reqs} REQs over ${opts.queryConns} connections x ${opts.queryInflight} in flight (${exact ? "exact" : "match-only"} checks)`);
    queryRun = new QueryRun({ url, corpus, reqs: opts.reqs, conns: opts.queryConns, inflight: opts.queryInflight, exact, allStored, seed: 1, timeoutMs: STALL_MS });
    const query = await queryRun.run();
    const cpu2 = pid ? cpuSeconds(pid) : 0;
    const mem = pid ? memoryMiB(pid) : undefined;
    const gen = process.cpuUsage(gen0);
    log(`query: ${query.reqs} REQs in ${query.seconds.toFixed(2)}s`);

    await ingestRun.close(); // closed only now, so an OK arriving twice, however late, is caught
    await queryRun.close();
    failures.push(...ingestRun.failures.lines(), ...queryRun.failures.lines());

    let relayStats: RelayStats | null = null;
    if (relay) {
      const exitCode = await relay.stop();
      log(`relay: stopped with exit code ${exitCode}`);
      if (exitCode !== 0) failures.push(`relay exit code ${exitCode === null ? "none (killed after 15 s without exiting)" : exitCode} after SIGTERM, expected 0`);
      const data = relay.dataBytes();
      if (data.wal > 0) warnings.push(`relay left a ${(data.wal / 1024 / 1024).toFixed(1)} MiB write-ahead log after a clean shutdown (its checkpoint on exit did not complete)`);
      const stderr = relay.stderr.text.trim();
      if (stderr) warnings.push(`relay stderr: ${stderr.slice(-2000)}`);
      relayStats = {
        cpuSecIngest: cpu1 - cpu0,
        cpuSecQuery: cpu2 - cpu1,
        cpuPer1kEvents: ((cpu1 - cpu0) / ingest.events) * 1000,
        cpuPer1kReqs: query.reqs ? ((cpu2 - cpu1) / query.reqs) * 1000 : NaN,
        rssMiB: mem!.rss,
        peakRssMiB: mem!.peak,
        dataMiB: data.total / 1024 / 1024,
        walMiB: data.wal / 1024 / 1024,
        exitCode,
      };
    }

    const result = tidy({
      format: 1,
      at: new Date().toISOString(),
      params: {
        events: opts.events,
        conns: opts.conns,
        window: opts.window,
        reqs: opts.reqs,
        queryConns: opts.queryConns,
        queryInflight: opts.queryInflight,
        verify: relay ? opts.verify : null,
        relay: opts.relayUrl ?? "spawned",
      },
      machine: { cpus: availableParallelism(), bun: Bun.version, platform: `${process.platform}-${process.arch}`, loadAvg: loadAvgAtStart },
      ingest,
      query,
      relay: relayStats,
      generatorCpuSec: (gen.user + gen.system) / 1e6,
      ok: failures.length === 0,
      failures,
      warnings,
    });
    return report(result, opts);
  } catch (err) {
    failures.push(...(ingestRun?.failures.lines() ?? []), ...(queryRun?.failures.lines() ?? []));
    for (const f of failures) console.error(`FAIL ${f}`);
    console.error(`error: ${err instanceof Error ? err.message : String(err)}`);
    if (relay?.running) await relay.stop();
    return 1;
  } finally {
    clearTimeout(hardStop);
    relay?.removeDataDir();
  }
}

function report(result: BenchResult, opts: Options): number {
  const p = result.params;
  let prev: BenchResult | undefined;
  if (result.ok && opts.save) prev = saveResult(result);
  console.log(
    `\nbunstr load check: ${p.events} events over ${p.conns} conns (window ${p.window}), ${p.reqs} REQs over ${p.queryConns} conns x ${p.queryInflight}, ` +
      `signature checks ${p.verify === null ? "as the external relay is configured" : p.verify ? "on" : "off (--no-verify)"}, ` +
      `${result.machine.cpus} cores shared with the load generator (load average ${result.machine.loadAvg} at start)`,
  );
  if (prev) {
    console.log(`compared with the previous run of ${prev.at} (${PREV})`);
    const diff = paramDiff(p, prev.params);
    if (diff.length) console.log(`note: parameters differ (${diff.join(", ")}): deltas are not like for like`);
  }
  console.log("");
  console.log(table(result, prev));
  for (const w of result.warnings) console.log(`\nWARN ${w}`);
  if (!result.ok) {
    console.log("");
    for (const f of result.failures) console.log(`FAIL ${f}`);
    console.log(`\nFAILED: ${result.failures.length} kind(s) of failure; results not saved`);
  } else if (opts.save) console.log(`\nsaved ${LAST}`);
  console.log(JSON.stringify(result));
  return result.ok ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
