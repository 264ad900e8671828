// Delivery latency: a clock every thread agrees on, and histograms the receiver threads fill and
// the main thread adds up and summarizes.

export interface LatencySummary {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

/**
 * A clock all threads agree on, in ms. Bun's process.hrtime and performance.now() count from
 * each thread's own start; performance.timeOrigin (wall clock at that start, sub-ms) lines them
 * up. The constant keeps the double's resolution well under a microsecond.
 */
const CLOCK_ORIGIN = performance.timeOrigin - 1_700_000_000_000;
export const nowMs = (): number => CLOCK_ORIGIN + performance.now();

// Latency histogram over integer microseconds: exact below 1,024 µs, then 1,024 buckets per
// power of two (0.1 % resolution).
const HIST_SIZE = 23 * 1024;
export function histBucket(us: number): number {
  if (us < 1024) return Math.max(us, 0);
  if (us >= 2 ** 31) return HIST_SIZE - 1;
  const e = 31 - Math.clz32(us);
  return ((e - 9) << 10) + ((us >>> (e - 10)) & 1023);
}
function histValue(b: number): number {
  if (b < 1024) return b;
  const e = (b >> 10) + 9;
  return (1024 + (b & 1023)) * 2 ** (e - 10);
}
/** Latency samples as a histogram (a plain object, so it crosses postMessage as is). */
export interface LatencyHist {
  hist: Uint32Array;
  n: number;
  sumMs: number;
  maxMs: number;
}
export const newHist = (): LatencyHist => ({ hist: new Uint32Array(HIST_SIZE), n: 0, sumMs: 0, maxMs: 0 });
export function addHist(into: LatencyHist, from: LatencyHist): void {
  for (let b = 0; b < HIST_SIZE; b++) into.hist[b]! += from.hist[b]!;
  into.n += from.n;
  into.sumMs += from.sumMs;
  into.maxMs = Math.max(into.maxMs, from.maxMs);
}
export function histSummary({ hist, n, sumMs, maxMs }: LatencyHist): LatencySummary {
  const at = (p: number) => {
    const rank = Math.max(1, Math.ceil((p / 100) * n));
    let c = 0;
    for (let b = 0; b < hist.length; b++) if ((c += hist[b]!) >= rank) return histValue(b) / 1000;
    return NaN;
  };
  return n
    ? { n, p50: at(50), p90: at(90), p99: at(99), max: maxMs, mean: sumMs / n }
    : { n: 0, p50: NaN, p90: NaN, p99: NaN, max: NaN, mean: NaN };
}
