// Ingest: C connections, each pipelining its share of the corpus with at most `window`
// unacknowledged EVENTs. Every event must get exactly one OK, on the connection that sent it:
// OK true, except that an older version of a replaceable / addressable event (one the oracle does
// not keep) may get OK false "duplicate: …" when a newer version got there first.
// With `copies` K > 1 (a duplicate-heavy mix: clients publishing the same events, mirrors),
// each event is sent K times at about the same time, copy j on connection (i + j) mod C: every
// copy gets its OK, exactly one of them stores it and the others say "duplicate:".
// Throughput is also reported per window of `windowEvents` acknowledged events, so a slowdown as
// the database grows is visible.
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
  /** Events that may be refused as "duplicate:" (an older version of a replaceable event): the oracle does not store them. */
  mayBeRefused: (i: number) => boolean;
  /** Report throughput per this many acknowledged events (default 100,000). */
  windowEvents?: number;
  /** Times each event is sent, on as many connections (default 1; at most conns). */
  copies?: number;
  log?: (msg: string) => void;
}

export interface IngestWindow {
  /** Acknowledged events at the start and end of the window. */
  from: number;
  to: number;
  seconds: number;
  /** OK true per second within the window. */
  eventsPerSec: number;
}

export interface IngestResult {
  events: number;
  /** Times each event was sent (IngestOptions.copies). */
  copies: number;
  /** Events stored by one of their copies (OK true without "duplicate:"). */
  stored: number;
  conns: number;
  window: number;
  okTrue: number;
  /** OK true whose message starts with "duplicate:" (only expected against an already-filled relay). */
  duplicates: number;
  /** OK false "duplicate: …" for an older version of a replaceable event: expected, not a failure. */
  refusedOlder: number;
  /** Any other OK false (a failure). */
  okFalse: number;
  /** Events that never got an OK. */
  missing: number;
  /** First EVENT sent to last OK received. */
  seconds: number;
  /** OK true per second over `seconds` (each copy's). */
  eventsPerSec: number;
  /** Events stored per second over `seconds`. */
  storedPerSec: number;
  /** EVENT sent -> its OK received, ms (includes queueing behind the window). */
  latencyMs: Summary;
  /** Throughput per `windowEvents` acknowledged events. */
  windows: IngestWindow[];
  windowEvents: number;
}

const SENT = 1;
const ACKED = 2;

export class IngestRun {
  readonly failures = new Failures();
  private conns: Conn[] = [];
  private readonly state: Uint8Array;
  private readonly sentAt: Float64Array;
  /** EVENT -> OK ms per event (NaN until acknowledged). */
  private readonly latency: Float32Array;
  private okTrue = 0;
  private okFalse = 0;
  private refusedOlder = 0;
  private duplicates = 0;
  private acked = 0;
  private firstSend = 0;
  private lastOk = 0;
  private readonly windowEvents: number;
  private readonly copies: number;
  /** 1 once a copy of the event was answered OK true without "duplicate:" (stored). */
  private readonly storedBy: Uint8Array;
  private stored = 0;
  private readonly windows: IngestWindow[] = [];
  private windowStart = { at: 0, acked: 0, okTrue: 0 };
  private finish?: () => void;

  constructor(private readonly opts: IngestOptions) {
    this.copies = opts.copies ?? 1;
    if (this.copies < 1 || this.copies > opts.conns) throw new Error(`copies must be 1..${opts.conns} (one connection each)`);
    const sends = opts.corpus.size * this.copies;
    this.state = new Uint8Array(sends);
    this.sentAt = new Float64Array(sends);
    this.latency = new Float32Array(sends).fill(NaN);
    this.storedBy = new Uint8Array(opts.corpus.size);
    this.windowEvents = opts.windowEvents ?? 100_000;
  }

  /** Connection k's sends in order (send s = event i x copies + copy j): round by round, copy j of event r x C + (k - j) mod C. */
  private sendsOf(k: number): Int32Array {
    const { corpus, conns: c } = this.opts;
    const n = corpus.size;
    const out: number[] = [];
    for (let base = 0; base < n; base += c)
      for (let j = 0; j < this.copies; j++) {
        const i = base + ((k - j + c) % c);
        if (i < n) out.push(i * this.copies + j);
      }
    return Int32Array.from(out);
  }

  /** Runs to completion (or stall). The connections stay open so late or repeated OKs are still seen; call close(). */
  async run(): Promise<IngestResult> {
    const { corpus, conns: c, window, stallMs } = this.opts;
    const n = corpus.size * this.copies;
    this.conns = await connectAll(this.opts.url, c, "ingest-");
    // Connection k sends events k, k+C, k+2C, … so every connection spans the whole time range
    // (and the copies of events k-1, k-2, … beside them: sendsOf).
    const lists = this.conns.map((_, k) => this.sendsOf(k));
    const next = this.conns.map(() => 0);
    const inFlight = this.conns.map(() => 0);
    const pump = (k: number) => {
      const conn = this.conns[k]!;
      const list = lists[k]!;
      while (inFlight[k]! < window && next[k]! < list.length) {
        const s = list[next[k]!++]!;
        inFlight[k]!++;
        this.state[s] = SENT;
        this.sentAt[s] = performance.now();
        conn.send(`["EVENT",${corpus.lines[Math.floor(s / this.copies)]}]`);
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
    this.windowStart = { at: this.firstSend, acked: 0, okTrue: 0 };
    for (let k = 0; k < c; k++) pump(k);

    let lastAcked = -1;
    let lastProgress = performance.now();
    let lastLog = lastProgress;
    while (this.acked < n) {
      const stalled = await Promise.race([done.then(() => false), Bun.sleep(250).then(() => true)]);
      if (!stalled) break;
      const now = performance.now();
      if (this.acked !== lastAcked) (lastAcked = this.acked), (lastProgress = now);
      if (now - lastLog > 10_000) {
        lastLog = now;
        this.opts.log?.(
          `ingest: ${this.acked}/${n} acknowledged, ${Math.round(this.okTrue / ((now - this.firstSend) / 1000))} events/s so far`,
        );
      }
      const dead = this.conns.find((x) => x.closed);
      if (dead) {
        this.failures.add("connection closed during ingest", `${dead.name} code ${dead.closeCode}`);
        break;
      }
      if (now - lastProgress > stallMs) break;
    }
    const missing = n - this.acked;
    if (missing > 0) {
      const examples: string[] = [];
      for (let s = 0; s < n && examples.length < 3; s++) {
        const i = Math.floor(s / this.copies);
        if (this.state[s] !== ACKED) examples.push(`#${i} ${corpus.id(i)} (${this.state[s] === SENT ? "sent" : "never sent"})`);
      }
      this.failures.add("no OK", `${missing} events without an OK after ${stallMs} ms of silence, e.g. ${examples.join(", ")}`);
    }
    if (this.acked > this.windowStart.acked) this.closeWindow(this.lastOk);
    if (this.copies > 1 && missing === 0)
      for (let i = 0; i < corpus.size; i++)
        if (this.storedBy[i] === 0 && !this.opts.mayBeRefused(i))
          this.failures.add("no copy stored", `#${i} ${corpus.id(i)}: every copy was answered "duplicate:"`);
    const seconds = (this.lastOk - this.firstSend) / 1000;
    const lat: number[] = [];
    for (const ms of this.latency) if (!Number.isNaN(ms)) lat.push(ms);
    return {
      events: corpus.size,
      copies: this.copies,
      stored: this.stored,
      conns: c,
      window,
      okTrue: this.okTrue,
      duplicates: this.duplicates,
      refusedOlder: this.refusedOlder,
      okFalse: this.okFalse,
      missing,
      seconds,
      eventsPerSec: seconds > 0 ? this.okTrue / seconds : NaN,
      storedPerSec: seconds > 0 ? this.stored / seconds : NaN,
      latencyMs: summarize(lat),
      windows: this.windows,
      windowEvents: this.windowEvents,
    };
  }

  private closeWindow(at: number): void {
    const seconds = (at - this.windowStart.at) / 1000;
    this.windows.push({
      from: this.windowStart.acked,
      to: this.acked,
      seconds,
      eventsPerSec: seconds > 0 ? (this.okTrue - this.windowStart.okTrue) / seconds : NaN,
    });
    this.windowStart = { at, acked: this.acked, okTrue: this.okTrue };
  }

  /** Handles one frame from connection k; true when it acknowledged one of k's in-flight events. */
  private onFrame(k: number, f: RelayFrame): boolean {
    const { corpus, conns: c } = this.opts;
    switch (f[0]) {
      case "OK": {
        const [, id, accepted, message] = f as [string, string, boolean, string];
        const i = corpus.byId.get(id);
        if (i === undefined) return (this.failures.add("OK for an unknown id", JSON.stringify(f).slice(0, 200)), false);
        // The copy this connection sent (copy j goes on connection (i + j) mod C).
        const j = (k - (i % c) + c) % c;
        if (j >= this.copies)
          return (this.failures.add("OK on the wrong connection", `#${i} sent on ingest-${i % c}, answered on ingest-${k}`), false);
        const s = i * this.copies + j;
        if (this.state[s] === ACKED)
          return (this.failures.add("OK arrived twice", `#${i} ${id} on ingest-${k}: ${JSON.stringify(f)}`), false);
        if (this.state[s] !== SENT) return (this.failures.add("OK before EVENT was sent", `#${i} ${id}`), false);
        const now = performance.now();
        this.state[s] = ACKED;
        this.acked++;
        this.lastOk = now;
        this.latency[s] = now - this.sentAt[s]!;
        if (accepted === true) {
          this.okTrue++;
          if (typeof message === "string" && message.startsWith("duplicate:")) this.duplicates++;
          else if (this.storedBy[i] === 0) (this.storedBy[i] = 1), this.stored++;
          else this.failures.add("stored twice", `#${i} ${id}: two copies answered OK true without "duplicate:"`);
        } else if (typeof message === "string" && /^(duplicate|replaced):/.test(message) && this.opts.mayBeRefused(i)) {
          // An older version of a replaceable event after the newer one: bunstr says "duplicate:",
          // strfry "replaced: have newer event"; either is right only for a version the oracle drops.
          this.refusedOlder++;
        } else {
          this.okFalse++;
          this.failures.add(
            "OK false",
            `#${i} ${id}: ${JSON.stringify(message)}${this.opts.mayBeRefused(i) ? "" : " (the oracle stores this event)"}`,
          );
        }
        if (this.acked - this.windowStart.acked >= this.windowEvents) this.closeWindow(now);
        if (this.acked === corpus.size * this.copies) this.finish?.();
        return true;
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
