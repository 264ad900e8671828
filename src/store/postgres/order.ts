// Committed batches, from this node and from others (through the bus), handed on in seq order:
// the relay's fanout and its REQ snapshots (lastSeq) both rest on "every seq up to applied is
// committed and was handed on". Batches commit in seq order (postgres/write.ts), so a batch that
// arrives before an earlier one means the earlier one is committed but its message is late, or
// was lost with its node: after a short wait the gap is read from the database.
import { log } from "../../log.ts";
import type { NostrEvent } from "../../protocol/event.ts";

export interface OrderedEvent {
  seq: number;
  event: NostrEvent;
  json: string;
}

export interface Batch {
  from: number;
  to: number;
  events: OrderedEvent[];
}

interface CommitOrderOptions {
  /** Called for each committed event, in seq order, exactly once. */
  emit: (e: OrderedEvent) => void;
  /** The stored events with from <= seq <= to (a gap whose message did not come). */
  readRange: (from: number, to: number) => Promise<OrderedEvent[]>;
  /** How long a gap may stay open before it is read from the database. */
  gapMs?: number;
}

export class CommitOrder {
  /** Every seq up to here is committed and was emitted. */
  applied: number;
  private readonly waiting = new Map<number, Batch>();
  private gapTimer?: ReturnType<typeof setTimeout>;
  private filling?: Promise<void>;

  constructor(
    start: number,
    private readonly opts: CommitOrderOptions,
  ) {
    this.applied = start;
  }

  /** A committed batch, from here or another node; old and repeated ones are ignored. */
  add(b: Batch): void {
    if (b.to <= this.applied || this.waiting.has(b.from)) return;
    this.waiting.set(b.from, b);
    this.drain();
  }

  /** Everything up to `top` is committed (read from the database): fill up to it if behind. */
  async catchUp(top: number): Promise<void> {
    if (top <= this.applied) return;
    await this.fill(top);
  }

  private drain(): void {
    for (;;) {
      const b = this.waiting.get(this.applied + 1);
      if (!b) break;
      this.waiting.delete(b.from);
      for (const e of b.events) this.opts.emit(e);
      this.applied = b.to;
    }
    // Batches that came early (from + applied overlap cannot happen: ranges never overlap).
    for (const [from, b] of this.waiting) if (b.to <= this.applied) this.waiting.delete(from);
    if (this.waiting.size === 0) {
      clearTimeout(this.gapTimer);
      this.gapTimer = undefined;
    } else if (!this.gapTimer) {
      this.gapTimer = setTimeout(() => {
        this.gapTimer = undefined;
        const next = Math.min(...this.waiting.keys());
        void this.fill(next - 1).catch((err) => log.error("could not read a gap of committed events:", err));
      }, this.opts.gapMs ?? 200);
    }
  }

  /** Reads and emits the committed events after applied up to `top`. */
  private async fill(top: number): Promise<void> {
    while (this.filling) await this.filling;
    if (top <= this.applied) return;
    const from = this.applied + 1;
    this.filling = (async () => {
      const events = await this.opts.readRange(from, top);
      // Meanwhile the gap's own message may have come and been applied.
      for (const e of events) if (e.seq > this.applied) this.opts.emit(e);
      this.applied = Math.max(this.applied, top);
    })();
    try {
      await this.filling;
    } finally {
      this.filling = undefined;
    }
    this.drain();
  }

  close(): void {
    clearTimeout(this.gapTimer);
  }
}
