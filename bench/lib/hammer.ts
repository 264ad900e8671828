// Publishing as fast as the relay acknowledges: C connections, each keeping at most W EVENTs
// without an OK, fed by a generator. Every OK is accounted for by id; the relay may die at any
// moment (that is the point), so a closed connection just stops its pump.
import type { NostrEvent } from "../../src/protocol/event.ts";
import { Conn, type RelayFrame } from "./conn.ts";

export interface HammerOptions {
  url: string;
  conns: number;
  /** Unacknowledged EVENTs allowed per connection. */
  window: number;
  /** The next event for connection k; undefined = this connection has nothing more to send. */
  next: (k: number) => NostrEvent | undefined;
  /** Called after each OK true with the running count (synchronously, so a kill can be precise). */
  onAck?: (acked: number, id: string) => void;
}

export class Hammer {
  conns: Conn[] = [];
  /** Ids answered OK true (including "duplicate:"), in arrival order. */
  readonly acked: string[] = [];
  readonly ackedSet = new Set<string>();
  /** Ids answered OK false, with the reason. */
  readonly refused = new Map<string, string>();
  /** Every event sent, by id (to check what was stored against what was sent). */
  readonly sent = new Map<string, NostrEvent>();
  /** Sent, not answered yet. */
  readonly pending = new Set<string>();
  readonly notices: string[] = [];
  /** Frames that were not OK/NOTICE/AUTH, or OKs for ids never sent / answered twice. */
  readonly anomalies: string[] = [];
  private inFlight: number[] = [];
  private exhausted: boolean[] = [];
  private stopped = false;

  constructor(private readonly opts: HammerOptions) {}

  get ackedCount(): number {
    return this.acked.length;
  }

  /** Connects all connections, then starts sending. */
  async start(): Promise<void> {
    const { url, conns } = this.opts;
    this.conns = await Promise.all(Array.from({ length: conns }, (_, k) => Conn.connect(url, `hammer-${k}`)));
    this.inFlight = this.conns.map(() => 0);
    this.exhausted = this.conns.map(() => false);
    this.conns.forEach((c, k) => (c.onFrame = (f) => this.onFrame(k, f)));
    for (let k = 0; k < conns; k++) this.pump(k);
  }

  /** Stops sending (answers still count). */
  stop(): void {
    this.stopped = true;
  }

  /** True when every connection has nothing more to send and no answer outstanding. */
  get idle(): boolean {
    return this.exhausted.every(Boolean) && this.pending.size === 0;
  }

  /** Waits (bounded) until every connection is closed, e.g. after the relay was killed. */
  async waitClosed(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (this.conns.some((c) => !c.closed) && Date.now() < deadline) await Bun.sleep(5);
    return this.conns.every((c) => c.closed);
  }

  /** Waits (bounded) until all sent events are answered and nothing is left to send. */
  async waitIdle(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!this.idle && Date.now() < deadline) await Bun.sleep(5);
    return this.idle;
  }

  async close(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.conns.map((c) => c.close(1000)));
  }

  private pump(k: number): void {
    const conn = this.conns[k]!;
    while (!this.stopped && !conn.closed && !this.exhausted[k] && this.inFlight[k]! < this.opts.window) {
      const e = this.opts.next(k);
      if (!e) {
        this.exhausted[k] = true;
        break;
      }
      this.sent.set(e.id, e);
      this.pending.add(e.id);
      this.inFlight[k]!++;
      try {
        conn.send(`["EVENT",${JSON.stringify(e)}]`);
      } catch {
        break; // the socket went away under us
      }
    }
  }

  private onFrame(k: number, f: RelayFrame): void {
    switch (f[0]) {
      case "OK": {
        const id = f[1] as string;
        if (!this.pending.delete(id)) {
          this.anomalies.push(`hammer-${k}: OK for an id not in flight: ${JSON.stringify(f).slice(0, 200)}`);
          return;
        }
        this.inFlight[k]!--;
        if (f[2] === true) {
          this.acked.push(id);
          this.ackedSet.add(id);
          this.opts.onAck?.(this.acked.length, id);
        } else this.refused.set(id, String(f[3]));
        this.pump(k);
        return;
      }
      case "NOTICE":
        this.notices.push(String(f[1]));
        return;
      case "AUTH":
        return;
      default:
        this.anomalies.push(`hammer-${k}: unexpected ${JSON.stringify(f).slice(0, 200)}`);
    }
  }
}
