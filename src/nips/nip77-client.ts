// NIP-77 negentropy, the initiator (client) side of protocol V1 (0x61), on the same storage and
// wire code as the relay side (nip77.ts, nip77-wire.ts). Used by `bunstr sync`.
import { MIN_FRAME_SIZE_LIMIT, NEGENTROPY_VERSION, NegentropyError, reconcileRanges, splitRange, type NegentropyStorage } from "./nip77.ts";
import { ByteReader, ByteWriter, decodeHex, ID_SIZE, INFINITY_BOUND } from "./nip77-wire.ts";

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
    splitRange(this.storage, out, 0, this.storage.size, INFINITY_BOUND);
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
    const out = new ByteWriter(1024);
    out.byte(NEGENTROPY_VERSION);
    reconcileRanges(this.storage, r, out, this.frameSizeLimit, (lower, upper, _bound, ids) => {
      // An IdList: what each side lacks is reported; the range is settled either way.
      const theirs = new Set<string>();
      for (let o = 0; o < ids.length; o += ID_SIZE) theirs.add(hexOf(ids.subarray(o, o + ID_SIZE)));
      const ours = this.storage.idBytes(lower, upper);
      for (let o = 0; o < ours.length; o += ID_SIZE) {
        const id = hexOf(ours.subarray(o, o + ID_SIZE));
        if (!theirs.delete(id)) have(id);
      }
      for (const id of theirs) need(id);
      return "settled";
    });
    return out.length === 1 ? null : out.hex();
  }
}
