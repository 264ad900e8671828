// NIP-77 negentropy, the initiator (client) side of protocol V1 (0x61), on the same storage and
// wire code as the relay side (nip77.ts, nip77-wire.ts). Used by `bunstr sync`.
import { MIN_FRAME_SIZE_LIMIT, NEGENTROPY_VERSION, NegentropyError, splitRange, type NegentropyStorage } from "./nip77.ts";
import {
  ByteReader,
  ByteWriter,
  decodeHex,
  equalBytes,
  ID_SIZE,
  INFINITY_BOUND,
  MODE_FINGERPRINT,
  MODE_IDLIST,
  MODE_SKIP,
  ZERO_BOUND,
  type NegentropyBound,
} from "./nip77-wire.ts";

const FRAME_SLACK = 200;

const hexOf = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("hex");

export class NegentropyClient {
  constructor(
    readonly storage: NegentropyStorage,
    /** Most bytes of one binary message (0 = unlimited; the hex on the wire is twice as long). */
    readonly frameSizeLimit = 0,
  ) {
    if (!storage.sealed) throw new NegentropyError("storage must be sealed");
    if (frameSizeLimit !== 0 && frameSizeLimit < MIN_FRAME_SIZE_LIMIT)
      throw new NegentropyError(`frameSizeLimit must be 0 or at least ${MIN_FRAME_SIZE_LIMIT}`);
  }

  /** The NEG-OPEN initial message. */
  initiate(): string {
    const out = new ByteWriter(1024);
    out.byte(NEGENTROPY_VERSION);
    this.splitRange(out, 0, this.storage.size, INFINITY_BOUND);
    return out.hex();
  }

  /**
   * One reply of the relay: reports ids only we have (`have`) and only they have (`need`), and
   * returns the next query, or null when reconciliation is complete. An id may be reported more
   * than once when a cut-short reply reopens a range: callers keep sets.
   */
  reconcile(replyHex: string, have: (id: string) => void, need: (id: string) => void): string | null {
    const r = new ByteReader(decodeHex(replyHex));
    const version = r.byte();
    if (version !== NEGENTROPY_VERSION)
      throw new NegentropyError(`the relay speaks negentropy version 0x${version.toString(16)}, not 0x61`);
    const s = this.storage;
    const size = s.size;
    const out = new ByteWriter(1024);
    out.byte(NEGENTROPY_VERSION);
    let prevBound: NegentropyBound = ZERO_BOUND;
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
      if (mode === MODE_SKIP) skip = true;
      else if (mode === MODE_FINGERPRINT) {
        if (equalBytes(fingerprint!, s.fingerprint(lower, upper))) skip = true;
        else {
          flushSkip();
          this.splitRange(out, lower, upper, bound);
        }
      } else if (mode === MODE_IDLIST) {
        const theirs = new Set<string>();
        for (let o = 0; o < ids!.length; o += ID_SIZE) theirs.add(hexOf(ids!.subarray(o, o + ID_SIZE)));
        const ours = s.idBytes(lower, upper);
        for (let o = 0; o < ours.length; o += ID_SIZE) {
          const id = hexOf(ours.subarray(o, o + ID_SIZE));
          if (!theirs.delete(id)) have(id);
        }
        for (const id of theirs) need(id);
        skip = true;
      }
      if (this.frameSizeLimit && out.length > this.frameSizeLimit - FRAME_SLACK) {
        // Too big: drop this range's answer, fingerprint everything from its start instead.
        out.rewind(mark);
        skip = skipAtMark;
        flushSkip();
        out.bound(INFINITY_BOUND);
        out.varint(MODE_FINGERPRINT);
        out.append(s.fingerprint(lower, size));
        cut = true;
        continue;
      }
      prevIndex = upper;
      prevBound = bound;
    }
    return out.length === 1 ? null : out.hex();
  }

  private splitRange(out: ByteWriter, lower: number, upper: number, upperBound: NegentropyBound): void {
    splitRange(this.storage, out, lower, upper, upperBound);
  }
}
