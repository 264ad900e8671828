// The web of trust as the registry asks it, many times a second: "is this pubkey in the graph?".
// Held compact, as typed arrays and never as strings or objects: a Set of 100,000 hex strings
// costs ~100 bytes a pubkey and a GC walk over each; here a pubkey is 39 bytes (its 32 bytes in
// one sorted array, the index of who brought it in, its depth and its in-graph followers) that
// the GC does not walk. Immutable once built: a rebuild makes a new graph and swaps it whole.
import { isHex64 } from "../protocol/event.ts";

/** `parent` of a seed: no one brought it in. */
const NO_PARENT = 0xffffffff;
/** Followers are counted up to this (Uint16Array). */
const MAX_FOLLOWERS = 0xffff;

export class TrustGraph {
  /** Pubkeys in the graph. */
  readonly size: number;
  /** A 32-byte buffer reused by every lookup (the graph is read on one thread). */
  private readonly probe = Buffer.alloc(32);

  /** Built by TrustGraphBuilder.build(). */
  constructor(
    /** n x 32 bytes, in byte order. */
    private readonly keys: Uint8Array,
    /** For each pubkey, the index of the one whose follow list brought it in; NO_PARENT for a seed. */
    private readonly parent: Uint32Array,
    private readonly depths: Uint8Array,
    /** Followers inside the graph (seeds and read follow lists), saturating. */
    private readonly followerCounts: Uint16Array,
  ) {
    this.size = depths.length;
  }

  static empty(): TrustGraph {
    return new TrustGraph(new Uint8Array(0), new Uint32Array(0), new Uint8Array(0), new Uint16Array(0));
  }

  /** Bytes the graph's arrays hold (the gauge bunstr_wot_graph_bytes). */
  get bytes(): number {
    return this.keys.byteLength + this.parent.byteLength + this.depths.byteLength + this.followerCounts.byteLength;
  }

  has(pubkey: string): boolean {
    return this.indexOf(pubkey) >= 0;
  }

  /** Depth (0 a seed, 1 followed by a seed, 2 ...), or undefined outside the graph. */
  depth(pubkey: string): number | undefined {
    const i = this.indexOf(pubkey);
    return i < 0 ? undefined : this.depths[i];
  }

  /** In-graph followers (saturating at 65,535), or undefined outside the graph. */
  followers(pubkey: string): number | undefined {
    const i = this.indexOf(pubkey);
    return i < 0 ? undefined : this.followerCounts[i];
  }

  /** How the pubkey came in: a seed, the pubkeys whose follow lists led to it, the pubkey itself; undefined outside. */
  path(pubkey: string): string[] | undefined {
    let i = this.indexOf(pubkey);
    if (i < 0) return undefined;
    const out: string[] = [];
    // A parent is always one depth up, so this ends within depth + 1 steps; the bound is a guard.
    for (let steps = 0; i !== NO_PARENT && steps <= 255; steps++) {
      out.push(this.keyAt(i));
      i = this.parent[i]!;
    }
    return out.reverse();
  }

  /** The pubkeys at a depth, in byte order. */
  *keysAtDepth(depth: number): Generator<string> {
    for (let i = 0; i < this.size; i++) if (this.depths[i] === depth) yield this.keyAt(i);
  }

  /** The pubkey at an index (0 <= i < size), in byte order: for listing the graph a page at a time. */
  keyAt(i: number): string {
    return Buffer.from(this.keys.buffer, this.keys.byteOffset + i * 32, 32).toString("hex");
  }

  /** Index of the pubkey in byte order, or -1: a binary search (17 steps at 100,000). */
  private indexOf(pubkey: string): number {
    // Buffer.write stops at the first pair that is not hex: 32 bytes written is 64 hex digits
    // (either case: a pubkey the relay received is lowercase already).
    const probe = this.probe;
    if (pubkey.length !== 64 || probe.write(pubkey, 0, 32, "hex") !== 32) return -1;
    const keys = this.keys;
    let lo = 0;
    let hi = this.size - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const c = compareAt(keys, mid * 32, probe);
      if (c === 0) return mid;
      if (c < 0) lo = mid + 1;
      else hi = mid - 1;
    }
    return -1;
  }
}

/** keys[at, at + 32) against probe, bytewise. */
function compareAt(keys: Uint8Array, at: number, probe: Uint8Array): number {
  for (let j = 0; j < 32; j++) {
    const d = keys[at + j]! - probe[j]!;
    if (d !== 0) return d;
  }
  return 0;
}

/**
 * Gathers a graph in the order it is found (seeds, then depth 1, then depth 2), then sorts it
 * into a TrustGraph. Its Map and arrays are the build's only and are dropped with the builder.
 */
export class TrustGraphBuilder {
  private readonly index = new Map<string, number>();
  private readonly pubkeys: string[] = [];
  private readonly parents: number[] = [];
  private readonly depths: number[] = [];
  private readonly followerCounts: number[] = [];

  get size(): number {
    return this.pubkeys.length;
  }

  has(pubkey: string): boolean {
    return this.index.has(pubkey);
  }

  /** Depth of a pubkey added, or undefined. */
  depth(pubkey: string): number | undefined {
    const i = this.index.get(pubkey);
    return i === undefined ? undefined : this.depths[i];
  }

  /** The pubkeys added at a depth, in the order they came. */
  *keysAtDepth(depth: number): Generator<string> {
    for (let i = 0; i < this.pubkeys.length; i++) if (this.depths[i] === depth) yield this.pubkeys[i]!;
  }

  /**
   * Adds a pubkey (lowercase 64 hex) brought in by `parent` (a pubkey added before; undefined for
   * a seed), with the followers counted so far; false if it was already there or is not a pubkey.
   */
  add(pubkey: string, depth: number, parent?: string, followers = 0): boolean {
    if (this.index.has(pubkey) || !isHex64(pubkey)) return false;
    const p = parent === undefined ? NO_PARENT : this.index.get(parent);
    if (p === undefined) throw new Error(`wot: the parent of ${pubkey} is not in the graph`);
    this.index.set(pubkey, this.pubkeys.length);
    this.pubkeys.push(pubkey);
    this.parents.push(p);
    this.depths.push(depth);
    this.followerCounts.push(Math.min(followers, MAX_FOLLOWERS));
    return true;
  }

  /** One more in-graph follower of a pubkey already added (no-op otherwise). */
  followed(pubkey: string): void {
    const i = this.index.get(pubkey);
    if (i !== undefined && this.followerCounts[i]! < MAX_FOLLOWERS) this.followerCounts[i]!++;
  }

  build(): TrustGraph {
    const n = this.pubkeys.length;
    // Lowercase hex sorts as its bytes do; the native sort of strings is some 3 times faster at
    // 100,000 than a comparator over indices, and this runs on the relay's main thread.
    const sorted = this.pubkeys.slice().sort();
    const order = new Uint32Array(n);
    const rank = new Uint32Array(n);
    for (let r = 0; r < n; r++) {
      const i = this.index.get(sorted[r]!)!;
      order[r] = i;
      rank[i] = r;
    }
    const keys = Buffer.alloc(n * 32);
    const parent = new Uint32Array(n);
    const depths = new Uint8Array(n);
    const followers = new Uint16Array(n);
    for (let r = 0; r < n; r++) {
      const i = order[r]!;
      keys.write(sorted[r]!, r * 32, 32, "hex");
      const p = this.parents[i]!;
      parent[r] = p === NO_PARENT ? NO_PARENT : rank[p]!;
      depths[r] = this.depths[i]!;
      followers[r] = this.followerCounts[i]!;
    }
    // Buffer.alloc is never a slice of the shared pool: the view holds exactly n x 32 bytes.
    return new TrustGraph(new Uint8Array(keys.buffer, keys.byteOffset, keys.length), parent, depths, followers);
  }
}
