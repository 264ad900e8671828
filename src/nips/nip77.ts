// NIP-77 negentropy syncing: the relay (non-initiator) side of Negentropy protocol V1 (0x61),
// range-based set reconciliation over (created_at, id) items.
// Pure: no Bun imports. Messages are stateless (timestamps are delta-coded per message), so one
// server object answers every NEG-MSG of a subscription; the relay keeps only the storage.
import { createHash } from "node:crypto";
import { isHex64 } from "../protocol/event.ts";
import {
  ByteReader,
  ByteWriter,
  decodeHex,
  equalBytes,
  FINGERPRINT_SIZE,
  ID_SIZE,
  INFINITY_BOUND,
  MODE_FINGERPRINT,
  MODE_SKIP,
  NegentropyError,
  toHex,
  ZERO_BOUND,
  type NegentropyBound,
} from "./nip77-wire.ts";

export { NegentropyError };

export const NEGENTROPY_VERSION = 0x61;
/** A mismatched range with fewer items than this is answered with its ids, not fingerprints. */
const BUCKETS = 16;
/** The reference implementation's floor: below it a single split could not fit in a frame. */
export const MIN_FRAME_SIZE_LIMIT = 4096;
/** Room kept for the closing fingerprint-to-infinity range (19 bytes) and some slack. */
const FRAME_SLACK = 200;
/** Upper bound on a range header: timestamp (8) + prefix length (1) + prefix (32) + mode (1) + count (8). */
const MAX_RANGE_HEADER = 64;

export interface NegentropyItem {
  timestamp: number;
  /** 64 lowercase hex characters */
  id: string;
}

/**
 * The items of one side, sorted by (timestamp, id). Insert, then seal once; sealing sorts and
 * precomputes prefix sums of the ids so any range's fingerprint costs O(1) additions.
 */
export class NegentropyStorage {
  private pendingTimestamps: number[] = [];
  private pendingIds: string[] = [];
  private sealedFlag = false;
  private timestamps: Float64Array = new Float64Array(0);
  private ids: Uint8Array = new Uint8Array(0);
  /** sums[8i..8i+8) = sum of ids[0..i) mod 2^256, as eight little-endian 32-bit limbs. */
  private sums: Uint32Array = new Uint32Array(8);

  static from(items: Iterable<NegentropyItem>): NegentropyStorage {
    const s = new NegentropyStorage();
    for (const it of items) s.insert(it.timestamp, it.id);
    return s.seal();
  }

  insert(timestamp: number, id: string): this {
    if (this.sealedFlag) throw new NegentropyError("storage already sealed");
    if (!Number.isSafeInteger(timestamp) || timestamp < 0) throw new NegentropyError(`bad timestamp ${timestamp}`);
    if (!isHex64(id)) throw new NegentropyError("id must be 64 lowercase hex characters");
    this.pendingTimestamps.push(timestamp);
    this.pendingIds.push(id);
    return this;
  }

  /** A sealed storage from packed items: timestamps[i] and ids[32i..32i+32), in any order. */
  static fromPacked(timestamps: ArrayLike<number>, ids: Uint8Array): NegentropyStorage {
    if (ids.length !== timestamps.length * ID_SIZE) throw new NegentropyError("ids must hold 32 bytes per timestamp");
    for (let i = 0; i < timestamps.length; i++)
      if (!Number.isSafeInteger(timestamps[i]) || timestamps[i]! < 0) throw new NegentropyError(`bad timestamp ${timestamps[i]}`);
    return new NegentropyStorage().sealRaw(timestamps, ids);
  }

  seal(): this {
    if (this.sealedFlag) throw new NegentropyError("storage already sealed");
    const n = this.pendingTimestamps.length;
    const raw = new Uint8Array(n * ID_SIZE);
    const rawView = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
    for (let i = 0; i < n; i++) rawView.write(this.pendingIds[i]!, i * ID_SIZE, ID_SIZE, "hex");
    return this.sealRaw(this.pendingTimestamps, raw);
  }

  private sealRaw(ts: ArrayLike<number>, raw: Uint8Array): this {
    if (this.sealedFlag) throw new NegentropyError("storage already sealed");
    const n = ts.length;
    // Sort indices, comparing the first four id bytes as a number before falling back to a
    // byte loop (ties there are rare for hashes).
    const head = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const o = i * ID_SIZE;
      head[i] = ((raw[o]! << 24) | (raw[o + 1]! << 16) | (raw[o + 2]! << 8) | raw[o + 3]!) >>> 0;
    }
    const cmp = (a: number, b: number) => ts[a]! - ts[b]! || head[a]! - head[b]! || compareIds(raw, a, raw, b);
    const order = new Uint32Array(n).map((_, i) => i);
    // Items packed by the store come sorted already: then one pass checks it and no sort runs.
    let sorted = true;
    for (let i = 1; i < n && sorted; i++) sorted = cmp(i - 1, i) <= 0;
    if (!sorted) order.sort(cmp);
    this.timestamps = new Float64Array(n);
    this.ids = new Uint8Array(n * ID_SIZE);
    for (let i = 0; i < n; i++) {
      const j = order[i]!;
      this.timestamps[i] = ts[j]!;
      this.ids.set(raw.subarray(j * ID_SIZE, (j + 1) * ID_SIZE), i * ID_SIZE);
      if (i > 0 && this.timestamps[i] === this.timestamps[i - 1] && compareIds(this.ids, i, this.ids, i - 1) === 0)
        throw new NegentropyError(`duplicate item ${Buffer.from(raw.subarray(j * ID_SIZE, (j + 1) * ID_SIZE)).toString("hex")}`);
    }
    this.sums = prefixSums(this.ids, n);
    this.pendingTimestamps = [];
    this.pendingIds = [];
    this.sealedFlag = true;
    return this;
  }

  get sealed(): boolean {
    return this.sealedFlag;
  }

  get size(): number {
    return this.timestamps.length;
  }

  /** The first index in [begin, end) whose item is not below the bound (end if none). */
  lowerBound(begin: number, end: number, bound: NegentropyBound): number {
    let lo = begin;
    let hi = end;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.itemBelow(mid, bound)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** First 16 bytes of sha256(sum of ids mod 2^256, little-endian || varint(count)). */
  fingerprint(begin: number, end: number): Uint8Array {
    if (!(0 <= begin && begin <= end && end <= this.size)) throw new NegentropyError(`bad range ${begin}..${end}`);
    const input = new ByteWriter(ID_SIZE + 8);
    const slot = input.reserve(ID_SIZE);
    const view = new DataView(slot.buffer, slot.byteOffset, ID_SIZE);
    let borrow = 0;
    for (let j = 0; j < 8; j++) {
      let limb = this.sums[end * 8 + j]! - this.sums[begin * 8 + j]! - borrow;
      borrow = limb < 0 ? 1 : 0;
      if (limb < 0) limb += 0x100000000;
      view.setUint32(j * 4, limb, true);
    }
    input.varint(end - begin);
    return createHash("sha256").update(input.bytes()).digest().subarray(0, FINGERPRINT_SIZE);
  }

  idBytes(begin: number, end: number): Uint8Array {
    return this.ids.subarray(begin * ID_SIZE, end * ID_SIZE);
  }

  /** The bound that is exactly item i. */
  itemBound(i: number): NegentropyBound {
    return { timestamp: this.timestamps[i]!, prefix: this.idBytes(i, i + 1) };
  }

  /** The shortest bound that puts item i-1 below it and item i at or above it. */
  boundBefore(i: number): NegentropyBound {
    const t = this.timestamps[i]!;
    if (t !== this.timestamps[i - 1]) return { timestamp: t, prefix: ZERO_BOUND.prefix };
    const cur = i * ID_SIZE;
    const prev = cur - ID_SIZE;
    let shared = 0;
    while (shared < ID_SIZE - 1 && this.ids[cur + shared] === this.ids[prev + shared]) shared++;
    return { timestamp: t, prefix: this.ids.subarray(cur, cur + shared + 1) };
  }

  private itemBelow(i: number, bound: NegentropyBound): boolean {
    const t = this.timestamps[i]!;
    if (t !== bound.timestamp) return t < bound.timestamp;
    // Past the prefix the bound is zeros, which no item byte is below.
    const base = i * ID_SIZE;
    for (let k = 0; k < bound.prefix.length; k++) {
      const a = this.ids[base + k]!;
      const b = bound.prefix[k]!;
      if (a !== b) return a < b;
    }
    return false;
  }
}

function compareIds(a: Uint8Array, i: number, b: Uint8Array, j: number): number {
  for (let k = 0; k < ID_SIZE; k++) {
    const d = a[i * ID_SIZE + k]! - b[j * ID_SIZE + k]!;
    if (d !== 0) return d;
  }
  return 0;
}

function prefixSums(ids: Uint8Array, n: number): Uint32Array {
  const sums = new Uint32Array((n + 1) * 8);
  for (let i = 0; i < n; i++) {
    let carry = 0;
    for (let j = 0; j < 8; j++) {
      const o = i * ID_SIZE + j * 4;
      const limb = (ids[o]! | (ids[o + 1]! << 8) | (ids[o + 2]! << 16) | (ids[o + 3]! << 24)) >>> 0;
      const v = sums[i * 8 + j]! + limb + carry;
      carry = v > 0xffffffff ? 1 : 0;
      sums[(i + 1) * 8 + j] = v >>> 0;
    }
  }
  return sums;
}

/**
 * Answers an initiator's messages. `frameSizeLimit` caps each binary reply (0 = unlimited; the
 * hex on the wire is twice as long); a reply cut short ends with a fingerprint of everything
 * not yet covered, so the client asks again from there.
 */
export class NegentropyServer {
  constructor(
    readonly storage: NegentropyStorage,
    readonly frameSizeLimit = 0,
  ) {
    if (!storage.sealed) throw new NegentropyError("storage must be sealed");
    if (!Number.isSafeInteger(frameSizeLimit) || frameSizeLimit < 0 || (frameSizeLimit !== 0 && frameSizeLimit < MIN_FRAME_SIZE_LIMIT))
      throw new NegentropyError(`frameSizeLimit must be 0 or at least ${MIN_FRAME_SIZE_LIMIT}`);
  }

  /** One query (the NEG-OPEN initial message or a NEG-MSG), hex in, reply hex out. */
  reconcile(queryHex: string): string {
    return toHex(this.reconcileBytes(decodeHex(queryHex)));
  }

  /** The same in bytes (what crosses threads without a copy). */
  reconcileBytes(query: Uint8Array): Uint8Array {
    const r = new ByteReader(query);
    const version = r.byte();
    if (version < 0x60 || version > 0x6f) throw new NegentropyError(`invalid protocol version byte 0x${version.toString(16)}`);
    // The spec: reply with just the highest version we support, so the client can downgrade.
    if (version !== NEGENTROPY_VERSION) return Uint8Array.of(NEGENTROPY_VERSION);

    const s = this.storage;
    const out = new ByteWriter(1024);
    out.byte(NEGENTROPY_VERSION);
    reconcileRanges(s, r, out, this.frameSizeLimit, (lower, upper, bound, _theirs, flushSkip) => {
      // An IdList. Their ids only matter to them: the initiator compares our list with its own.
      flushSkip();
      const room = this.frameSizeLimit
        ? Math.floor((this.frameSizeLimit - FRAME_SLACK - out.length - MAX_RANGE_HEADER) / ID_SIZE)
        : Infinity;
      const sent = Math.max(0, Math.min(upper - lower, room));
      if (sent < upper - lower) {
        // Send what fits, ending the range exactly at the first id left out.
        const end = lower + sent;
        out.bound(s.itemBound(end));
        out.idList(sent, s.idBytes(lower, end));
        finishEarly(s, out, end);
        return "cut";
      }
      out.bound(bound);
      out.idList(sent, s.idBytes(lower, upper));
      return "answered";
    });
    // A trailing Skip is implicit.
    return out.bytes();
  }
}

/** What the IdList of a range came to: settled (folded into the pending Skip), answered, or the reply cut short in it. */
type IdListAnswer = "settled" | "answered" | "cut";

/**
 * The ranges of one message, answered in `out` (responder and initiator alike): a Skip is
 * settled, a Fingerprint equal to ours is settled and a different one split (splitRange), an
 * IdList is the side's own (`idList`). Settled ranges are coalesced into one Skip, written only
 * if more follows (a trailing Skip is implicit). Past `frameSizeLimit` (0 = unlimited) the reply
 * is cut: the range's answer is dropped and one fingerprint of everything from its start ends
 * it, so the other side asks again from there; the rest of the message is only checked.
 */
export function reconcileRanges(
  s: NegentropyStorage,
  r: ByteReader,
  out: ByteWriter,
  frameSizeLimit: number,
  idList: (lower: number, upper: number, bound: NegentropyBound, theirs: Uint8Array, flushSkip: () => void) => IdListAnswer,
): void {
  const size = s.size;
  let prevBound = ZERO_BOUND;
  let prevIndex = 0;
  let skip = false;
  let cut = false;
  while (!r.done) {
    const { bound, mode, fingerprint, ids } = r.range();
    if (cut) continue;
    const lower = prevIndex;
    const upper = s.lowerBound(lower, size, bound);
    const mark = out.mark();
    const skipAtMark: boolean = skip;
    const flushSkip = () => {
      if (!skip) return;
      skip = false;
      out.bound(prevBound);
      out.varint(MODE_SKIP);
    };

    if (mode === MODE_SKIP) {
      skip = true;
    } else if (mode === MODE_FINGERPRINT) {
      if (equalBytes(fingerprint!, s.fingerprint(lower, upper))) skip = true;
      else {
        flushSkip();
        splitRange(s, out, lower, upper, bound);
      }
    } else {
      const answer = idList(lower, upper, bound, ids!, flushSkip);
      if (answer === "cut") {
        cut = true;
        continue;
      }
      if (answer === "settled") skip = true;
    }

    if (frameSizeLimit && out.length > frameSizeLimit - FRAME_SLACK) {
      // Too big: drop this range's answer and fingerprint everything from its start instead.
      // The pending Skip is kept, not folded into that fingerprint: ranges the other side
      // skipped are settled on its side (it already knows their differences), and reopening
      // them would make it report those ids again. (The reference fingerprints from `upper`
      // under a bound that starts earlier, which never matches and reopens them too.)
      out.rewind(mark);
      skip = skipAtMark;
      flushSkip();
      finishEarly(s, out, lower);
      cut = true;
      continue;
    }
    prevIndex = upper;
    prevBound = bound;
  }
}

/** Closes a cut-short reply: one fingerprint from the last bound written up to infinity. */
function finishEarly(s: NegentropyStorage, out: ByteWriter, from: number): void {
  out.bound(INFINITY_BOUND);
  out.varint(MODE_FINGERPRINT);
  out.append(s.fingerprint(from, s.size));
}

/**
 * A range the two sides disagree on (responder and initiator alike): its ids when small, else
 * 16 fingerprinted buckets of equal count.
 */
export function splitRange(s: NegentropyStorage, out: ByteWriter, lower: number, upper: number, upperBound: NegentropyBound): void {
  const n = upper - lower;
  if (n < BUCKETS * 2) {
    out.bound(upperBound);
    out.idList(n, s.idBytes(lower, upper));
    return;
  }
  const perBucket = Math.floor(n / BUCKETS);
  const withExtra = n % BUCKETS;
  let curr = lower;
  for (let i = 0; i < BUCKETS; i++) {
    const begin = curr;
    curr += perBucket + (i < withExtra ? 1 : 0);
    out.bound(curr === upper ? upperBound : s.boundBefore(curr));
    out.varint(MODE_FINGERPRINT);
    out.append(s.fingerprint(begin, curr));
  }
}
