// bunstr load check: ingest the deterministic corpus (bench/corpus.ts, 200,000 events by default)
// over C pipelined connections, then run a checked REQ mix, and report throughput, latency, relay
// CPU, memory and database size. Every answer is compared with an in-memory oracle.
//
//   npx bun bench/load.ts [--events 200000] [--conns 8] [--reqs 2000] [--per-type 300] [--no-verify] [--relay ws://...]
//
// Progress goes to stderr; stdout gets the table and, last, a one-line JSON result. Exit status
// 0 = all checks passed, 1 = a check failed (lost/false/double OK, wrong REQ answer, relay exit
// not 0, timeout), 2 = bad arguments. See bench/README.md.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { DEFAULT_EVENTS, lineHead, loadCorpus } from "./corpus.ts";
import { dbParts } from "./lib/dbsize.ts";
import { isAddressableKind, metaOf, Oracle } from "./lib/oracle.ts";
import { cpuSeconds, dirBytes, threadCpuSeconds, memoryMiB, PeakRss, RATE_LIMITS_OFF, RelayProcess, type PeakMiB } from "./lib/relay.ts";
import { LAST, paramDiff, PREV, saveResult, table, tidy, type BenchParams, type BenchResult, type RelayStats } from "./lib/report.ts";
import { IngestRun } from "./scenarios/ingest.ts";
import { MIX_NAMES, QueryRun, type MixName } from "./scenarios/query.ts";

const USAGE = `usage: npx bun bench/load.ts [options]
  --events N          corpus size (default ${DEFAULT_EVENTS})
  --conns C           ingest connections (default 8)
  --window W          unacknowledged EVENTs per ingest connection (default 500)
  --copies K          send each event K times, on K connections at about the same time: a
                      duplicate-heavy mix (clients publishing the same events, mirrors); one copy
                      stores it, the others get "duplicate:" (default 1; at most --conns)
  --ingest-window E   report ingest events/s per E acknowledged events (default 100000)
  --reqs R            REQs in the query mix (default 2000; 0 = ingest only)
  --warm-reqs N       before the mix, N other REQs of it (checked, not counted): the steady state
                      of a relay that has served a while, not its first seconds (default 0)
  --check-after       check each phase's answers when it ends, not as they arrive (the same checks,
                      off the timed window: the generator takes less of the shared cores meanwhile)
  --per-type P        REQs of each query type alone after the mix (default 300; 0 = none)
  --query-conns Q     query connections (default 4)
  --query-inflight K  REQs in flight per query connection (default 4)
  --no-verify         start the relay with --no-verify
  --relay URL         use a running relay instead of spawning one (no CPU/RSS numbers, looser checks)
  --relay-pid N       with --relay: its process id, for CPU and RSS numbers (from /proc/N)
  --relay-data DIR    with --relay: its data directory, for database bytes per event
  --relay-fresh       with --relay: it was started on an empty database, so answers are checked exactly
  --loose-ties        accept answers that differ from the oracle only in the order (or the cut at the
                      limit) of events with the same created_at; counted, not failed (strfry orders
                      ties by arrival, NIP-01 by lowest id)
  --mix NAME          REQ shapes: app (default) or issue15 (one filter per REQ: see bench/README.md)
  --timeout S         hard limit for the whole run, seconds (default 900, or 3 ms per event if more)
  --no-save           do not write bench/out/last.json or rotate prev.json
  --relay-config F    TOML appended to the spawned relay's bench config (e.g. [database] reader_workers = 1)`;

interface Options extends Omit<BenchParams, "verify" | "relay" | "warmReqs" | "checkAfter"> {
  warmReqs: number;
  checkAfter: boolean;
  verify: boolean;
  relayUrl?: string;
  relayPid?: number;
  relayData?: string;
  relayFresh: boolean;
  looseTies: boolean;
  ingestWindow: number;
  /** Times each event is sent (IngestOptions.copies). */
  copies: number;
  timeoutSec: number;
  save: boolean;
  /** TOML added to the spawned relay's config (--relay-config). */
  relayConfig: string;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      events: { type: "string", default: String(DEFAULT_EVENTS) },
      conns: { type: "string", default: "8" },
      window: { type: "string", default: "500" },
      copies: { type: "string", default: "1" },
      "ingest-window": { type: "string", default: "100000" },
      reqs: { type: "string", default: "2000" },
      "warm-reqs": { type: "string", default: "0" },
      "check-after": { type: "boolean", default: false },
      "per-type": { type: "string", default: "300" },
      "query-conns": { type: "string", default: "4" },
      "query-inflight": { type: "string", default: "4" },
      "no-verify": { type: "boolean", default: false },
      relay: { type: "string" },
      "relay-pid": { type: "string" },
      "relay-data": { type: "string" },
      "relay-fresh": { type: "boolean", default: false },
      "loose-ties": { type: "boolean", default: false },
      mix: { type: "string", default: "app" },
      timeout: { type: "string" },
      "no-save": { type: "boolean", default: false },
      "relay-config": { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const int = (name: string, v: string, max: number, min = 1) => {
    const n = Number(v);
    if (!/^\d+$/.test(v) || n < min || n > max)
      throw new UsageError(`--${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(v)}`);
    return n;
  };
  if (values.relay !== undefined && !/^wss?:\/\//.test(values.relay)) throw new UsageError(`--relay must be a ws:// or wss:// URL`);
  const events = int("events", values.events, 10_000_000);
  if (values.relay === undefined && (values["relay-pid"] ?? values["relay-data"] ?? values["relay-fresh"]))
    throw new UsageError(`--relay-pid, --relay-data and --relay-fresh need --relay`);
  const relayPid = values["relay-pid"] === undefined ? undefined : int("relay-pid", values["relay-pid"], 2 ** 22);
  if (relayPid !== undefined && !existsSync(`/proc/${relayPid}/stat`)) throw new UsageError(`--relay-pid ${relayPid}: no such process`);
  if (values["relay-data"] !== undefined && !existsSync(values["relay-data"]))
    throw new UsageError(`--relay-data ${values["relay-data"]}: no such directory`);
  if (values.relay !== undefined && values["relay-config"] !== undefined)
    throw new UsageError(`--relay-config is for the relay the bench spawns, not --relay`);
  const relayConfig = values["relay-config"];
  if (relayConfig !== undefined && !existsSync(relayConfig)) throw new UsageError(`--relay-config ${relayConfig}: no such file`);
  if (!(MIX_NAMES as readonly string[]).includes(values.mix)) throw new UsageError(`--mix must be one of ${MIX_NAMES.join(", ")}`);
  return {
    relayPid,
    relayData: values["relay-data"],
    relayFresh: values["relay-fresh"],
    looseTies: values["loose-ties"],
    mix: values.mix as MixName,
    events,
    conns: int("conns", values.conns, 1000),
    window: int("window", values.window, 100_000),
    ingestWindow: int("ingest-window", values["ingest-window"], 10_000_000),
    copies: int("copies", values.copies, 1000),
    reqs: int("reqs", values.reqs, 10_000_000, 0),
    warmReqs: int("warm-reqs", values["warm-reqs"], 10_000_000, 0),
    checkAfter: values["check-after"],
    perType: int("per-type", values["per-type"], 10_000_000, 0),
    queryConns: int("query-conns", values["query-conns"], 1000),
    queryInflight: int("query-inflight", values["query-inflight"], 1000),
    verify: !values["no-verify"],
    relayUrl: values.relay,
    timeoutSec: values.timeout === undefined ? Math.max(900, Math.ceil(events * 0.003)) : int("timeout", values.timeout, 86_400),
    save: !values["no-save"],
    relayConfig: relayConfig === undefined ? "" : readFileSync(relayConfig, "utf8"),
  };
}

class UsageError extends Error {}

const log = (msg: string) => console.error(`[bench] ${msg}`);
const STALL_MS = 30_000;

/**
 * The relay's per-connection query budget ([limits] query_ms_per_second) is lifted: the bench's
 * few query connections stand for many clients, and a rate-limited REQ (CLOSED) would fail the run
 * depending on the machine's speed.
 */
const RELAY_CONFIG = `[limits]\nquery_ms_per_second = 1000000\n${RATE_LIMITS_OFF}`;

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
  log(`corpus: ${corpus.size} events ${corpus.generated ? "generated" : "loaded"} in ${corpus.seconds.toFixed(1)}s (${corpus.path})`);
  // The oracle keeps events only when it has to answer queries (an ingest-only 1M run just counts).
  const t0 = performance.now();
  const oracle = new Oracle({ keepEvents: opts.reqs > 0 || opts.perType > 0 });
  let corpusBytes = 0;
  for (let i = 0; i < corpus.size; i++) {
    const line = corpus.lines[i]!;
    corpusBytes += Buffer.byteLength(line);
    if (oracle.keepEvents) {
      oracle.add(corpus.event(i));
      continue;
    }
    // Counting only: what the relay keeps depends on id, pubkey, created_at, kind (and d).
    const head = lineHead(line);
    oracle.addMeta(head && !isAddressableKind(head.kind) ? head : metaOf(corpus.event(i)));
  }
  let storedBytes = 0;
  for (let i = 0; i < corpus.size; i++) if (!oracle.isGone(corpus.id(i))) storedBytes += Buffer.byteLength(corpus.lines[i]!);
  log(
    `oracle: ${oracle.size} of ${corpus.size} events stored (the rest are older versions of replaceable events), built in ${((performance.now() - t0) / 1000).toFixed(1)}s`,
  );

  let relay: RelayProcess | undefined;
  const configDir = mkdtempSync(join(tmpdir(), "bunstr-bench-config-"));
  // Abnormal exits (timeout, signal, crash) must not leave a relay or its temp directories behind.
  const cleanUp = () => {
    relay?.kill();
    relay?.removeDataDir();
    rmSync(configDir, { recursive: true, force: true });
  };
  process.on("exit", cleanUp);
  for (const sig of ["SIGINT", "SIGTERM"] as const)
    process.on(sig, () => {
      log(`${sig}: stopping`);
      cleanUp();
      process.exit(130);
    });
  const hardStop = setTimeout(() => {
    log(`timeout: the run took longer than ${opts.timeoutSec}s`);
    console.log(`FAIL timeout: the run took longer than ${opts.timeoutSec}s`);
    cleanUp();
    process.exit(1);
  }, opts.timeoutSec * 1000);

  if (!opts.relayUrl) {
    const config = join(configDir, "bunstr.toml");
    // The extra TOML first, so keys it gives outside any table stay top-level (after the
    // bench's own they would land in its [rate_limits]).
    writeFileSync(config, `${opts.relayConfig}\n${RELAY_CONFIG}`);
    relay = await RelayProcess.spawn({ verify: opts.verify, args: ["--config", config] });
    log(`relay: pid ${relay.pid} at ${relay.url} (data ${relay.dataDir}, verify ${opts.verify ? "on" : "off"})`);
  }
  const url = opts.relayUrl ?? relay!.url;
  const failures: string[] = [];
  let ingestRun: IngestRun | undefined;
  let queryRun: QueryRun | undefined;
  try {
    const pid = relay?.pid ?? opts.relayPid;
    const cpu = pid ? () => cpuSeconds(pid) : undefined;
    const cpu0 = cpu?.() ?? 0;
    const gen0 = process.cpuUsage();

    log(`ingest: ${opts.events} events over ${opts.conns} connections, window ${opts.window}`);
    ingestRun = new IngestRun({
      url,
      corpus,
      conns: opts.conns,
      window: opts.window,
      stallMs: STALL_MS,
      mayBeRefused: (i) => oracle.isGone(corpus.id(i)),
      windowEvents: opts.ingestWindow,
      copies: opts.copies,
      log,
    });
    const ingestPeak = pid ? new PeakRss(pid) : undefined;
    const ingest = await ingestRun.run();
    const cpu1 = cpu?.() ?? 0;
    const peakIngest = ingestPeak?.stop() ?? { rss: NaN, anon: NaN, file: NaN };
    log(
      `ingest: ${ingest.okTrue}/${ingest.events} OK true, ${ingest.refusedOlder} older versions refused, in ${ingest.seconds.toFixed(2)}s`,
    );
    if (relay && !relay.running)
      throw new Error(`relay exited during ingest (code ${relay.proc.exitCode}, signal ${relay.proc.signalCode}):\n${relay.stderr.text}`);

    // Exact answers can be demanded only if the relay holds exactly the corpus.
    const exact =
      (!!relay || opts.relayFresh) &&
      ingest.missing === 0 &&
      ingest.okFalse === 0 &&
      (ingest.copies > 1 ? ingestRun.failures.lines().length === 0 : ingest.duplicates === 0);
    let query = null;
    let cpu2 = cpu1;
    /** Where the counted queries start: after the warm-up, if any. */
    let cpuQuery0 = cpu1;
    let mixCpuPer1k: number | null = null;
    let peakQuery: PeakMiB | null = null;
    if (opts.reqs > 0 || opts.perType > 0) {
      log(
        `query: ${opts.reqs} REQs in the ${opts.mix} mix + ${opts.perType} per type alone, over ${opts.queryConns} connections x ${opts.queryInflight} in flight (${exact ? "exact" : "match-only"} checks${opts.looseTies ? ", created_at ties loose" : ""})`,
      );
      const queryOpts = {
        url,
        corpus,
        oracle,
        reqs: opts.reqs,
        perType: opts.perType,
        conns: opts.queryConns,
        inflight: opts.queryInflight,
        exact,
        seed: 1,
        mix: opts.mix,
        looseTies: opts.looseTies,
        timeoutMs: STALL_MS,
        checkAfter: opts.checkAfter,
        cpu,
        threads: pid ? () => threadCpuSeconds(pid) : undefined,
        log,
      };
      queryRun = new QueryRun(queryOpts);
      const queryPeak = pid ? new PeakRss(pid) : undefined;
      if (opts.warmReqs > 0) {
        // Other REQs of the same mix first (seed 2), checked the same way and not counted: what a
        // relay that has been serving for a while spends (its JIT and caches warm), not its first seconds.
        log(`query: ${opts.warmReqs} REQs to warm up, not counted`);
        const warm = new QueryRun({ ...queryOpts, reqs: opts.warmReqs, perType: 0, seed: 2, cpu: undefined });
        const w = await warm.run();
        await warm.close();
        failures.push(...warm.failures.lines());
        if (w.tieOnly > 0) warnings.push(`${w.tieOnly} warm-up answers differed from the oracle only in created_at ties (--loose-ties)`);
        cpuQuery0 = cpu?.() ?? 0;
      }
      query = await queryRun.run();
      cpu2 = cpu?.() ?? 0;
      peakQuery = queryPeak?.stop() ?? null;
      mixCpuPer1k = query.mix.cpuPer1kReqs;
      if (query.tieOnly > 0)
        warnings.push(
          `${query.tieOnly} answers differed from the oracle only in the order or the cut of events with the same created_at (--loose-ties)`,
        );
    }
    const mem = pid ? memoryMiB(pid) : undefined;
    const gen = process.cpuUsage(gen0);

    await ingestRun.close(); // closed only now, so an OK arriving twice, however late, is caught
    await queryRun?.close();
    failures.push(...ingestRun.failures.lines(), ...(queryRun?.failures.lines() ?? []));

    const phaseStats = (exitCode: number | null, dataTotal: number, walBytes: number): RelayStats => ({
      cpuSecIngest: cpu1 - cpu0,
      cpuSecQuery: cpu2 - cpuQuery0,
      cpuPer1kEvents: ((cpu1 - cpu0) / ingest.events) * 1000,
      cpuPer1kReqs: mixCpuPer1k,
      coresIngest: (cpu1 - cpu0) / ingest.seconds,
      coresQuery: query && mixCpuPer1k !== null ? (mixCpuPer1k * query.mix.reqs) / 1000 / query.mix.seconds : null,
      rssMiB: mem!.rss,
      peakRssMiB: mem!.peak,
      peakRssIngestMiB: peakIngest.rss,
      peakRssQueryMiB: peakQuery?.rss ?? null,
      peakRssAnonIngestMiB: peakIngest.anon,
      peakRssAnonQueryMiB: peakQuery?.anon ?? null,
      peakRssFileIngestMiB: peakIngest.file,
      peakRssFileQueryMiB: peakQuery?.file ?? null,
      rssAnonMiB: mem!.anon,
      rssFileMiB: mem!.file,
      dataMiB: dataTotal / 1024 / 1024,
      walMiB: walBytes / 1024 / 1024,
      dbBytesPerEvent: dataTotal / oracle.size,
      dbPartsPerEvent: null,
      exitCode,
    });
    let relayStats: RelayStats | null = null;
    if (relay) {
      const exitCode = await relay.stop();
      log(`relay: stopped with exit code ${exitCode}`);
      if (exitCode !== 0)
        failures.push(
          `relay exit code ${exitCode === null ? "none (killed after 15 s without exiting)" : exitCode} after SIGTERM, expected 0`,
        );
      const data = relay.dataBytes(); // before dbParts opens the file (that may create -shm)
      const parts = dbParts(relay.dataDir);
      if (data.wal > 0)
        warnings.push(
          `relay left a ${(data.wal / 1024 / 1024).toFixed(1)} MiB write-ahead log after a clean shutdown (its checkpoint on exit did not complete)`,
        );
      const stderr = relay.stderr.text.trim();
      if (stderr) warnings.push(`relay stderr: ${stderr.slice(-2000)}`);
      relayStats = {
        ...phaseStats(exitCode, data.total, data.wal),
        dbPartsPerEvent: parts ? Object.fromEntries(parts.map(([k, b]) => [k, b / oracle.size])) : null,
      };
    } else if (pid) {
      // An external relay keeps running; its data directory (if given) is measured as it is now.
      const data = opts.relayData ? dirBytes(opts.relayData) : undefined;
      if (data) log(`relay data: ${data.size} bytes in files, ${data.allocated} allocated on disk (${opts.relayData})`);
      relayStats = phaseStats(null, data?.size ?? NaN, 0);
    }

    const result = tidy({
      format: 2,
      at: new Date().toISOString(),
      params: {
        events: opts.events,
        conns: opts.conns,
        window: opts.window,
        reqs: opts.reqs,
        ...(opts.warmReqs > 0 ? { warmReqs: opts.warmReqs } : {}),
        ...(opts.checkAfter ? { checkAfter: true } : {}),
        perType: opts.perType,
        queryConns: opts.queryConns,
        queryInflight: opts.queryInflight,
        verify: relay ? opts.verify : null,
        relay: opts.relayUrl ?? "spawned",
        mix: opts.mix,
      },
      machine: { cpus: availableParallelism(), bun: Bun.version, platform: `${process.platform}-${process.arch}`, loadAvg: loadAvgAtStart },
      corpus: { events: corpus.size, bytes: corpusBytes, storedEvents: oracle.size, storedBytes },
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
    for (const f of failures) console.log(`FAIL ${f}`);
    console.log(`FAIL ${err instanceof Error ? err.message : String(err)}`);
    if (relay?.running) await relay.stop();
    return 1;
  } finally {
    clearTimeout(hardStop);
    cleanUp();
  }
}

function report(result: BenchResult, opts: Options): number {
  const p = result.params;
  let prev: BenchResult | undefined;
  if (result.ok && opts.save) prev = saveResult(result);
  console.log(
    `\nbunstr load check: ${p.events} events (${(result.corpus.bytes / 1024 / 1024).toFixed(0)} MiB of JSON, ${result.corpus.storedEvents} to keep) over ${p.conns} conns (window ${p.window}), ` +
      `${p.reqs} REQs in the ${p.mix ?? "app"} mix + ${p.perType} per type over ${p.queryConns} conns x ${p.queryInflight}, ` +
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
