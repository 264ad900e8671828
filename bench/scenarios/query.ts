// Query: the REQ mix of a client app (feed, thread, profile, hashtag, ids), seeded so every run
// sends the same REQs, over a few connections with bounded concurrency; REQ -> EOSE latency;
// every answer checked against the in-memory oracle (lib/oracle.ts).
//
// Phases: first the mix (R REQs, types drawn by MIX weights), then each type alone (`perType`
// REQs each), so each type gets its own REQs/s and relay CPU per 1k REQs.
import { BASE_CREATED_AT, type BenchEvent, type Corpus } from "../corpus.ts";
import { connectAll, type Conn, type RelayFrame } from "../lib/conn.ts";
import { naiveMatch, naiveOf, nip01Order, type Naive, type RawFilter } from "../lib/match.ts";
import type { Oracle } from "../lib/oracle.ts";
import { threadCpuDelta } from "../lib/relay.ts";
import { Failures, prng, summarize, type Summary } from "../lib/stats.ts";

export const QUERY_TYPES = ["feed", "thread", "profile", "hashtag", "ids"] as const;
export type QueryType = (typeof QUERY_TYPES)[number];
/** Shares of the mix. */
export const MIX: Record<QueryType, number> = { feed: 0.3, thread: 0.2, profile: 0.2, hashtag: 0.15, ids: 0.15 };

/**
 * The REQ shapes: "app" (the default: the table in bench/README.md) or "issue15", the mix issue 15
 * measured bunstr and strfry with, one filter per REQ: feed 35 % (`authors` 50 pubkeys drawn Zipf
 * by activity, `kinds [1,6]`, `limit 50`), thread 20 % (`#e` of a replied-to note, `limit 200`),
 * profile 20 % (`kinds [0]`, one author), hashtag 15 % (`#t`, `limit 100`), ids 10 % (10 stored
 * ids + 1 nobody published).
 */
export const MIX_NAMES = ["app", "issue15"] as const;
export type MixName = (typeof MIX_NAMES)[number];
const SHARES: Record<MixName, Record<QueryType, number>> = {
  app: MIX,
  issue15: { feed: 0.35, thread: 0.2, profile: 0.2, hashtag: 0.15, ids: 0.1 },
};

export interface QueryOptions {
  url: string;
  corpus: Corpus;
  /** Holds the corpus (fed in order): source of the requests and of the expected answers. */
  oracle: Oracle;
  /** REQs in the mix. */
  reqs: number;
  /** REQs of each type alone after the mix (0: no per-type phases). */
  perType: number;
  conns: number;
  /** REQs in flight per connection. */
  inflight: number;
  /**
   * The relay holds exactly the corpus (we started it on an empty database and every event was
   * acknowledged as expected): answers must be exactly the oracle's, in order, byte for byte.
   * Otherwise they only have to match their filters (and be what we published, if ours).
   */
  exact: boolean;
  seed: number;
  /** The REQ shapes (default "app"). */
  mix?: MixName;
  /**
   * Accept an answer that differs from the oracle's only in how events with the same created_at
   * are ordered, or which of them make the cut at the limit (NIP-01 asks for lowest id first; a
   * relay that orders ties by arrival, as strfry does, differs there and nowhere else). Such answers
   * are counted (QueryResult.tieOnly), not failed.
   */
  looseTies?: boolean;
  /** A REQ without EOSE after this long fails. */
  timeoutMs: number;
  /**
   * Check the answers after each phase instead of as they arrive: the same checks, off the timed
   * window, so the generator takes less of the cores the relay shares with it while it is measured.
   */
  checkAfter?: boolean;
  /** Relay CPU seconds so far (for CPU per 1k REQs per phase); undefined for an external relay. */
  cpu?: () => number;
  /** The relay's threads' CPU seconds so far (bench/lib/relay.ts threadCpuSeconds), for the split by thread. */
  threads?: () => Map<number, { name: string; cpu: number }>;
  /** Each REQ -> EOSE time of the mix, in ms, as it is measured (e.g. to pool runs). */
  onLatency?: (ms: number, type: QueryType) => void;
  log?: (msg: string) => void;
}

export interface PhaseResult {
  reqs: number;
  seconds: number;
  reqsPerSec: number;
  /** REQ sent -> EOSE received, ms. */
  latencyMs: Summary;
  /** Relay CPU seconds per 1,000 REQs (null: external relay). */
  cpuPer1kReqs: number | null;
  /**
   * This load generator's own CPU seconds per 1,000 REQs over the same span (sending, parsing and
   * checking the answers; not building them). On a box it shares with the relay, a closed loop's
   * REQs/s is bounded by cores / (relay + generator CPU per REQ). Absent in older records.
   */
  generatorCpuPer1kReqs?: number;
  /** The relay's CPU seconds per 1,000 REQs by thread name ("main", "Worker", "JITWorker", ...), largest first. */
  cpuPer1kByThread?: [string, number][];
  /** EVENT frames received. */
  eventsReturned: number;
}

export interface QueryResult {
  conns: number;
  inflight: number;
  /** The mix, all types together. */
  mix: PhaseResult & { byType: Record<QueryType, Summary> };
  /** Each type alone; absent when perType is 0. */
  alone?: Record<QueryType, PhaseResult>;
  /** Oracle answer sizes per type in the mix: mean events per REQ (to see what is being asked). */
  expectedMean: Record<QueryType, number>;
  /** The REQ shapes used. */
  mixName: MixName;
  /** With looseTies: answers that differed from the oracle's only in the order or cut of created_at ties. */
  tieOnly: number;
}

export interface Req {
  n: number;
  type: QueryType;
  filters: RawFilter[];
  naive: Naive[];
  /** The oracle's answer, nip01Order. */
  expected: BenchEvent[];
}

interface Material {
  followLists: string[][];
  /** Thread roots with replies, most replied first; then all other roots. */
  hotRoots: string[];
  roots: string[];
  authors: string[];
  topics: string[];
  span: number;
  /** Authors of notes and reposts, most active first (for Zipf draws). */
  byActivity: string[];
  /** Cumulative Zipf (s = 1) weights over byActivity. */
  activityCdf: Float64Array;
}

const materials = new WeakMap<Oracle, Material>();

/** What the requests are made of, from the oracle's stored events (sorted: the same every run). */
function material(oracle: Oracle, corpus: Corpus): Material {
  let m = materials.get(oracle);
  if (!m) materials.set(oracle, (m = computeMaterial(oracle, corpus)));
  return m;
}

function computeMaterial(oracle: Oracle, corpus: Corpus): Material {
  const followLists = oracle
    .ofKind(3)
    .map((e) => [...new Set(e.tags.filter((t) => t[0] === "p" && t[1]).map((t) => t[1]!))])
    .filter((l) => l.length > 0);
  const replies = new Map<string, number>();
  for (const e of oracle.ofKind(1))
    for (const t of e.tags)
      if (t[0] === "e" && t[3] === "root" && t[1]) {
        replies.set(t[1], (replies.get(t[1]) ?? 0) + 1);
        break;
      }
  const roots = [...replies].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).map(([id]) => id);
  const activity = new Map<string, number>();
  for (const k of [1, 6]) for (const e of oracle.ofKind(k)) activity.set(e.pubkey, (activity.get(e.pubkey) ?? 0) + 1);
  const byActivity = [...activity].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).map(([pk]) => pk);
  const activityCdf = new Float64Array(byActivity.length);
  let sum = 0;
  for (let k = 0; k < byActivity.length; k++) activityCdf[k] = sum += 1 / (k + 1);
  for (let k = 0; k < byActivity.length; k++) activityCdf[k]! /= sum;
  return {
    byActivity,
    activityCdf,
    followLists,
    hotRoots: roots.slice(0, 200),
    roots,
    authors: oracle.authors().sort(),
    topics: oracle.tagValues("t").sort(),
    span: Math.max(1, Math.floor(corpus.size / 3)),
  };
}

/** The deterministic requests: `count` of the mix (type undefined) or of one type. */
export function buildRequests(oracle: Oracle, corpus: Corpus, count: number, seed: number, only?: QueryType, mix: MixName = "app"): Req[] {
  const m = material(oracle, corpus);
  const rand = prng(seed);
  const cdf = QUERY_TYPES.map(
    (
      (sum) => (t: QueryType) =>
        (sum += SHARES[mix][t])
    )(0),
  );
  const reqs: Req[] = [];
  for (let n = 0; n < count; n++) {
    const u = rand();
    const type =
      only ??
      QUERY_TYPES[
        Math.max(
          0,
          cdf.findIndex((c) => u < c),
        )
      ]!;
    const filters = mix === "issue15" ? issue15Filters(type, m, corpus, oracle, rand) : appFilters(type, m, corpus, rand);
    reqs.push({ n, type, filters, naive: filters.map(naiveOf), expected: oracle.keepEvents ? oracle.answer(filters) : [] });
  }
  return reqs;
}

/** A REQ of the issue-15 mix (see MIX_NAMES). */
function issue15Filters(type: QueryType, m: Material, corpus: Corpus, oracle: Oracle, rand: () => number): RawFilter[] {
  const int = (n: number) => Math.floor(rand() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
  const zipfAuthor = (): string => {
    const u = rand();
    let lo = 0;
    let hi = m.activityCdf.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (m.activityCdf[mid]! > u) hi = mid;
      else lo = mid + 1;
    }
    return m.byActivity[lo]!;
  };
  switch (type) {
    case "feed": {
      const authors = new Set<string>();
      const want = Math.min(50, m.byActivity.length);
      while (authors.size < want) authors.add(zipfAuthor());
      return [{ authors: [...authors], kinds: [1, 6], limit: 50 }];
    }
    case "thread": {
      const pool = rand() < 0.6 && m.hotRoots.length ? m.hotRoots : m.roots;
      return [{ "#e": [pool.length ? pick(pool) : corpus.event(int(corpus.size)).id], limit: 200 }];
    }
    case "profile":
      return [{ kinds: [0], authors: [rand() < 0.5 ? pick(m.authors) : corpus.event(int(corpus.size)).pubkey] }];
    case "hashtag": {
      let topic: string | undefined;
      for (let tries = 0; topic === undefined && tries < 50; tries++)
        topic = corpus.event(int(corpus.size)).tags.find((t) => t[0] === "t")?.[1];
      return [{ "#t": [topic ?? pick(m.topics)], limit: 100 }];
    }
    case "ids": {
      const ids = new Set<string>();
      for (let tries = 0; ids.size < 10 && tries < 1000; tries++) {
        const id = corpus.id(int(corpus.size));
        if (!oracle.isGone(id)) ids.add(id);
      }
      ids.add(
        int(2 ** 31)
          .toString(16)
          .padStart(64, "f"),
      );
      return [{ ids: [...ids] }];
    }
  }
}

/** A REQ of the default mix (bench/README.md). */
function appFilters(type: QueryType, m: Material, corpus: Corpus, rand: () => number): RawFilter[] {
  const int = (n: number) => Math.floor(rand() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
  /** A random corpus event: popular authors and topics come up as often as they are written. */
  const anyEvent = (): BenchEvent => corpus.event(int(corpus.size));
  {
    let filters: RawFilter[];
    switch (type) {
      case "feed": {
        const f: RawFilter = { kinds: [1, 6], authors: m.followLists.length ? pick(m.followLists) : [anyEvent().pubkey], limit: 50 };
        const w = rand();
        if (w < 0.3) {
          // Scrolled back: events up to a moment, sometimes only from a window before it.
          const until = BASE_CREATED_AT + int(m.span);
          f.until = until;
          if (w < 0.15) f.since = until - Math.max(60, int(m.span / 10));
        }
        filters = [f];
        break;
      }
      case "thread": {
        const pool = rand() < 0.6 && m.hotRoots.length ? m.hotRoots : m.roots;
        let root = pool.length ? pick(pool) : anyEvent().id;
        if (rand() < 0.1) root = anyEvent().id; // any event as a thread, often without replies
        filters = [{ ids: [root] }, { "#e": [root], kinds: [1, 7] }];
        break;
      }
      case "profile": {
        const x = rand() < 0.5 ? pick(m.authors) : anyEvent().pubkey;
        filters = [
          { kinds: [0], authors: [x] },
          { kinds: [1], authors: [x], limit: 20 },
        ];
        break;
      }
      case "hashtag": {
        let topic = rand() < 0.3 ? pick(m.topics) : undefined;
        for (let tries = 0; topic === undefined && tries < 50; tries++) topic = anyEvent().tags.find((t) => t[0] === "t")?.[1];
        filters = [{ "#t": [topic ?? pick(m.topics)], limit: 20 }];
        break;
      }
      case "ids": {
        // Any corpus events, replaced versions included (those must not come back), and now and
        // then an id nobody published.
        const ids = new Set<string>();
        for (let k = 1 + int(10); k > 0; k--) ids.add(corpus.id(int(corpus.size)));
        if (rand() < 0.1)
          ids.add(
            int(2 ** 31)
              .toString(16)
              .padStart(64, "f"),
          );
        filters = [{ ids: [...ids] }];
        break;
      }
    }
    return filters;
  }
}

interface Pending {
  req: Req;
  subId: string;
  sentAt: number;
  events: BenchEvent[];
  done: () => void;
}

const sameEvent = (a: BenchEvent, b: BenchEvent): boolean =>
  a.id === b.id &&
  a.pubkey === b.pubkey &&
  a.created_at === b.created_at &&
  a.kind === b.kind &&
  a.content === b.content &&
  a.sig === b.sig &&
  JSON.stringify(a.tags) === JSON.stringify(b.tags);

const short = (id: string) => id.slice(0, 8);

/** Filters for a failure message: long hex shortened, long lists cut ("… +97"). */
const brief = (filters: RawFilter[]): string =>
  JSON.stringify(filters, (_, v: unknown) =>
    Array.isArray(v) && v.length > 3
      ? [...v.slice(0, 3), `… +${v.length - 3}`]
      : typeof v === "string" && /^[0-9a-f]{64}$/.test(v)
        ? `${v.slice(0, 8)}…`
        : v,
  );

/**
 * True when `got` differs from the oracle's `want` only among events with the same created_at: the
 * same created_at sequence; the same events at every created_at but the oldest one; and at the
 * oldest, the same events too unless the answer was cut by its limit (`cap` events), when any of
 * the stored events at that second may make the cut (each got event was already checked to match
 * a filter; here it must also be one the oracle stores).
 */
function onlyTiesDiffer(got: readonly BenchEvent[], want: readonly BenchEvent[], cap: number, stored: (id: string) => boolean): boolean {
  if (got.length !== want.length) return false;
  for (let k = 0; k < got.length; k++) if (got[k]!.created_at !== want[k]!.created_at) return false;
  if (got.length === 0) return true;
  const last = want[want.length - 1]!.created_at;
  const cut = want.length >= cap;
  const wantIds = new Set(want.map((e) => e.id));
  for (const e of got) {
    const free = cut && e.created_at === last;
    if (free ? !stored(e.id) : !wantIds.has(e.id)) return false;
  }
  return true;
}

export class QueryRun {
  readonly failures = new Failures();
  private conns: Conn[] = [];
  private readonly pending = new Map<Conn, Map<string, Pending>>();
  private subs = 0;
  private tieOnly = 0;

  constructor(private readonly opts: QueryOptions) {}

  async run(): Promise<QueryResult> {
    const { corpus, oracle, conns: c, inflight, seed, perType } = this.opts;
    const log = this.opts.log ?? (() => {});
    const t0 = performance.now();
    const mixName = this.opts.mix ?? "app";
    const mixReqs = buildRequests(oracle, corpus, this.opts.reqs, seed, undefined, mixName);
    const aloneReqs = perType > 0 ? QUERY_TYPES.map((t, k) => buildRequests(oracle, corpus, perType, seed + 1 + k, t, mixName)) : [];
    log(
      `query: ${mixReqs.length + aloneReqs.reduce((a, r) => a + r.length, 0)} REQs and their oracle answers built in ${((performance.now() - t0) / 1000).toFixed(1)}s`,
    );
    this.conns = await connectAll(this.opts.url, c, "query-");
    for (const conn of this.conns) {
      const pending = new Map<string, Pending>();
      this.pending.set(conn, pending);
      conn.onFrame = (f) => this.onFrame(conn, pending, f);
    }

    const mixLatencies = new Map<QueryType, number[]>(QUERY_TYPES.map((t) => [t, []]));
    const mix = await this.phase(mixReqs, (r, ms) => {
      mixLatencies.get(r.type)!.push(ms);
      this.opts.onLatency?.(ms, r.type);
    });
    log(`query: mix ${mix.reqs} REQs in ${mix.seconds.toFixed(2)}s (${Math.round(mix.reqsPerSec)}/s)`);
    let alone: Record<QueryType, PhaseResult> | undefined;
    if (perType > 0) {
      alone = {} as Record<QueryType, PhaseResult>;
      for (const [k, t] of QUERY_TYPES.entries()) {
        alone[t] = await this.phase(aloneReqs[k]!);
        log(`query: ${t} alone, ${alone[t].reqs} REQs in ${alone[t].seconds.toFixed(2)}s (${Math.round(alone[t].reqsPerSec)}/s)`);
      }
    }
    const expectedMean = Object.fromEntries(
      QUERY_TYPES.map((t) => {
        const rs = mixReqs.filter((r) => r.type === t);
        return [t, rs.length ? rs.reduce((a, r) => a + r.expected.length, 0) / rs.length : NaN];
      }),
    ) as Record<QueryType, number>;
    return {
      conns: c,
      inflight,
      mix: {
        ...mix,
        byType: Object.fromEntries(QUERY_TYPES.map((t) => [t, summarize(mixLatencies.get(t)!)])) as Record<QueryType, Summary>,
      },
      alone,
      expectedMean,
      mixName,
      tieOnly: this.tieOnly,
    };
  }

  /** Sends `reqs` over all connections, `inflight` at a time each; checks every answer. */
  private async phase(reqs: Req[], onLatency?: (r: Req, ms: number) => void): Promise<PhaseResult> {
    const { inflight, timeoutMs } = this.opts;
    const latencies: number[] = [];
    let next = 0;
    let events = 0;
    /** With checkAfter: the answers, checked once the phase's clock and CPU are read. */
    const answered: Pending[] = [];
    const lane = async (conn: Conn) => {
      const pending = this.pending.get(conn)!;
      while (next < reqs.length && !conn.closed) {
        const req = reqs[next++]!;
        const subId = `q${this.subs++}`;
        const p: Pending = { req, subId, sentAt: 0, events: [], done: () => {} };
        const finished = new Promise<void>((resolve) => (p.done = resolve));
        pending.set(subId, p);
        p.sentAt = performance.now();
        conn.send(JSON.stringify(["REQ", subId, ...req.filters]));
        let timer: Timer | undefined;
        const timedOut = await Promise.race([
          finished.then(() => false),
          new Promise<boolean>((r) => (timer = setTimeout(() => r(true), timeoutMs))),
        ]);
        clearTimeout(timer);
        if (timedOut) {
          pending.delete(subId);
          this.failures.add("no EOSE", `${subId} ${brief(req.filters)} on ${conn.name}: nothing after ${timeoutMs} ms`);
          continue;
        }
        const ms = performance.now() - p.sentAt;
        latencies.push(ms);
        onLatency?.(req, ms);
        events += p.events.length;
        conn.send(JSON.stringify(["CLOSE", subId]));
        if (this.opts.checkAfter) answered.push(p);
        else this.check(p);
      }
    };
    const cpu0 = this.opts.cpu?.();
    const threads0 = this.opts.threads?.();
    const gen0 = process.cpuUsage();
    const t0 = performance.now();
    await Promise.all(this.conns.flatMap((conn) => Array.from({ length: inflight }, () => lane(conn))));
    const seconds = (performance.now() - t0) / 1000;
    const cpu1 = this.opts.cpu?.();
    const gen = process.cpuUsage(gen0);
    const threads1 = this.opts.threads?.();
    for (const p of answered) this.check(p);
    const dead = this.conns.find((x) => x.closed);
    if (dead) this.failures.add("connection closed during queries", `${dead.name} code ${dead.closeCode}`);
    if (next < reqs.length) this.failures.add("REQs not sent", `${reqs.length - next} of ${reqs.length}`);
    return {
      reqs: latencies.length,
      seconds,
      reqsPerSec: latencies.length / seconds,
      latencyMs: summarize(latencies),
      cpuPer1kReqs: cpu0 !== undefined && cpu1 !== undefined && latencies.length ? ((cpu1 - cpu0) / latencies.length) * 1000 : null,
      generatorCpuPer1kReqs: latencies.length ? (gen.user + gen.system) / 1e3 / latencies.length : undefined,
      cpuPer1kByThread:
        threads0 && threads1 && latencies.length
          ? threadCpuDelta(threads0, threads1).map(([name, cpu]) => [name, (cpu / latencies.length) * 1000])
          : undefined,
      eventsReturned: events,
    };
  }

  private onFrame(conn: Conn, pending: Map<string, Pending>, f: RelayFrame): void {
    switch (f[0]) {
      case "EVENT": {
        const p = pending.get(f[1] as string);
        if (!p) return this.failures.add("EVENT for no open REQ", `${conn.name}: ${JSON.stringify(f).slice(0, 200)}`);
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
        this.failures.add("CLOSED instead of EOSE", `${conn.name}: ${JSON.stringify(f)}${p ? ` for ${brief(p.req.filters)}` : ""}`);
        if (p) pending.delete(p.subId), p.done();
        return;
      }
      case "AUTH":
        return;
      default:
        return this.failures.add("unexpected frame during queries", `${conn.name}: ${JSON.stringify(f).slice(0, 200)}`);
    }
  }

  /** Validates one answer; every discrepancy is a failure. */
  private check(p: Pending): void {
    const { req, events } = p;
    const label = `${p.subId} ${brief(req.filters)}`;
    const { corpus, oracle, exact } = this.opts;
    const t = req.type;
    const seen = new Set<string>();
    for (const e of events) {
      if (seen.has(e.id)) this.failures.add(`${t}: event returned twice`, `${label}: ${e.id}`);
      seen.add(e.id);
      if (!req.naive.some((n) => naiveMatch(n, e)))
        this.failures.add(`${t}: event matches none of the filters`, `${label}: got ${JSON.stringify(e).slice(0, 200)}`);
      const i = corpus.byId.get(e.id);
      if (i !== undefined && !sameEvent(e, oracle.get(e.id) ?? corpus.event(i)))
        this.failures.add(
          `${t}: event differs from what was published`,
          `${label}: got ${JSON.stringify(e).slice(0, 300)}, published ${corpus.lines[i]!.slice(0, 300)}`,
        );
    }
    const loose = this.opts.looseTies === true;
    for (let k = 1; k < events.length; k++)
      if (loose ? events[k - 1]!.created_at < events[k]!.created_at : nip01Order(events[k - 1]!, events[k]!) > 0) {
        this.failures.add(
          `${t}: events not in NIP-01 order (newest first, ties by lowest id)`,
          `${label}: position ${k}: ${events[k - 1]!.created_at}/${short(events[k - 1]!.id)} before ${events[k]!.created_at}/${short(events[k]!.id)}`,
        );
        break;
      }
    const cap = oracle.limitsFor(req.filters).reduce((a, b) => a + b, 0);
    if (events.length > cap) this.failures.add(`${t}: more events than the limits allow`, `${label}: ${events.length} > ${cap}`);
    if (!exact) return;

    const got = events.map((e) => e.id);
    const want = req.expected.map((e) => e.id);
    if (got.join() === want.join()) return;
    if (loose && onlyTiesDiffer(events, req.expected, cap, (id) => oracle.get(id) !== undefined)) {
      this.tieOnly++;
      return;
    }
    const wantSet = new Set(want);
    const missing = want.filter((id) => !seen.has(id));
    const extra = got.filter((id) => !wantSet.has(id));
    const ctx = `${label}: got ${got.length}, oracle ${want.length}`;
    const describe = (id: string) => {
      const e = oracle.get(id) ?? (corpus.byId.has(id) ? corpus.event(corpus.byId.get(id)!) : undefined);
      return e
        ? `${short(id)}(kind ${e.kind}, ${e.created_at}${oracle.isGone(id) ? ", replaced/older version" : ""})`
        : `${short(id)}(not in the corpus)`;
    };
    if (missing.length)
      this.failures.add(
        `${t}: events missing (oracle has them)`,
        `${ctx}; missing ${missing.length}: ${missing.slice(0, 5).map(describe).join(" ")}`,
      );
    if (extra.length)
      this.failures.add(
        `${t}: extra events (oracle does not return them)`,
        `${ctx}; extra ${extra.length}: ${extra.slice(0, 5).map(describe).join(" ")}`,
      );
    if (!missing.length && !extra.length && got.length === want.length)
      this.failures.add(
        `${t}: same events, different order than the oracle`,
        `${ctx}; got [${got.slice(0, 8).map(short).join(" ")}] want [${want.slice(0, 8).map(short).join(" ")}]`,
      );
  }

  async close(): Promise<void> {
    for (const conn of this.conns) for (const e of conn.errors) this.failures.add("bad frame during queries", e);
    await Promise.all(this.conns.map((x) => x.close()));
  }
}
