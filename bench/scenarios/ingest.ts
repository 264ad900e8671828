// Ingest: C connections, each pipelining its share of the corpus with at most `window`
// unacknowledged EVENTs. Every event must get exactly one OK true, on the connection that sent it.
import type { Corpus } from "../corpus.ts";
import { connectAll, type Conn, type RelayFrame } from "../lib/conn.ts";
import { Failures, summarize, type Summary } from "../lib/stats.ts";

export interface IngestOptions {
  url: string;
  corpus: Corpus;
  conns: number;
  /** Unacknowledged EVENTs allowed per connection. */
  window: number;
  /** Give up when no OK arrived for this long. */
  stallMs: number;
}

export interface IngestResult {
  events: number;
  conns: number;
  window: number;
  okTrue: number;
  /** OK true whose message starts with "duplicate:" (only expected against an already-filled relay). */
  duplicates: number;
  okFalse: number;
  /** Events that never got an OK. */
  missing: number;
  /** First EVENT sent to last OK received. */
  seconds: number;
  /** OK true per second over `seconds`. */
  eventsPerSec: number;
  /** EVENT sent -> its OK received, ms (includes queueing behind the window). */
  latencyMs: Summary;
}

const SENT = 1;
const ACKED = 2;

export class IngestRun {
  readonly failures = new Failures();
  private conns: Conn[] = [];
  private readonly state: Uint8Array;
  private readonly sentAt: Float64Array;
  private readonly latencies: number[] = [];
  private okTrue = 0;
  private okFalse = 0;
  private duplicates = 0;
  private acked = 0;
  private firstSend = 0;
  private lastOk = 0;
  private finish?: () => void;

  constructor(private readonly opts: IngestOptions) {
    this.state = new Uint8Array(opts.corpus.events.length);
    this.sentAt = new Float64Array(opts.corpus.events.length);
  }

  /** Runs to completion (or stall). The connections stay open so late or repeated OKs are still seen; call close(). */
  async run(): Promise<IngestResult> {
    const { corpus, conns: c, window, stallMs } = this.opts;
    const n = corpus.events.length;
    this.conns = await connectAll(this.opts.url, c, "ingest-");
    // Connection k sends events k, k+C, k+2C, … so every connection spans the whole time range.
    const next = this.conns.map((_, k) => k);
    const inFlight = this.conns.map(() => 0);
    const pump = (k: number) => {
      const conn = this.conns[k]!;
      while (inFlight[k]! < window && next[k]! < n) {
        const i = next[k]!;
        next[k] = i + c;
        inFlight[k]!++;
        this.state[i] = SENT;
        this.sentAt[i] = performance.now();
        conn.send(`["EVENT",${corpus.lines[i]}]`);
      }
    };
    const done = new Promise<void>((resolve) => (this.finish = resolve));
    this.conns.forEach((conn, k) => {
      conn.onFrame = (f) => {
        if (this.onFrame(k, f)) {
          inFlight[k]!--;
          pump(k);
        }
      };
    });

    this.firstSend = performance.now();
    this.lastOk = this.firstSend;
    for (let k = 0; k < c; k++) pump(k);

    let lastAcked = -1;
    let lastProgress = performance.now();
    while (this.acked < n) {
      const stalled = await Promise.race([done.then(() => false), Bun.sleep(250).then(() => true)]);
      if (!stalled) break;
      if (this.acked !== lastAcked) (lastAcked = this.acked), (lastProgress = performance.now());
      const dead = this.conns.find((x) => x.closed);
      if (dead) {
        this.failures.add("connection closed during ingest", `${dead.name} code ${dead.closeCode}`);
        break;
      }
      if (performance.now() - lastProgress > stallMs) break;
    }
    const missing = n - this.acked;
    if (missing > 0) {
      const examples: string[] = [];
      for (let i = 0; i < n && examples.length < 3; i++) if (this.state[i] !== ACKED) examples.push(`#${i} ${corpus.events[i]!.id} (${this.state[i] === SENT ? "sent" : "never sent"})`);
      this.failures.add("no OK", `${missing} events without an OK after ${stallMs} ms of silence, e.g. ${examples.join(", ")}`);
    }
    const seconds = (this.lastOk - this.firstSend) / 1000;
    return {
      events: n,
      conns: c,
      window,
      okTrue: this.okTrue,
      duplicates: this.duplicates,
      okFalse: this.okFalse,
      missing,
      seconds,
      eventsPerSec: seconds > 0 ? this.okTrue / seconds : NaN,
      latencyMs: summarize(this.latencies),
    };
  }

  /** Handles one frame from connection k; true when it acknowledged one of k's in-flight events. */
  private onFrame(k: number, f: RelayFrame): boolean {
    const { corpus, conns: c } = this.opts;
    switch (f[0]) {
      case "OK": {
        const [, id, accepted, message] = f as [string, string, boolean, string];
        const i = corpus.byId.get(id);
        if (i === undefined) return this.failures.add("OK for an unknown id", JSON.stringify(f).slice(0, 200)), false;
        if (this.state[i] === ACKED) return this.failures.add("OK arrived twice", `#${i} ${id} on ingest-${k}: ${JSON.stringify(f)}`), false;
        if (this.state[i] !== SENT) return this.failures.add("OK before EVENT was sent", `#${i} ${id}`), false;
        if (i % c !== k) this.failures.add("OK on the wrong connection", `#${i} sent on ingest-${i % c}, answered on ingest-${k}`);
        const now = performance.now();
        this.state[i] = ACKED;
        this.acked++;
        this.lastOk = now;
        this.latencies.push(now - this.sentAt[i]!);
        if (accepted === true) {
          this.okTrue++;
          if (typeof message === "string" && message.startsWith("duplicate:")) this.duplicates++;
        } else {
          this.okFalse++;
          this.failures.add("OK false", `#${i} ${id}: ${JSON.stringify(message)}`);
        }
        if (this.acked === corpus.events.length) this.finish?.();
        return i % c === k;
      }
      case "AUTH":
        return false; // the NIP-42 challenge sent on connect; not needed to publish here
      case "NOTICE":
        this.failures.add("NOTICE during ingest", `ingest-${k}: ${JSON.stringify(f[1])}`);
        return false;
      default:
        this.failures.add("unexpected frame during ingest", `ingest-${k}: ${JSON.stringify(f).slice(0, 200)}`);
        return false;
    }
  }

  /** Closes the connections, recording any socket-level errors first. */
  async close(): Promise<void> {
    for (const conn of this.conns) for (const e of conn.errors) this.failures.add("bad frame during ingest", e);
    await Promise.all(this.conns.map((x) => x.close()));
  }
}
