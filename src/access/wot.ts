// The web of trust engine (issue 33): who the owner follows, and with depth 2 who
// they follow, read from the kind-3 follow lists in the relay's own store and kept as a compact
// TrustGraph (wot-graph.ts). The registry asks `has` for the `trusted` basis, synchronously; a
// rebuild reads the store and swaps the graph whole, so a lookup never sees half a graph.
// Rebuilt on a schedule (relay/wot-refresh.ts, which first fetches follow lists from the relays
// the config names) and ~1 s after a follow list that shapes the graph is committed, so being
// followed by the owner lets a pubkey write within about a second.
import { log } from "../log.ts";
import type { Config } from "../config/schema.ts";
import { isHex64, type NostrEvent } from "../protocol/event.ts";
import { nowSeconds } from "../protocol/event.ts";
import type { Store } from "../store/types.ts";
import type { TrustEngine } from "./registry.ts";
import { TrustGraph, TrustGraphBuilder } from "./wot-graph.ts";

export const FOLLOW_LIST_KIND = 3;
/** Authors per read of follow lists (one filter each). */
const AUTHORS_PER_READ = 500;
/** After a follow list that shapes the graph is committed, the rebuild waits this long for more. */
const REBUILD_DEBOUNCE_MS = 1000;
/**
 * Rebuilds asked for by commits are at least this many build times apart, counting this thread's
 * part of a build (not the wait for the store's reader): a depth-1 author publishing a follow
 * list every second cannot keep the main thread building (a 100,000-pubkey graph takes ~0.5 s,
 * so those rebuilds come at most every ~5 s; a small graph's after the debounce alone).
 */
const BUILD_TIMES_APART = 10;
/**
 * Depth 2: most pubkeys one depth-1 author may bring in that no author before it named (issue 33 review
 * L7): with min_followers = 1 a single follow list of sybils would otherwise fill the graph. A
 * pubkey others follow too still comes in through them.
 */
export const MAX_NEW_PER_FOLLOWER = 500;
/** Depth 2: distinct pubkeys counted, at most this many times the room left (the counts are cut to the room after). */
const COUNTED_PER_ROOM = 2;
/** A build that failed (a store error) is tried again after this long. */
const RETRY_MS = 10_000;

/** What a build reads of the config ([web_of_trust]). */
export interface WotSettings {
  /** The graph's roots (depth 0): `[web_of_trust] seeds`, else the operator's `[info] pubkey`. */
  seeds: readonly string[];
  /** 1: the seeds' follows; 2: also who those follow. */
  depth: number;
  /** Depth 2 only: followers among the depth-1 pubkeys a pubkey needs to come in. */
  min_followers: number;
  /** The graph stops here (seeds, then depth 1, then depth 2 most followed first). */
  max_pubkeys: number;
}

/** The settings of a build from the config: the seeds, else the operator's pubkey. */
export function wotSettings(c: Config): WotSettings {
  const { seeds, depth, min_followers, max_pubkeys } = c.web_of_trust;
  return { seeds: seeds.length > 0 ? seeds : c.info.pubkey ? [c.info.pubkey] : [], depth, min_followers, max_pubkeys };
}

/** The store as a build reads it. */
export type FollowStore = Pick<Store, "query" | "lastSeq">;

export interface BuiltGraph {
  graph: TrustGraph;
  /** Pubkeys that max_pubkeys left out. */
  cut: number;
  /** Time spent waiting for the store's reads (a reader thread's work, not this thread's). */
  readSeconds: number;
}

/**
 * One build: seeds -> their follow lists -> depth 1 -> (depth 2) their follow lists -> depth 2,
 * kept with min_followers (each depth-1 list naming at most MAX_NEW_PER_FOLLOWER pubkeys no list
 * before it named, and at most twice the room left counted). The follow list of a pubkey is its newest stored kind 3; its p tags
 * that are 64 lowercase hex are the pubkeys it follows.
 */
export async function buildTrustGraph(store: FollowStore, s: WotSettings): Promise<BuiltGraph> {
  const b = new TrustGraphBuilder();
  let cut = 0;
  const reads = { seconds: 0 };
  const room = () => s.max_pubkeys - b.size;
  for (const seed of s.seeds) if (room() > 0) b.add(seed, 0);
  const seeds = s.seeds.filter((k) => b.depth(k) === 0);
  // Depth 1: whom the seeds follow; a seed followed by a seed stays a seed, counted as followed.
  await forEachFollowList(store, reads, seeds, (author, follows) => {
    for (const p of follows) {
      if (b.has(p)) b.followed(p);
      else if (room() > 0) b.add(p, 1, author, 1);
      else cut++;
    }
  });
  if (s.depth < 2) return { graph: b.build(), cut, readSeconds: reads.seconds };
  // Depth 2: counted first (min_followers), added after.
  const depth1 = [...b.keysAtDepth(1)];
  const counts = new Map<string, number>();
  const firstParent = new Map<string, string>();
  const maxCounted = COUNTED_PER_ROOM * Math.max(0, room());
  await forEachFollowList(store, reads, depth1, (author, follows) => {
    let fresh = 0;
    for (const p of follows) {
      if (b.has(p)) b.followed(p);
      else if (counts.has(p)) counts.set(p, counts.get(p)! + 1);
      else if (counts.size >= maxCounted) cut++;
      else if (fresh < MAX_NEW_PER_FOLLOWER) {
        fresh++;
        counts.set(p, 1);
        firstParent.set(p, author);
      }
    }
  });
  const kept: string[] = [];
  for (const [p, n] of counts) if (n >= s.min_followers) kept.push(p);
  if (kept.length > room()) {
    kept.sort((x, y) => counts.get(y)! - counts.get(x)!);
    cut += kept.length - room();
    kept.length = Math.max(0, room());
  }
  for (const p of kept) b.add(p, 2, firstParent.get(p), counts.get(p));
  return { graph: b.build(), cut, readSeconds: reads.seconds };
}

/**
 * Calls `each` once per author with a stored follow list (its newest), with the distinct pubkeys
 * it follows (64 lowercase hex, not the author). Reads AUTHORS_PER_READ authors at a time; the
 * time spent waiting for them is added to `reads`.
 */
async function forEachFollowList(
  store: FollowStore,
  reads: { seconds: number },
  authors: readonly string[],
  each: (author: string, follows: Set<string>) => void,
): Promise<void> {
  const seen = new Set<string>();
  for (let i = 0; i < authors.length; i += AUTHORS_PER_READ) {
    const chunk = authors.slice(i, i + AUTHORS_PER_READ);
    const job = {
      filters: [{ kinds: [FOLLOW_LIST_KIND], authors: chunk }],
      limits: [chunk.length],
      maxSeq: store.lastSeq(),
      now: nowSeconds(),
    };
    const batches = store.query(job)[Symbol.asyncIterator]();
    for (;;) {
      const t0 = performance.now();
      const next = await batches.next();
      reads.seconds += (performance.now() - t0) / 1000;
      if (next.done) break;
      for (const json of next.value) {
        const e = JSON.parse(json) as NostrEvent;
        // Newest first: a second row of an author (a store keeping two) is older.
        if (seen.has(e.pubkey)) continue;
        seen.add(e.pubkey);
        each(e.pubkey, followsOf(e));
      }
    }
  }
}

/** The pubkeys a kind 3 follows: its p tags' values that are pubkeys, once each, not its author. */
function followsOf(e: NostrEvent): Set<string> {
  const out = new Set<string>();
  for (const t of e.tags) {
    const v = t[1];
    if (t[0] === "p" && v !== undefined && v !== e.pubkey && isHex64(v)) out.add(v);
  }
  return out;
}

export interface WebOfTrustOptions {
  /** Read at each build: a reload takes effect at the next one. */
  settings: () => WotSettings;
  /** Told after every build (metrics). */
  onBuilt?: (graph: TrustGraph, seconds: number) => void;
  log?: (line: string) => void;
  debounceMs?: number;
  /** True once the relay is closing: nothing more is built (its timers do not hold the process either). */
  closed?: () => boolean;
}

/** The engine: the current graph, rebuilt on demand, one build at a time. */
export class WebOfTrust implements TrustEngine {
  /** The graph lookups see; undefined until the first build. */
  private graph?: TrustGraph;
  /** The last build's duration, in seconds (the gauge bunstr_wot_build_seconds). */
  buildSeconds = 0;
  /** Of which on this thread (the build less the wait for the store's reads). */
  private ownSeconds = 0;
  private building?: Promise<void>;
  /** Another build was asked for while one ran: it runs after, reading what committed since. */
  private again = false;
  private debounce?: ReturnType<typeof setTimeout>;
  private retry?: ReturnType<typeof setTimeout>;
  private lastCut = 0;
  /** performance.now() when the last build ended. */
  private builtAt = -Infinity;
  private stopped = false;

  constructor(
    private readonly store: FollowStore,
    private readonly options: WebOfTrustOptions,
  ) {}

  /** False until the first graph is built (the registry's `ready`; the policy's "loading" text). */
  get ready(): boolean {
    return this.graph !== undefined;
  }

  /** The graph as it is now (empty before the first build). */
  get current(): TrustGraph {
    return this.graph ?? EMPTY;
  }

  /** Pubkeys in the graph (the gauge bunstr_wot_graph_pubkeys; the registry's trusted count). */
  get size(): number {
    return this.current.size;
  }

  /** Bytes the graph holds (the gauge bunstr_wot_graph_bytes). */
  get bytes(): number {
    return this.current.bytes;
  }

  has(pubkey: string): boolean {
    return this.graph?.has(pubkey) ?? false;
  }

  /** How a pubkey came in (seed -> … -> pubkey) and its depth: the console's evidence. */
  path(pubkey: string): { path: string[]; depth: number } | undefined {
    const g = this.current;
    const path = g.path(pubkey);
    return path && { path, depth: path.length - 1 };
  }

  /** A page of the graph's pubkeys, in byte order (NIP-86 listadmissions, basis trusted). */
  pubkeys(offset: number, limit: number): string[] {
    const g = this.current;
    const out: string[] = [];
    for (let i = Math.max(0, offset); i < g.size && out.length < limit; i++) out.push(g.keyAt(i));
    return out;
  }

  /**
   * Builds a new graph from the store and swaps it in; resolves when a build that started after
   * this call has finished (a call during a build waits for the one after it).
   */
  rebuild(): Promise<void> {
    if (this.building) {
      this.again = true;
      return this.building.then(() => this.building ?? Promise.resolve());
    }
    this.building = this.buildOnce().finally(() => {
      this.building = undefined;
      if (this.again && !this.halted) {
        this.again = false;
        void this.rebuild();
      }
    });
    return this.building;
  }

  /**
   * The commit feed: a follow list that shapes the graph (a seed's, or with depth 2 a depth-1
   * pubkey's) asks for a rebuild in debounceMs, so a burst of them is read once.
   */
  committed(e: NostrEvent): void {
    if (e.kind !== FOLLOW_LIST_KIND || this.halted) return;
    const s = this.options.settings();
    const d = this.graph?.depth(e.pubkey);
    const shapes = s.seeds.includes(e.pubkey) || (s.depth >= 2 && d === 1);
    if (!shapes || this.debounce) return;
    const spacing = BUILD_TIMES_APART * this.ownSeconds * 1000 - (performance.now() - this.builtAt);
    this.debounce = setTimeout(
      () => {
        this.debounce = undefined;
        void this.rebuild();
      },
      Math.max(this.options.debounceMs ?? REBUILD_DEBOUNCE_MS, spacing),
    );
    this.debounce.unref();
  }

  private get halted(): boolean {
    return this.stopped || (this.options.closed?.() ?? false);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.debounce);
    clearTimeout(this.retry);
  }

  private async buildOnce(): Promise<void> {
    if (this.halted) return;
    const say = this.options.log ?? ((line: string) => log.info(line));
    const t0 = performance.now();
    let built: BuiltGraph;
    try {
      built = await buildTrustGraph(this.store, this.options.settings());
    } catch (e) {
      // The old graph stays; a store that is closing is not a failure worth a retry.
      if (this.halted) return;
      say(`wot: the graph could not be built (${(e as Error).message}); trying again in ${RETRY_MS / 1000} s`);
      clearTimeout(this.retry);
      this.retry = setTimeout(() => void this.rebuild(), RETRY_MS);
      this.retry.unref();
      return;
    }
    this.graph = built.graph;
    this.builtAt = performance.now();
    this.buildSeconds = (this.builtAt - t0) / 1000;
    this.ownSeconds = Math.max(0, this.buildSeconds - built.readSeconds);
    if (built.cut !== this.lastCut && built.cut > 0)
      say(`wot: the graph stops at [web_of_trust] max_pubkeys = ${built.graph.size}; ${built.cut} pubkeys left out`);
    this.lastCut = built.cut;
    this.options.onBuilt?.(built.graph, this.buildSeconds);
  }
}

const EMPTY = TrustGraph.empty();
