// The relay's own REQ -> EOSE histogram (bunstr_req_seconds at /metrics, loopback needs no
// token): scraped before and after a run, its quantiles between the two, interpolated inside a
// bucket as Prometheus' histogram_quantile does. The relay's share of a client's latency, without
// the network or the load generator's own stalls.

/** Cumulative counts by upper bound (seconds; the last is +Inf). */
export type Buckets = [le: number, count: number][];

export async function scrapeReqSeconds(wsUrl: string): Promise<Buckets> {
  const url = `${wsUrl.replace(/^ws/, "http").replace(/\/$/, "")}/metrics`;
  const text = await (await fetch(url)).text();
  const out: Buckets = [];
  for (const m of text.matchAll(/^bunstr_req_seconds_bucket\{le="([^"]+)"\} (\S+)$/gm))
    out.push([m[1] === "+Inf" ? Infinity : Number(m[1]), Number(m[2])]);
  return out;
}

/** The q-quantile (0..1) in ms of what was counted between two scrapes; NaN if nothing was. */
export function quantileMs(before: Buckets, after: Buckets, q: number): number {
  const counts = after.map(([le, n], i) => [le, n - (before[i]?.[1] ?? 0)] as const);
  const total = counts.at(-1)?.[1] ?? 0;
  if (total === 0) return NaN;
  const rank = q * total;
  let prevLe = 0;
  let prevN = 0;
  for (const [le, n] of counts) {
    if (n >= rank) {
      if (le === Infinity) return prevLe * 1000;
      return (prevLe + (le - prevLe) * ((rank - prevN) / Math.max(1, n - prevN))) * 1000;
    }
    prevLe = le;
    prevN = n;
  }
  return NaN;
}
