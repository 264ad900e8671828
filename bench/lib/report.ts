// The result record, the printed table, and last.json / prev.json bookkeeping.
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { OUT_DIR } from "../corpus.ts";
import type { IngestResult } from "../scenarios/ingest.ts";
import { QUERY_TYPES, type MixName, type PhaseResult, type QueryResult } from "../scenarios/query.ts";
import { round, roundSummary } from "./stats.ts";

export interface BenchParams {
  events: number;
  conns: number;
  window: number;
  /** REQs in the query mix (0: no query phase). */
  reqs: number;
  /** REQs of the mix run before it, not counted (--warm-reqs; absent in older records: 0). */
  warmReqs?: number;
  /** Answers checked after each phase, not during it (--check-after; absent: false). */
  checkAfter?: boolean;
  /** REQs of each type alone after the mix. */
  perType: number;
  queryConns: number;
  queryInflight: number;
  /** Signature verification of the spawned relay; null when benchmarking an external relay. */
  verify: boolean | null;
  /** "spawned", or the URL given with --relay. */
  relay: string;
  /** The REQ shapes (absent in older records: "app"). */
  mix?: MixName;
}

export interface RelayStats {
  /** CPU seconds (user+system, all threads) spent during ingest, per 1,000 events. */
  cpuPer1kEvents: number;
  /** CPU seconds during the query mix, per 1,000 REQs. */
  cpuPer1kReqs: number | null;
  cpuSecIngest: number;
  /** CPU seconds during all query phases. */
  cpuSecQuery: number;
  /** VmRSS after the query phase, MiB. */
  rssMiB: number;
  /** VmHWM (peak RSS), MiB. */
  peakRssMiB: number;
  /** Peak RSS during ingest and during the query phases, MiB (PeakRss: VmHWM reset at the start of each, or VmRSS sampled). */
  peakRssIngestMiB: number;
  peakRssQueryMiB: number | null;
  /**
   * Peaks of RssAnon (anonymous memory: what the process alone holds) and of RssFile + RssShmem
   * (pages of mapped files: the binary, a memory-mapped database; cache the kernel can drop) during
   * ingest and during the query phases, MiB, sampled every 50 ms (the kernel keeps no high-water
   * mark of either). Absent in records older than issue 35.
   */
  peakRssAnonIngestMiB?: number;
  peakRssAnonQueryMiB?: number | null;
  peakRssFileIngestMiB?: number;
  peakRssFileQueryMiB?: number | null;
  /** Relay CPU seconds ÷ wall seconds: during ingest, during the query mix. */
  coresIngest: number;
  coresQuery: number | null;
  /** Of VmRSS at the end: anonymous memory (heaps) and file-backed pages (the memory-mapped database, counted per mapping). */
  rssAnonMiB: number;
  rssFileMiB: number;
  /** All files in the data directory after shutdown, MiB. */
  dataMiB: number;
  /** Of which write-ahead log: bunstr checkpoints (TRUNCATE) on exit, so this should be 0 (external relay: 0, not measured). */
  walMiB: number;
  /** Data directory bytes after shutdown ÷ events stored (per the oracle). */
  dbBytesPerEvent: number;
  /** The same split by part of the database (tables, indexes, full-text index, free pages); null without dbstat. */
  dbPartsPerEvent: Record<string, number> | null;
  exitCode: number | null;
}

export interface BenchResult {
  format: 2;
  at: string;
  params: BenchParams;
  /** loadAvg: 1-minute load average when the run started (other work on the box skews everything). */
  machine: { cpus: number; bun: string; platform: string; loadAvg: number };
  /** Events and bytes of JSON in the corpus, and of the events a relay keeps (newest versions only). */
  corpus: { events: number; bytes: number; storedEvents: number; storedBytes: number };
  ingest: IngestResult;
  /** Null with --reqs 0. */
  query: QueryResult | null;
  /** Null when the relay is not ours (--relay). */
  relay: RelayStats | null;
  /** CPU seconds used by this load generator from the start of ingest to the end of the queries. */
  generatorCpuSec: number;
  /** True when every check passed; only such runs are saved and compared. */
  ok: boolean;
  failures: string[];
  /** Things worth a look that do not fail the run (e.g. relay stderr output). */
  warnings: string[];
}

const tidyPhase = <P extends PhaseResult>(p: P): P => ({
  ...p,
  seconds: round(p.seconds, 3),
  reqsPerSec: round(p.reqsPerSec, 1),
  latencyMs: roundSummary(p.latencyMs),
  cpuPer1kReqs: p.cpuPer1kReqs === null ? null : round(p.cpuPer1kReqs, 3),
  generatorCpuPer1kReqs: p.generatorCpuPer1kReqs === undefined ? undefined : round(p.generatorCpuPer1kReqs, 3),
  cpuPer1kByThread: p.cpuPer1kByThread?.map(([name, cpu]) => [name, round(cpu, 3)] as [string, number]),
});

const roundOpt = <T extends number | null | undefined>(x: T): T => (typeof x === "number" ? (round(x, 1) as T) : x);

/** Rounds every number for storage and display. */
export function tidy(r: BenchResult): BenchResult {
  const rel = r.relay;
  const q = r.query;
  return {
    ...r,
    ingest: {
      ...r.ingest,
      seconds: round(r.ingest.seconds, 3),
      eventsPerSec: round(r.ingest.eventsPerSec, 1),
      latencyMs: roundSummary(r.ingest.latencyMs),
      windows: r.ingest.windows.map((w) => ({ ...w, seconds: round(w.seconds, 3), eventsPerSec: round(w.eventsPerSec, 1) })),
    },
    query: q && {
      ...q,
      mix: {
        ...tidyPhase(q.mix),
        byType: Object.fromEntries(Object.entries(q.mix.byType).map(([k, s]) => [k, roundSummary(s)])) as QueryResult["mix"]["byType"],
      },
      alone: q.alone && (Object.fromEntries(Object.entries(q.alone).map(([k, p]) => [k, tidyPhase(p)])) as QueryResult["alone"]),
      expectedMean: Object.fromEntries(Object.entries(q.expectedMean).map(([k, v]) => [k, round(v, 1)])) as QueryResult["expectedMean"],
    },
    relay: rel && {
      ...rel,
      cpuPer1kEvents: round(rel.cpuPer1kEvents, 3),
      cpuPer1kReqs: rel.cpuPer1kReqs === null ? null : round(rel.cpuPer1kReqs, 3),
      cpuSecIngest: round(rel.cpuSecIngest, 2),
      cpuSecQuery: round(rel.cpuSecQuery, 2),
      rssMiB: round(rel.rssMiB, 1),
      peakRssMiB: round(rel.peakRssMiB, 1),
      peakRssIngestMiB: round(rel.peakRssIngestMiB, 1),
      peakRssQueryMiB: rel.peakRssQueryMiB === null ? null : round(rel.peakRssQueryMiB, 1),
      peakRssAnonIngestMiB: roundOpt(rel.peakRssAnonIngestMiB),
      peakRssAnonQueryMiB: roundOpt(rel.peakRssAnonQueryMiB),
      peakRssFileIngestMiB: roundOpt(rel.peakRssFileIngestMiB),
      peakRssFileQueryMiB: roundOpt(rel.peakRssFileQueryMiB),
      coresIngest: round(rel.coresIngest, 2),
      coresQuery: rel.coresQuery === null ? null : round(rel.coresQuery, 2),
      rssAnonMiB: round(rel.rssAnonMiB, 1),
      rssFileMiB: round(rel.rssFileMiB, 1),
      dataMiB: round(rel.dataMiB, 1),
      walMiB: round(rel.walMiB, 1),
      dbBytesPerEvent: round(rel.dbBytesPerEvent, 0),
      dbPartsPerEvent: rel.dbPartsPerEvent && Object.fromEntries(Object.entries(rel.dbPartsPerEvent).map(([k, v]) => [k, round(v, 0)])),
    },
    generatorCpuSec: round(r.generatorCpuSec, 2),
  };
}

type Better = "higher" | "lower" | "none";
interface Row {
  label: string | ((r: BenchResult) => string);
  /** One or more numbers shown as "a / b"; each compared on its own. */
  get: (r: BenchResult) => (number | null | undefined)[];
  /** For all numbers, or one per number. */
  better: Better | Better[];
  /** Text instead of the numbers (still compared through `get`). */
  text?: (r: BenchResult) => string;
}

const k = (n: number) => (n % 1000 === 0 ? `${n / 1000}k` : String(n));

const rows: Row[] = [
  {
    label: "ingest: OK true / events",
    get: (r) => [r.ingest.okTrue],
    better: "none",
    text: (r) =>
      `${r.ingest.okTrue} / ${r.ingest.events}` +
      [
        r.ingest.refusedOlder ? `${r.ingest.refusedOlder} older versions refused (expected)` : "",
        r.ingest.duplicates ? `${r.ingest.duplicates} duplicate` : "",
        r.ingest.okFalse ? `${r.ingest.okFalse} false` : "",
        r.ingest.missing ? `${r.ingest.missing} missing` : "",
      ]
        .filter(Boolean)
        .map((s) => `, ${s}`)
        .join(""),
  },
  { label: "ingest: accepted events/s", get: (r) => [r.ingest.eventsPerSec], better: "higher" },
  {
    label: (r) => `ingest: accepted events/s per ${k(r.ingest.windowEvents)} window`,
    get: (r) => (r.ingest.windows.length > 1 ? r.ingest.windows.map((w) => w.eventsPerSec) : [undefined]),
    better: "higher",
  },
  { label: "ingest: OK latency p50 / p99 ms", get: (r) => [r.ingest.latencyMs.p50, r.ingest.latencyMs.p99], better: "lower" },
  { label: "query mix: REQs/s", get: (r) => [r.query?.mix.reqsPerSec], better: "higher" },
  { label: "query mix: EOSE latency p50 / p99 ms", get: (r) => [r.query?.mix.latencyMs.p50, r.query?.mix.latencyMs.p99], better: "lower" },
  ...QUERY_TYPES.map(
    (t): Row => ({
      label: `  ${t} in the mix: p50 / p99 ms`,
      get: (r) => [r.query?.mix.byType[t]?.p50, r.query?.mix.byType[t]?.p99],
      better: "lower",
    }),
  ),
  ...QUERY_TYPES.map(
    (t): Row => ({
      label: `  ${t} alone: REQs/s / p50 / p99 ms / CPU s per 1k`,
      get: (r) => {
        const p = r.query?.alone?.[t];
        return [p?.reqsPerSec, p?.latencyMs.p50, p?.latencyMs.p99, p?.cpuPer1kReqs];
      },
      better: ["higher", "lower", "lower", "lower"],
    }),
  ),
  { label: "relay: CPU s / 1k events (ingest)", get: (r) => [r.relay?.cpuPer1kEvents], better: "lower" },
  { label: "relay: CPU s / 1k REQs (mix)", get: (r) => [r.relay?.cpuPer1kReqs], better: "lower" },
  {
    label: "  of it, by thread",
    get: (r) => [r.query?.mix.cpuPer1kByThread?.length],
    better: "none",
    text: (r) =>
      r.query?.mix.cpuPer1kByThread
        ?.filter(([, v]) => v >= 0.001)
        .map(([k, v]) => `${k} ${v}`)
        .join(", ") || "-",
  },
  { label: "relay: cores used, ingest / query mix", get: (r) => [r.relay?.coresIngest, r.relay?.coresQuery], better: "none" },
  { label: "relay: RSS end / peak MiB", get: (r) => [r.relay?.rssMiB, r.relay?.peakRssMiB], better: "lower" },
  { label: "relay: peak RSS ingest / queries MiB", get: (r) => [r.relay?.peakRssIngestMiB, r.relay?.peakRssQueryMiB], better: "lower" },
  { label: "  of it at the end: anonymous / file-backed MiB", get: (r) => [r.relay?.rssAnonMiB, r.relay?.rssFileMiB], better: "lower" },
  {
    label: "relay: peak RssAnon ingest / queries MiB",
    get: (r) => [r.relay?.peakRssAnonIngestMiB, r.relay?.peakRssAnonQueryMiB],
    better: "lower",
  },
  {
    label: "relay: peak RssFile ingest / queries MiB",
    get: (r) => [r.relay?.peakRssFileIngestMiB, r.relay?.peakRssFileQueryMiB],
    better: "lower",
  },
  { label: "relay: data dir / of it WAL MiB", get: (r) => [r.relay?.dataMiB, r.relay?.walMiB], better: "lower" },
  {
    label: "relay: DB bytes / stored event",
    get: (r) => [r.relay?.dbBytesPerEvent],
    better: "lower",
    text: (r) =>
      r.relay
        ? `${r.relay.dbBytesPerEvent} (${r.corpus.storedEvents} stored of ${r.corpus.events}; their JSON: ${Math.round(r.corpus.storedBytes / r.corpus.storedEvents)} B each)`
        : "-",
  },
  {
    label: "  of it, by part of the database",
    get: (r) => [r.relay?.dbBytesPerEvent],
    better: "none",
    text: (r) =>
      r.relay?.dbPartsPerEvent
        ? Object.entries(r.relay.dbPartsPerEvent)
            .filter(([, v]) => v >= 1)
            .map(([k, v]) => `${k} ${v}`)
            .join(", ")
        : "-",
  },
  { label: "load generator: CPU s", get: (r) => [r.generatorCpuSec], better: "none" },
  { label: "load generator: CPU s / 1k REQs (mix)", get: (r) => [r.query?.mix.generatorCpuPer1kReqs ?? null], better: "none" },
];

const fmt = (x: number | null | undefined): string => (x === null || x === undefined || Number.isNaN(x) ? "-" : String(x));

function delta(now: number | null | undefined, before: number | null | undefined, better: Better): string {
  if (now == null || before == null || !Number.isFinite(now) || !Number.isFinite(before) || before === 0) return "-";
  const pct = ((now - before) / Math.abs(before)) * 100;
  const sign = pct > 0 ? "+" : "";
  const mark = better === "none" || Math.abs(pct) < 5 ? "" : pct > 0 === (better === "higher") ? " (better)" : " (worse)";
  return `${sign}${pct.toFixed(1)}%${mark}`;
}

/** The table; rows without any number in this run (e.g. per-type phases not run) are left out. */
export function table(r: BenchResult, prev?: BenchResult): string {
  const head = ["metric", "value", ...(prev ? ["prev", "delta"] : [])];
  const body = rows
    .filter((row) => row.get(r).some((x) => x !== null && x !== undefined && !Number.isNaN(x)))
    .map((row) => {
      const now = row.get(r);
      const cells = [typeof row.label === "string" ? row.label : row.label(r), row.text ? row.text(r) : now.map(fmt).join(" / ")];
      if (prev) {
        const before = row.get(prev);
        cells.push(row.text ? row.text(prev) : before.map(fmt).join(" / "));
        cells.push(now.map((x, i) => delta(x, before[i], Array.isArray(row.better) ? row.better[i]! : row.better)).join(" / "));
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

/** Parameters that differ between two runs (their numbers are not directly comparable). */
export function paramDiff(a: BenchParams, b: BenchParams): string[] {
  return (Object.keys(a) as (keyof BenchParams)[]).filter((k) => a[k] !== b[k]).map((k) => `${k} ${b[k]} -> ${a[k]}`);
}

export const LAST = join(OUT_DIR, "last.json");
export const PREV = join(OUT_DIR, "prev.json");

/** Rotates last.json -> prev.json, writes this run as last.json, returns the previous run if any (of the same format). */
export function saveResult(r: BenchResult): BenchResult | undefined {
  mkdirSync(OUT_DIR, { recursive: true });
  if (existsSync(LAST)) renameSync(LAST, PREV);
  writeFileSync(LAST, JSON.stringify(r, null, 2) + "\n");
  if (!existsSync(PREV)) return undefined;
  try {
    const prev = JSON.parse(readFileSync(PREV, "utf8")) as BenchResult;
    return prev.format === r.format ? prev : undefined;
  } catch {
    return undefined;
  }
}
