// The status page's charts: a short history of this relay's own counters (the same RelayMetrics
// /metrics reads), sampled every 10 s for the last hour and every minute for the last day, in two
// fixed rings of numbers allocated once (HISTORY_BYTES). Served as JSON (statusJsonPath).
import { eventsStored } from "../http/status.ts";
import type { MetricsSource } from "./metrics.ts";
import { REFUSAL_REASONS } from "./metrics.ts";

/** The columns of a sample: counters are per minute over the interval before it, the rest gauges. */
const COUNTERS = ["accepted", "duplicate", "reqs", ...REFUSAL_REASONS.map((r) => `refused:${r}`)] as const;
const GAUGES = ["connections", "events_stored", "database_bytes"] as const;
const WIDTH = 1 + COUNTERS.length + GAUGES.length;

/** The fine ring's sample interval. Exported for bench/status-json.ts, which fills the rings. */
export const FINE_MS = 10_000;
const COARSE_MS = 60_000;
const FINE_SAMPLES = 360; // one hour
const COARSE_SAMPLES = 1440; // one day
/** What the two rings hold, in bytes: 8 per number (≈ 230 KB). Exported for tests (src/http/status.test.ts). */
export const HISTORY_BYTES = (FINE_SAMPLES + COARSE_SAMPLES) * WIDTH * 8;

/** A fixed number of rows of WIDTH numbers, the oldest overwritten. */
class Ring {
  private readonly data: Float64Array;
  private next = 0;
  private size = 0;
  /** The cumulative counters at the last sample, for the next one's rates. */
  last: number[] | undefined;

  constructor(private readonly capacity: number) {
    this.data = new Float64Array(capacity * WIDTH);
  }

  push(row: readonly number[]): void {
    this.data.set(row, this.next * WIDTH);
    this.next = (this.next + 1) % this.capacity;
    this.size = Math.min(this.size + 1, this.capacity);
    this.text = undefined;
  }

  /**
   * The rows as JSON list items, one string per column (times first), without brackets: built
   * once per sample, not per request (a day of rows is ~85 KB of JSON, ~3 ms to build).
   */
  private text: string[] | undefined;
  columns(): string[] {
    if (this.text) return this.text;
    const rows = this.rows();
    this.text = Array.from({ length: WIDTH }, (_, j) => rows.map((r) => (j === 0 ? String(r[0]) : valueJson(r[j]!))).join(","));
    return this.text;
  }

  rows(): number[][] {
    const out: number[][] = [];
    for (let n = 0; n < this.size; n++) {
      const i = (this.next - this.size + n + this.capacity) % this.capacity;
      out.push([...this.data.subarray(i * WIDTH, (i + 1) * WIDTH)]);
    }
    return out;
  }
}

/** A rate or gauge as the JSON shows it: two decimals, null when unknown. */
const valueJson = (v: number): string => (Number.isFinite(v) ? JSON.stringify(Math.round(v * 100) / 100) : "null");

/** The cumulative counters now, in COUNTERS order. */
function counters(src: MetricsSource): number[] {
  const m = src.metrics;
  const { accepted, duplicate } = m.acceptedTotals();
  return [accepted, duplicate, m.received.REQ, ...m.refusedByReason()];
}

interface Series {
  interval_s: number;
  /** ms since the epoch, one per sample. */
  t: number[];
  /** Per-minute rates over the interval before each sample (accepted, duplicate, reqs, refused:<reason>) and gauges (null = unknown). */
  values: Record<string, (number | null)[]>;
}

interface StatusJson {
  now: number;
  started_at: number;
  history_bytes: number;
  /** Every 10 s for the last hour, then the last day by minute; each ends with the interval so far. */
  series: { "10s": Series; "1m": Series };
  top_kinds: { kind: number; accepted: number }[];
  recent_refusals: ReturnType<MetricsSource["metrics"]["recentRefusals"]>;
}

export class History {
  private readonly fine = new Ring(FINE_SAMPLES);
  private readonly coarse = new Ring(COARSE_SAMPLES);
  private lastFine = 0;
  private lastCoarse = 0;
  private timer: ReturnType<typeof setInterval> | undefined;
  private gauges: number[] = [0, Number.NaN, Number.NaN];

  constructor(private readonly src: MetricsSource) {
    const zero = counters(src).map(() => 0);
    this.fine.last = zero;
    this.coarse.last = zero;
    this.lastFine = src.startedAt;
    this.lastCoarse = src.startedAt;
    // The first point: the relay at start.
    const row = [src.startedAt, ...zero, src.connections(), Number.NaN, Number.NaN];
    this.fine.push(row);
    this.coarse.push(row);
  }

  start(): this {
    this.timer = setInterval(() => void this.sample(), FINE_MS);
    this.timer.unref();
    return this;
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Takes one sample (every FINE_MS; every COARSE_MS also into the day's ring). */
  async sample(now = Date.now()): Promise<void> {
    await this.readGauges();
    const c = counters(this.src);
    this.fine.push(this.row(this.fine, now, c, now - this.lastFine));
    this.fine.last = c;
    this.lastFine = now;
    if (now - this.lastCoarse >= COARSE_MS - 1000) {
      this.coarse.push(this.row(this.coarse, now, c, now - this.lastCoarse));
      this.coarse.last = c;
      this.lastCoarse = now;
    }
  }

  private async readGauges(): Promise<void> {
    const store = this.src.store;
    // Either can fail while the store closes: the sample then says unknown.
    const [stored, bytes] = await Promise.all([
      eventsStored(store),
      Promise.resolve()
        .then(() => store.sizeBytes())
        .catch(() => Number.NaN),
    ]);
    this.gauges = [this.src.connections(), stored ?? Number.NaN, bytes];
  }

  private row(ring: Ring, now: number, c: number[], spanMs: number): number[] {
    const last = ring.last ?? c;
    const perMinute = 60_000 / Math.max(1, spanMs);
    return [now, ...c.map((v, i) => (v - last[i]!) * perMinute), ...this.gauges];
  }

  /** The rings as JSON, each with a last point for the interval so far (rates of the partial interval). */
  json(now = Date.now()): StatusJson {
    return JSON.parse(this.text(now)) as StatusJson;
  }

  /** json() as text, served at statusJsonPath: the rings' cached columns and the point for now. */
  text(now = Date.now()): string {
    const c = counters(this.src);
    const gauges = [this.src.connections(), this.gauges[1]!, this.gauges[2]!];
    const series = (ring: Ring, interval: number, since: number): string => {
      const last = ring.last ?? c;
      const span = Math.max(1000, now - since);
      const point = [now, ...c.map((v, i) => ((v - last[i]!) * 60_000) / span), ...gauges];
      const cols = ring.columns();
      const values = [...COUNTERS, ...GAUGES].map((name, j) => `${JSON.stringify(name)}:[${cols[j + 1]},${valueJson(point[j + 1]!)}]`);
      return `{"interval_s":${interval / 1000},"t":[${cols[0]},${now}],"values":{${values.join(",")}}}`;
    };
    return (
      `{"now":${now},"started_at":${this.src.startedAt},"history_bytes":${HISTORY_BYTES},` +
      `"series":{"10s":${series(this.fine, FINE_MS, this.lastFine)},"1m":${series(this.coarse, COARSE_MS, this.lastCoarse)}},` +
      `"top_kinds":${JSON.stringify(this.src.metrics.topKinds(10))},"recent_refusals":${JSON.stringify(this.src.metrics.recentRefusals())}}`
    );
  }
}
