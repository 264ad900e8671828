// The result record, the printed table, and last.json / prev.json bookkeeping.
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { OUT_DIR } from "../corpus.ts";
import type { IngestResult } from "../scenarios/ingest.ts";
import { QUERY_TYPES, type QueryResult } from "../scenarios/query.ts";
import { round, roundSummary } from "./stats.ts";

export interface BenchParams {
  events: number;
  conns: number;
  window: number;
  reqs: number;
  queryConns: number;
  queryInflight: number;
  /** Signature verification of the spawned relay; null when benchmarking an external relay. */
  verify: boolean | null;
  /** "spawned", or the URL given with --relay. */
  relay: string;
}

export interface RelayStats {
  /** CPU seconds (user+system, all threads) spent during ingest, per 1,000 events. */
  cpuPer1kEvents: number;
  /** CPU seconds during the query phase, per 1,000 REQs. */
  cpuPer1kReqs: number;
  cpuSecIngest: number;
  cpuSecQuery: number;
  /** VmRSS after the query phase, MiB. */
  rssMiB: number;
  /** VmHWM (peak RSS), MiB. */
  peakRssMiB: number;
  /** All files in the data directory after shutdown, MiB. */
  dataMiB: number;
  /** Of which write-ahead log: bunstr checkpoints (TRUNCATE) on exit, so this should be 0. */
  walMiB: number;
  exitCode: number | null;
}

export interface BenchResult {
  format: 1;
  at: string;
  params: BenchParams;
  /** loadAvg: 1-minute load average when the run started (other work on the box skews everything). */
  machine: { cpus: number; bun: string; platform: string; loadAvg: number };
  ingest: IngestResult;
  query: QueryResult;
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

/** Rounds every number for storage and display. */
export function tidy(r: BenchResult): BenchResult {
  const rel = r.relay;
  return {
    ...r,
    ingest: { ...r.ingest, seconds: round(r.ingest.seconds, 3), eventsPerSec: round(r.ingest.eventsPerSec, 1), latencyMs: roundSummary(r.ingest.latencyMs) },
    query: {
      ...r.query,
      seconds: round(r.query.seconds, 3),
      reqsPerSec: round(r.query.reqsPerSec, 1),
      latencyMs: roundSummary(r.query.latencyMs),
      byType: Object.fromEntries(Object.entries(r.query.byType).map(([k, s]) => [k, roundSummary(s)])) as QueryResult["byType"],
    },
    relay: rel && {
      ...rel,
      cpuPer1kEvents: round(rel.cpuPer1kEvents, 3),
      cpuPer1kReqs: round(rel.cpuPer1kReqs, 3),
      cpuSecIngest: round(rel.cpuSecIngest, 2),
      cpuSecQuery: round(rel.cpuSecQuery, 2),
      rssMiB: round(rel.rssMiB, 1),
      peakRssMiB: round(rel.peakRssMiB, 1),
      dataMiB: round(rel.dataMiB, 1),
      walMiB: round(rel.walMiB, 1),
    },
    generatorCpuSec: round(r.generatorCpuSec, 2),
  };
}

type Better = "higher" | "lower" | "none";
interface Row {
  label: string;
  /** One or more numbers shown as "a / b"; each compared on its own. */
  get: (r: BenchResult) => (number | null | undefined)[];
  better: Better;
  /** Text instead of the numbers (still compared through `get`). */
  text?: (r: BenchResult) => string;
}

const rows: Row[] = [
  {
    label: "ingest: OK true / events",
    get: (r) => [r.ingest.okTrue],
    better: "none",
    text: (r) => `${r.ingest.okTrue} / ${r.ingest.events}${r.ingest.duplicates ? ` (${r.ingest.duplicates} duplicate)` : ""}${r.ingest.okFalse ? `, ${r.ingest.okFalse} false` : ""}${r.ingest.missing ? `, ${r.ingest.missing} missing` : ""}`,
  },
  { label: "ingest: accepted events/s", get: (r) => [r.ingest.eventsPerSec], better: "higher" },
  { label: "ingest: OK latency p50 / p99 ms", get: (r) => [r.ingest.latencyMs.p50, r.ingest.latencyMs.p99], better: "lower" },
  { label: "query: REQs/s", get: (r) => [r.query.reqsPerSec], better: "higher" },
  { label: "query: EOSE latency p50 / p99 ms", get: (r) => [r.query.latencyMs.p50, r.query.latencyMs.p99], better: "lower" },
  ...QUERY_TYPES.map(
    (t): Row => ({ label: `  ${t} p50 / p99 ms`, get: (r) => [r.query.byType[t]?.p50, r.query.byType[t]?.p99], better: "lower" }),
  ),
  { label: "relay: CPU s / 1k events (ingest)", get: (r) => [r.relay?.cpuPer1kEvents], better: "lower" },
  { label: "relay: CPU s / 1k REQs", get: (r) => [r.relay?.cpuPer1kReqs], better: "lower" },
  { label: "relay: RSS end / peak MiB", get: (r) => [r.relay?.rssMiB, r.relay?.peakRssMiB], better: "lower" },
  { label: "relay: data dir / of it WAL MiB", get: (r) => [r.relay?.dataMiB, r.relay?.walMiB], better: "lower" },
  { label: "load generator: CPU s", get: (r) => [r.generatorCpuSec], better: "none" },
];

const fmt = (x: number | null | undefined): string => (x === null || x === undefined || Number.isNaN(x) ? "-" : String(x));

function delta(now: number | null | undefined, before: number | null | undefined, better: Better): string {
  if (now == null || before == null || !Number.isFinite(now) || !Number.isFinite(before) || before === 0) return "-";
  const pct = ((now - before) / Math.abs(before)) * 100;
  const sign = pct > 0 ? "+" : "";
  const mark = better === "none" || Math.abs(pct) < 5 ? "" : (pct > 0) === (better === "higher") ? " (better)" : " (worse)";
  return `${sign}${pct.toFixed(1)}%${mark}`;
}

export function table(r: BenchResult, prev?: BenchResult): string {
  const head = ["metric", "value", ...(prev ? ["prev", "delta"] : [])];
  const body = rows.map((row) => {
    const now = row.get(r);
    const cells = [row.label, row.text ? row.text(r) : now.map(fmt).join(" / ")];
    if (prev) {
      const before = row.get(prev);
      cells.push(row.text ? row.text(prev) : before.map(fmt).join(" / "));
      cells.push(now.map((x, i) => delta(x, before[i], row.better)).join(" / "));
    }
    return cells;
  });
  const widths = head.map((_, c) => Math.max(head[c]!.length, ...body.map((b) => b[c]!.length)));
  const line = (cells: string[]) => cells.map((x, c) => x.padEnd(widths[c]!)).join("  ").trimEnd();
  return [line(head), line(widths.map((w) => "-".repeat(w))), ...body.map(line)].join("\n");
}

/** Parameters that differ between two runs (their numbers are not directly comparable). */
export function paramDiff(a: BenchParams, b: BenchParams): string[] {
  return (Object.keys(a) as (keyof BenchParams)[]).filter((k) => a[k] !== b[k]).map((k) => `${k} ${b[k]} -> ${a[k]}`);
}

export const LAST = join(OUT_DIR, "last.json");
export const PREV = join(OUT_DIR, "prev.json");

/** Rotates last.json -> prev.json, writes this run as last.json, returns the previous run if any. */
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
