// The publishing side of a fanout run: one pipelined connection sends the events with flow
// control and checks every OK.
import type { NostrEvent } from "../../../src/protocol/event.ts";
import type { Conn, RelayFrame } from "../../lib/conn.ts";
import { P_BAD, P_CLOSED, P_DONE, P_RECV } from "./channel.ts";
import type { FailureLog } from "./failures.ts";
import { nowMs } from "./latency.ts";

/**
 * Sends events [0, upTo) of a phase with at most `window` EVENTs unacknowledged and at most `lag`
 * deliveries due but not received yet (a client that publishes faster than its subscribers read
 * only grows queues: in the relay, which disconnects slow readers at max_pending_bytes, and in the
 * kernel). The load phase uses the run's window and lag; the probe phase sends one event at a
 * time, each once the previous one is acknowledged and fully delivered.
 */
export class Publisher {
  /** Events sent, OKs received, and when the last OK came (nowMs()). */
  sent = 0;
  oks = 0;
  lastOk = 0;
  /** Deliveries of the events sent so far. */
  private due = 0;
  /** OKed events that nobody should receive. */
  private zeroDone = 0;
  /** Events below this may be sent in the current phase. */
  private limit = 0;
  private window = 0;
  private lag = 0;
  private readonly idIndex = new Map<string, number>();
  private readonly oked: Uint8Array;

  constructor(
    private readonly conn: Conn,
    events: NostrEvent[],
    private readonly jsons: string[],
    /** Deliveries due per event. */
    private readonly initialRemaining: Int32Array,
    /** The receivers' counters (channel.ts) and the send times they measure latency from. */
    private readonly progress: Int32Array,
    private readonly sentAt: Float64Array,
    private readonly failures: FailureLog,
  ) {
    events.forEach((e, i) => this.idIndex.set(e.id, i));
    this.oked = new Uint8Array(events.length);
    conn.onFrame = (f, raw) => this.onFrame(f, raw);
  }

  /** Events acknowledged and received by every subscription that should get them. */
  done(): number {
    return Atomics.load(this.progress, P_DONE) + this.zeroDone;
  }

  private pump(): void {
    // An event always goes when nothing is outstanding, however many deliveries it has.
    while (
      this.sent < this.limit &&
      this.sent - this.oks < this.window &&
      (this.due - Atomics.load(this.progress, P_RECV) < this.lag || this.sent === this.done())
    ) {
      this.sentAt[this.sent] = nowMs();
      this.conn.send(`["EVENT",${this.jsons[this.sent]}]`);
      this.due += this.initialRemaining[this.sent]!;
      this.sent++;
    }
  }

  private onFrame(f: RelayFrame, raw: string): void {
    if (f[0] === "OK") {
      const i = this.idIndex.get(f[1] as string);
      if (i === undefined) return this.failures.add("OK for an unknown id", raw.slice(0, 200));
      if (this.oked[i]) return this.failures.add("OK twice", raw.slice(0, 200));
      this.oked[i] = 1;
      this.oks++;
      this.lastOk = nowMs();
      if (f[2] !== true || f[3] !== "")
        this.failures.add(f[2] === true ? "OK true with a message (duplicate?)" : "OK false", `#${i}: ${raw.slice(0, 200)}`);
      if (this.initialRemaining[i] === 0) this.zeroDone++;
      this.pump();
    } else if (f[0] !== "AUTH") this.failures.add("unexpected frame on the publisher", raw.slice(0, 200));
  }

  /**
   * Publishes up to event `upTo` and waits until all of them are acknowledged and delivered; false
   * on failure (a bad frame or closed connection on the receivers, the publisher closed, the relay
   * gone, or no progress for stallMs).
   */
  async phase(upTo: number, window: number, lag: number, stallMs: number, relayRunning: () => boolean): Promise<boolean> {
    (this.limit = upTo), (this.window = window), (this.lag = lag);
    let lastProgress = performance.now();
    let seen = -1;
    this.pump();
    for (;;) {
      const d = this.done();
      if (this.oks === upTo && d === upTo) return true;
      if (Atomics.load(this.progress, P_BAD) || Atomics.load(this.progress, P_CLOSED) || this.conn.closed || !relayRunning()) return false;
      if (d + this.oks !== seen) (seen = d + this.oks), (lastProgress = performance.now());
      else if (performance.now() - lastProgress > stallMs) {
        this.failures.add(
          "stalled",
          `no progress for ${stallMs} ms: ${this.sent}/${upTo} sent, ${this.oks} OKs, ${d} events fully delivered`,
        );
        return false;
      }
      this.pump();
      await Bun.sleep(1);
    }
  }
}
