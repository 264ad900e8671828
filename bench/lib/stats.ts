// Small numeric helpers shared by the scenarios and the report.

export interface Summary {
  n: number;
  p50: number;
  p99: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

export function summarize(samples: readonly number[]): Summary {
  const s = Float64Array.from(samples).sort();
  let sum = 0;
  for (const x of s) sum += x;
  return {
    n: s.length,
    p50: percentile(s, 50),
    p99: percentile(s, 99),
    max: s.length ? s[s.length - 1]! : NaN,
    mean: s.length ? sum / s.length : NaN,
  };
}

/** Rounds to `digits` decimal places (1234.5678 -> 1234.6 with 1); NaN and infinities pass through. */
export const round = (x: number, digits = 2): number => (Number.isFinite(x) ? Number(x.toFixed(digits)) : x);

export const roundSummary = (s: Summary, digits = 2): Summary => ({
  n: s.n,
  p50: round(s.p50, digits),
  p99: round(s.p99, digits),
  max: round(s.max, digits),
  mean: round(s.mean, digits),
});

/** mulberry32: a tiny seeded PRNG, so the query mix is the same from run to run. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Collects failure messages: counts them all, keeps the first few of each kind for the report. */
export class Failures {
  private readonly byKind = new Map<string, { count: number; examples: string[] }>();

  add(kind: string, detail: string): void {
    let k = this.byKind.get(kind);
    if (!k) this.byKind.set(kind, (k = { count: 0, examples: [] }));
    k.count++;
    if (k.examples.length < 3) k.examples.push(detail);
  }

  get count(): number {
    let n = 0;
    for (const k of this.byKind.values()) n += k.count;
    return n;
  }

  lines(): string[] {
    return [...this.byKind].map(([kind, k]) => `${kind} x${k.count}: ${k.examples.join(" | ")}`);
  }
}
