// Query: R REQs over a few connections with bounded concurrency, REQ -> EOSE latency, and a
// check of every answer against the corpus. The mix cycles through four filter shapes.
import type { BenchEvent, Corpus } from "../corpus.ts";
import { connectAll, type Conn, type RelayFrame } from "../lib/conn.ts";
import { Failures, prng, summarize, type Summary } from "../lib/stats.ts";

export const QUERY_TYPES = ["kinds", "authors", "tag", "ids"] as const;
export type QueryType = (typeof QUERY_TYPES)[number];
const LIMIT = 20;

export interface QueryOptions {
  url: string;
  corpus: Corpus;
  reqs: number;
  conns: number;
  /** REQs in flight per connection. */
  inflight: number;
  /**
   * The relay holds exactly the corpus (we started it on an empty database): answers must be
   * exactly the expected events in NIP-01 order. Otherwise they only have to match the filter.
   */
  exact: boolean;
  /**
   * Every corpus event was acknowledged with OK true, so the relay must hold them all: an answer
   * may not have fewer events than the corpus has for the filter (up to the limit).
   */
  allStored: boolean;
  seed: number;
  /** A REQ without EOSE after this long fails. */
  timeoutMs: number;
}

export interface QueryResult {
  reqs: number;
  conns: number;
  inflight: number;
  seconds: number;
  reqsPerSec: number;
  /** REQ sent -> EOSE received, ms. */
  latencyMs: Summary;
  byType: Record<QueryType, Summary>;
  /** EVENT frames received in all answers. */
  eventsReturned: number;
}

interface Req {
  n: number;
  type: QueryType;
  filter: Record<string, unknown>;
  /** What a relay holding exactly the corpus must answer, newest first (NIP-01 order). */
  expected: BenchEvent[];
  /** Does an event match the filter? */
  matches: (e: BenchEvent) => boolean;
}

/** NIP-01 order of stored events: newest first, ties by lowest id. */
const newestFirst = (a: BenchEvent, b: BenchEvent): number => b.created_at - a.created_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

const hasTag = (e: BenchEvent, name: string, value: string): boolean => e.tags.some((t) => t[0] === name && t[1] === value);

const sameEvent = (a: BenchEvent, b: BenchEvent): boolean =>
  a.id === b.id &&
  a.pubkey === b.pubkey &&
  a.created_at === b.created_at &&
  a.kind === b.kind &&
  a.content === b.content &&
  a.sig === b.sig &&
  JSON.stringify(a.tags) === JSON.stringify(b.tags);

/** The deterministic request mix for a corpus. */
export function buildRequests(corpus: Corpus, count: number, seed: number): Req[] {
  const sorted = [...corpus.events].sort(newestFirst);
  const byAuthor = new Map<string, BenchEvent[]>();
  const byTopic = new Map<string, BenchEvent[]>();
  for (const e of sorted) {
    let a = byAuthor.get(e.pubkey);
    if (!a) byAuthor.set(e.pubkey, (a = []));
    a.push(e);
    for (const v of new Set(e.tags.filter((t) => t[0] === "t").map((t) => t[1]!))) {
      let l = byTopic.get(v);
      if (!l) byTopic.set(v, (l = []));
      l.push(e);
    }
  }
  const authors = [...byAuthor.keys()].sort();
  const topics = [...byTopic.keys()].sort();
  const kind1 = sorted.filter((e) => e.kind === 1);
  const rand = prng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const reqs: Req[] = [];
  for (let n = 0; n < count; n++) {
    const type = QUERY_TYPES[n % QUERY_TYPES.length]!;
    switch (type) {
      case "kinds":
        reqs.push({ n, type, filter: { kinds: [1], limit: LIMIT }, expected: kind1.slice(0, LIMIT), matches: (e) => e.kind === 1 });
        break;
      case "authors": {
        const a = pick(authors);
        reqs.push({ n, type, filter: { authors: [a], limit: LIMIT }, expected: byAuthor.get(a)!.slice(0, LIMIT), matches: (e) => e.pubkey === a });
        break;
      }
      case "tag": {
        const v = pick(topics);
        reqs.push({ n, type, filter: { "#t": [v], limit: LIMIT }, expected: byTopic.get(v)!.slice(0, LIMIT), matches: (e) => hasTag(e, "t", v) });
        break;
      }
      case "ids": {
        const e = corpus.events[Math.floor(rand() * corpus.events.length)]!;
        reqs.push({ n, type, filter: { ids: [e.id] }, expected: [e], matches: (x) => x.id === e.id });
        break;
      }
    }
  }
  return reqs;
}

interface Pending {
  req: Req;
  subId: string;
  sentAt: number;
  events: BenchEvent[];
  done: () => void;
}

export class QueryRun {
  readonly failures = new Failures();
  private conns: Conn[] = [];
  private eventsReturned = 0;

  constructor(private readonly opts: QueryOptions) {}

  async run(): Promise<QueryResult> {
    const { reqs: count, conns: c, inflight, timeoutMs } = this.opts;
    const reqs = buildRequests(this.opts.corpus, count, this.opts.seed);
    this.conns = await connectAll(this.opts.url, c, "query-");
    const latencies: number[] = [];
    const byType = new Map<QueryType, number[]>(QUERY_TYPES.map((t) => [t, []]));
    let next = 0;

    const lane = async (conn: Conn, pending: Map<string, Pending>) => {
      while (next < reqs.length && !conn.closed) {
        const req = reqs[next++]!;
        const subId = `q${req.n}`;
        const p: Pending = { req, subId, sentAt: 0, events: [], done: () => {} };
        const finished = new Promise<void>((resolve) => (p.done = resolve));
        pending.set(subId, p);
        p.sentAt = performance.now();
        conn.send(JSON.stringify(["REQ", subId, req.filter]));
        const timedOut = await Promise.race([finished.then(() => false), Bun.sleep(timeoutMs).then(() => true)]);
        if (timedOut) {
          pending.delete(subId);
          this.failures.add("no EOSE", `${subId} ${JSON.stringify(req.filter)} on ${conn.name}: nothing after ${timeoutMs} ms`);
          continue;
        }
        const ms = performance.now() - p.sentAt;
        latencies.push(ms);
        byType.get(req.type)!.push(ms);
        conn.send(JSON.stringify(["CLOSE", subId]));
        this.check(p);
      }
    };

    const t0 = performance.now();
    await Promise.all(
      this.conns.map((conn) => {
        const pending = new Map<string, Pending>();
        conn.onFrame = (f) => this.onFrame(conn, pending, f);
        return Promise.all(Array.from({ length: inflight }, () => lane(conn, pending)));
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    const dead = this.conns.find((x) => x.closed);
    if (dead) this.failures.add("connection closed during queries", `${dead.name} code ${dead.closeCode}`);
    if (next < reqs.length) this.failures.add("REQs not sent", `${reqs.length - next} of ${reqs.length}`);
    return {
      reqs: latencies.length,
      conns: c,
      inflight,
      seconds,
      reqsPerSec: latencies.length / seconds,
      latencyMs: summarize(latencies),
      byType: Object.fromEntries(QUERY_TYPES.map((t) => [t, summarize(byType.get(t)!)])) as Record<QueryType, Summary>,
      eventsReturned: this.eventsReturned,
    };
  }

  private onFrame(conn: Conn, pending: Map<string, Pending>, f: RelayFrame): void {
    switch (f[0]) {
      case "EVENT": {
        const p = pending.get(f[1] as string);
        if (!p) return this.failures.add("EVENT for no open REQ", `${conn.name}: ${JSON.stringify(f).slice(0, 200)}`);
        this.eventsReturned++;
        p.events.push(f[2] as BenchEvent);
        return;
      }
      case "EOSE": {
        const p = pending.get(f[1] as string);
        if (!p) return this.failures.add("EOSE for no open REQ", `${conn.name}: ${JSON.stringify(f)}`);
        pending.delete(p.subId);
        return p.done();
      }
      case "CLOSED": {
        const p = pending.get(f[1] as string);
        this.failures.add("CLOSED instead of EOSE", `${conn.name}: ${JSON.stringify(f)}${p ? ` for ${JSON.stringify(p.req.filter)}` : ""}`);
        if (p) pending.delete(p.subId), p.done();
        return;
      }
      case "AUTH":
        return;
      default:
        return this.failures.add("unexpected frame during queries", `${conn.name}: ${JSON.stringify(f).slice(0, 200)}`);
    }
  }

  /** Validates one answer; wrong results are failures. */
  private check(p: Pending): void {
    const { req, events } = p;
    const label = `${p.subId} ${JSON.stringify(req.filter)}`;
    const { corpus, exact } = this.opts;
    const seen = new Set<string>();
    for (const e of events) {
      if (seen.has(e.id)) this.failures.add(`${req.type}: event returned twice`, `${label}: ${e.id}`);
      seen.add(e.id);
      if (!req.matches(e)) this.failures.add(`${req.type}: event does not match the filter`, `${label}: got ${JSON.stringify(e).slice(0, 200)}`);
      const i = corpus.byId.get(e.id);
      if (i !== undefined && !sameEvent(e, corpus.events[i]!)) this.failures.add(`${req.type}: event differs from what was published`, `${label}: ${e.id}`);
    }
    for (let k = 1; k < events.length; k++)
      if (newestFirst(events[k - 1]!, events[k]!) > 0) {
        this.failures.add(`${req.type}: events not newest-first`, `${label}: position ${k}`);
        break;
      }
    const limit = typeof req.filter.limit === "number" ? req.filter.limit : Infinity;
    if (events.length > limit) this.failures.add(`${req.type}: more events than the limit`, `${label}: ${events.length}`);
    if (this.opts.allStored && events.length < Math.min(limit, req.expected.length))
      this.failures.add(`${req.type}: fewer events than stored`, `${label}: got ${events.length}, the corpus has ${req.expected.length}`);
    if (req.type === "ids" && (events.length !== 1 || events[0]!.id !== req.expected[0]!.id))
      this.failures.add("ids: not exactly the requested event", `${label}: got ${events.length} event(s) ${events.map((e) => e.id.slice(0, 12)).join(",")}`);
    if (exact) {
      const got = events.map((e) => e.id).join(",");
      const want = req.expected.map((e) => e.id).join(",");
      if (got !== want)
        this.failures.add(`${req.type}: not the expected events`, `${label}: got ${events.length} [${events.map((e) => e.id.slice(0, 8)).join(" ")}], want ${req.expected.length} [${req.expected.map((e) => e.id.slice(0, 8)).join(" ")}]`);
    }
  }

  async close(): Promise<void> {
    for (const conn of this.conns) for (const e of conn.errors) this.failures.add("bad frame during queries", e);
    await Promise.all(this.conns.map((x) => x.close()));
  }
}
