// NIP-77 wire format: varints, bounds and ranges of Negentropy protocol V1, read and written
// with every length checked, so malformed input throws instead of looping or allocating.

export const ID_SIZE = 32;
export const FINGERPRINT_SIZE = 16;
export const MODE_SKIP = 0;
export const MODE_FINGERPRINT = 1;
const MODE_IDLIST = 2;
const MAX_VARINT_BEFORE_DIGIT = (Number.MAX_SAFE_INTEGER - 127) / 128;

/** Malformed input or misuse; the relay answers it with NEG-ERR. */
export class NegentropyError extends Error {
  override name = "NegentropyError";
}

/**
 * An exclusive upper bound: a timestamp (Infinity is the protocol's "infinity") and an id prefix
 * that stands for itself followed by zero bytes.
 */
export interface NegentropyBound {
  timestamp: number;
  prefix: Uint8Array;
}

export const ZERO_BOUND: NegentropyBound = { timestamp: 0, prefix: new Uint8Array(0) };
export const INFINITY_BOUND: NegentropyBound = { timestamp: Infinity, prefix: new Uint8Array(0) };

/** Compares two bounds as the protocol does: timestamp, then the zero-padded 32-byte id. */
function compareBounds(a: NegentropyBound, b: NegentropyBound): number {
  if (a.timestamp !== b.timestamp) return a.timestamp < b.timestamp ? -1 : 1;
  for (let i = 0; i < ID_SIZE; i++) {
    const x = a.prefix[i] ?? 0;
    const y = b.prefix[i] ?? 0;
    if (x !== y) return x - y;
  }
  return 0;
}

export const equalBytes = (a: Uint8Array, b: Uint8Array): boolean => a.length === b.length && a.every((x, i) => x === b[i]);

// A negated class, not /^(?:[0-9a-f]{2})*$/, which is ~500x slower on a megabyte of input.
const NOT_HEX = /[^0-9a-fA-F]/;

export function decodeHex(hex: string): Uint8Array {
  if (typeof hex !== "string" || hex.length % 2 !== 0 || NOT_HEX.test(hex)) throw new NegentropyError("message is not hex");
  return new Uint8Array(Buffer.from(hex, "hex"));
}

/** Reads one message; every read is bounds-checked, so malformed input throws instead of looping. */
export class ByteReader {
  private pos = 0;
  private lastTimestamp = 0;
  private lastBound = ZERO_BOUND;
  constructor(private readonly buf: Uint8Array) {}

  get done(): boolean {
    return this.pos >= this.buf.length;
  }

  get remaining(): number {
    return this.buf.length - this.pos;
  }

  byte(): number {
    if (this.pos >= this.buf.length) throw new NegentropyError("message ends prematurely");
    return this.buf[this.pos++]!;
  }

  take(n: number): Uint8Array {
    if (n > this.remaining) throw new NegentropyError("message ends prematurely");
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }

  /** Varints beyond 2^53-1 are refused: nothing in a Nostr set needs them. */
  varint(): number {
    let v = 0;
    for (;;) {
      if (this.pos >= this.buf.length) throw new NegentropyError("truncated varint");
      const b = this.buf[this.pos++]!;
      if (v > MAX_VARINT_BEFORE_DIGIT) throw new NegentropyError("varint too large");
      v = v * 128 + (b & 0x7f);
      if ((b & 0x80) === 0) return v;
    }
  }

  /** The next range, checked: bounds ascend, nothing follows infinity, the payload is whole. */
  range(): { bound: NegentropyBound; mode: number; fingerprint?: Uint8Array; ids?: Uint8Array } {
    if (this.lastBound.timestamp === Infinity) throw new NegentropyError("range after the infinity bound");
    const bound = this.bound();
    if (compareBounds(bound, this.lastBound) < 0) throw new NegentropyError("bounds out of order");
    this.lastBound = bound;
    const mode = this.varint();
    if (mode === MODE_SKIP) return { bound, mode };
    if (mode === MODE_FINGERPRINT) return { bound, mode, fingerprint: this.take(FINGERPRINT_SIZE) };
    if (mode === MODE_IDLIST) {
      // Checked against what is left before anything is read, so a huge count allocates nothing.
      const count = this.varint();
      if (count > this.remaining / ID_SIZE) throw new NegentropyError("id list longer than the message");
      return { bound, mode, ids: this.take(count * ID_SIZE) };
    }
    throw new NegentropyError(`unknown mode ${mode}`);
  }

  private bound(): NegentropyBound {
    const encoded = this.varint();
    let timestamp = Infinity;
    if (encoded !== 0) {
      timestamp = this.lastTimestamp + encoded - 1;
      if (timestamp > Number.MAX_SAFE_INTEGER) throw new NegentropyError("timestamp too large");
    }
    this.lastTimestamp = timestamp;
    const length = this.varint();
    if (length > ID_SIZE) throw new NegentropyError(`bound id prefix of ${length} bytes`);
    return { timestamp, prefix: this.take(length) };
  }
}

interface WriterMark {
  length: number;
  lastTimestamp: number;
}

/** A growable byte buffer that also carries the per-message timestamp delta state. */
export class ByteWriter {
  private buf: Uint8Array;
  length = 0;
  private lastTimestamp = 0;
  constructor(capacity: number) {
    this.buf = new Uint8Array(capacity);
  }

  reserve(n: number): Uint8Array {
    if (this.length + n > this.buf.length) {
      const bigger = new Uint8Array(Math.max(this.buf.length * 2, this.length + n));
      bigger.set(this.buf.subarray(0, this.length));
      this.buf = bigger;
    }
    const slot = this.buf.subarray(this.length, this.length + n);
    this.length += n;
    return slot;
  }

  byte(b: number): void {
    this.reserve(1)[0] = b;
  }

  append(bytes: Uint8Array): void {
    this.reserve(bytes.length).set(bytes);
  }

  /** Base-128, most significant digit first; digits by division since n may exceed 2^32. */
  varint(n: number): void {
    let digits = 1;
    for (let x = n; x >= 128; x = Math.floor(x / 128)) digits++;
    const slot = this.reserve(digits);
    for (let i = digits - 1, x = n; i >= 0; i--, x = Math.floor(x / 128)) slot[i] = (x % 128) | (i === digits - 1 ? 0 : 0x80);
  }

  bound(b: NegentropyBound): void {
    if (b.timestamp === Infinity) this.varint(0);
    else {
      const delta = b.timestamp - this.lastTimestamp;
      if (delta < 0) throw new Error("negentropy: bounds written out of order"); // a bug here, not bad input
      this.varint(delta + 1);
    }
    this.lastTimestamp = b.timestamp;
    this.varint(b.prefix.length);
    this.append(b.prefix);
  }

  idList(count: number, ids: Uint8Array): void {
    this.varint(MODE_IDLIST);
    this.varint(count);
    this.append(ids);
  }

  mark(): WriterMark {
    return { length: this.length, lastTimestamp: this.lastTimestamp };
  }

  rewind(m: WriterMark): void {
    this.length = m.length;
    this.lastTimestamp = m.lastTimestamp;
  }

  bytes(): Uint8Array {
    return this.buf.subarray(0, this.length);
  }

  hex(): string {
    return toHex(this.bytes());
  }
}

export const toHex = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.length).toString("hex");
