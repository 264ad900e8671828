// A group's `previous` window: the first 4 bytes of its newest event ids, in a ring. NIP-29:
// clients name "the first 8 characters (4 bytes) of any event in the last 50 events seen by the
// user in the relay"; the relay rejects references "to events not found in their own database".

/** The first 8 hex characters of an id (or a reference) as a number; undefined when they are not hex. */
export function prefixOf(hex: string): number | undefined {
  if (hex.length < 8) return undefined;
  const n = Number.parseInt(hex.slice(0, 8), 16);
  return Number.isNaN(n) || !/^[0-9a-f]{8}/.test(hex) ? undefined : n;
}

export class PreviousWindow {
  private readonly ring: Uint32Array;
  private next = 0;
  private filled = 0;
  /**
   * Cold: after a rebuild whose scan held none of the group's events the window knows nothing
   * of its past, so references are not checked until `size` new events have come.
   */
  private coldFor: number;

  constructor(size: number, cold = false) {
    this.ring = new Uint32Array(size);
    this.coldFor = cold ? size : 0;
  }

  get cold(): boolean {
    return this.coldFor > 0;
  }

  get size(): number {
    return this.ring.length;
  }

  add(id: string): void {
    const p = prefixOf(id);
    if (p === undefined) return;
    this.ring[this.next] = p;
    this.next = (this.next + 1) % this.ring.length;
    if (this.filled < this.ring.length) this.filled++;
    if (this.coldFor > 0) this.coldFor--;
  }

  /** Ids known at a rebuild (the store's newest for this group, newest first): the window is warm. */
  seed(ids: readonly string[]): void {
    for (const id of ids.slice(0, this.ring.length).reverse()) this.add(id);
    this.coldFor = 0;
  }

  /** The rebuild's scan held none of this group's events: its past is unknown. */
  chill(): void {
    this.coldFor = this.ring.length;
  }

  has(prefix: number): boolean {
    for (let i = 0; i < this.filled; i++) if (this.ring[i] === prefix) return true;
    return false;
  }
}
