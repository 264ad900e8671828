// A receiver thread of the fanout run: raw TCP websocket clients (Bun.connect) that hold the
// subscriptions, cut frames out of the byte stream, find subscription and event id by position,
// compare the event bytes with what was published, and count per (subscription, event) in shared
// memory. No JSON.parse, no per-message objects, one clock read per TCP read: the client should not
// be what limits the rate. Started by receivers.ts as a worker thread with a ReceiverData.
import type { Socket as BunSocket } from "bun";
import { readlinkSync } from "node:fs";
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { clientFrame, upgradeRequest } from "../../lib/tcp.ts";
import { P_BAD, P_CLOSED, P_DONE, P_EOSE, P_READY, P_RECV, type ReceiverData, type ReceiverHello, type ReceiverReport } from "./channel.ts";
import { FailureLog } from "./failures.ts";
import { histBucket, newHist, nowMs, type LatencyHist } from "./latency.ts";

const HEX = new Int8Array(256).fill(-1);
for (let i = 0; i < 10; i++) HEX[48 + i] = i;
for (let i = 0; i < 6; i++) HEX[97 + i] = 10 + i;

interface RecvConn {
  conn: number;
  /** Subscription number ("s<num>") -> matrix row. */
  slots: Map<number, number>;
  reqs: Buffer;
  upgraded: boolean;
  head: string;
  leftover: Buffer | null;
  /** Bytes we still have to write (the socket took only part). */
  pendingWrite: Buffer | null;
  closed: boolean;
}

type Sock = BunSocket<RecvConn>;

const ID_KEY = Buffer.from('"id":"');

/**
 * Where the id's hex digits start in the event JSON at `at`: right after `{"id":"` (our key order,
 * bunstr's), else after the first `"id":"` (a relay that orders keys its own way, e.g. strfry's
 * sorted keys; a quote inside a string value is escaped, so that cannot match there). -1: none.
 */
function idStart(b: Buffer, at: number, end: number): number {
  if (b[at] === 0x7b && b.compare(ID_KEY, 0, 6, at + 1, at + 7) === 0) return at + 7;
  const k = b.indexOf(ID_KEY, at);
  return k < 0 || k + 6 + 64 > end ? -1 : k + 6;
}

/** Event index by the first 12 hex digits of its id (48 bits: no collisions among our events). */
function eventIndex(json: Buffer, offsets: Int32Array, n: number): Map<number, number> {
  const byKey = new Map<number, number>();
  for (let i = 0; i < n; i++) {
    let key = 0;
    const at = idStart(json, offsets[i]!, offsets[i + 1]!);
    for (let k = 0; k < 12; k++) key = key * 16 + HEX[json[at + k]!]!;
    if (byKey.has(key)) throw new Error(`two events share the id prefix of event #${i}`);
    byKey.set(key, i);
  }
  return byKey;
}

class Receiver {
  private readonly N: number;
  private readonly json: Buffer;
  private readonly offsets: Int32Array;
  private readonly expected: Uint8Array;
  private readonly counts: Uint8Array;
  private readonly remaining: Int32Array;
  private readonly progress: Int32Array;
  private readonly sentAt: Float64Array;
  private readonly lastValid: Float64Array;
  private readonly byKey: Map<number, number>;
  private readonly failures = new FailureLog();
  private readonly lat: [LatencyHist, LatencyHist] = [newHist(), newHist()];
  private readonly sockets: Sock[] = [];
  private frames = 0;
  private bytes = 0;
  private finishing = false;

  constructor(private readonly d: ReceiverData) {
    this.N = d.events;
    this.json = Buffer.from(d.json);
    this.offsets = new Int32Array(d.offsets);
    this.expected = new Uint8Array(d.expected);
    this.counts = new Uint8Array(d.counts);
    this.remaining = new Int32Array(d.remaining);
    this.progress = new Int32Array(d.progress);
    this.sentAt = new Float64Array(d.sentAt);
    this.lastValid = new Float64Array(d.lastValid);
    this.byKey = eventIndex(this.json, this.offsets, this.N);
  }

  private bad(c: RecvConn, kind: string, buf: Buffer, s: number, e: number): void {
    this.failures.add(kind, `conn ${c.conn}: ${buf.toString("utf8", s, Math.min(e, s + 300))}`);
    Atomics.add(this.progress, P_BAD, 1);
  }

  /** One text frame, bytes [s, e) of b, received at `now`. */
  private onText(c: RecvConn, b: Buffer, s: number, e: number, now: number): void {
    this.frames++;
    // ["EVENT","s<num>",{"id":"<64 hex>",...}]
    if (b[s + 2] === 0x45 && b[s + 3] === 0x56 && b[s + 9] === 0x22 && b[s + 10] === 0x73) return this.onEvent(c, b, s, e, now);
    // ["EOSE","s<num>"]
    if (b[s + 2] === 0x45 && b[s + 3] === 0x4f && b[s + 8] === 0x22 && b[s + 9] === 0x73) {
      Atomics.add(this.progress, P_EOSE, 1);
      return;
    }
    if (b[s + 2] === 0x41 && b[s + 3] === 0x55) return; // ["AUTH", challenge]: not needed here
    this.bad(c, "unexpected frame on a subscriber", b, s, e);
  }

  /** An EVENT frame: which subscription, which event, the exact bytes; counted once per (subscription, event). */
  private onEvent(c: RecvConn, b: Buffer, s: number, e: number, now: number): void {
    let q = s + 11;
    let num = 0;
    while (b[q]! >= 48 && b[q]! <= 57) num = num * 10 + b[q++]! - 48;
    const slot = c.slots.get(num);
    if (b[q] !== 0x22 || b[q + 1] !== 0x2c || slot === undefined)
      return this.bad(c, "wrong: EVENT for a subscription this connection does not hold", b, s, e);
    const js = q + 2;
    const at = idStart(b, js, e);
    if (at < 0) return this.bad(c, "wrong: EVENT frame not in the expected form", b, s, e);
    let key = 0;
    for (let k = 0; k < 12; k++) {
      const v = HEX[b[at + k]!]!;
      if (v < 0) return this.bad(c, "wrong: EVENT frame not in the expected form", b, s, e);
      key = key * 16 + v;
    }
    const ev = this.byKey.get(key);
    if (ev === undefined) return this.bad(c, "wrong: EVENT with an event never published", b, s, e);
    const off = this.offsets[ev]!;
    const len = this.offsets[ev + 1]! - off;
    if (e - 1 - js !== len || b[e - 1] !== 0x5d || b.compare(this.json, off, off + len, js, e - 1) !== 0)
      return this.bad(c, "wrong: event bytes differ from what was published", b, s, e);
    const cell = slot * this.N + ev;
    const cnt = this.counts[cell]!;
    if (cnt < 255) this.counts[cell] = cnt + 1;
    if (cnt === 0 && this.expected[cell] === 1) this.firstDelivery(ev, now);
  }

  private firstDelivery(ev: number, now: number): void {
    if (Atomics.sub(this.remaining, ev, 1) === 1) Atomics.add(this.progress, P_DONE, 1);
    Atomics.add(this.progress, P_RECV, 1);
    const ms = now - this.sentAt[ev]!;
    const h = this.lat[ev < this.d.loadEvents ? 0 : 1];
    h.hist[histBucket(Math.round(ms * 1000))]!++;
    h.n++;
    h.sumMs += ms;
    if (ms > h.maxMs) h.maxMs = ms;
    this.lastValid[this.d.thread] = now;
  }

  private write(sock: Sock, buf: Buffer): void {
    const c = sock.data;
    if (c.pendingWrite) return void (c.pendingWrite = Buffer.concat([c.pendingWrite, buf]));
    const n = sock.write(buf);
    if (n < buf.length) c.pendingWrite = buf.subarray(Math.max(0, n));
  }

  /** The 101 response (then the REQs go out); the offset in b where frames start, or -1 (wait, or refused). */
  private upgrade(sock: Sock, b: Buffer): number {
    const c = sock.data;
    c.head += b.toString("latin1");
    const end = c.head.indexOf("\r\n\r\n");
    if (end < 0) return -1;
    if (!c.head.startsWith("HTTP/1.1 101")) {
      this.failures.add("websocket upgrade refused", `conn ${c.conn}: ${c.head.slice(0, 200)}`);
      Atomics.add(this.progress, P_BAD, 1);
      sock.end();
      return -1;
    }
    c.upgraded = true;
    Atomics.add(this.progress, P_READY, 1);
    const p = end + 4 - (c.head.length - b.length);
    c.head = "";
    this.write(sock, c.reqs);
    return p;
  }

  onData(sock: Sock, chunk: Buffer): void {
    const now = nowMs();
    const c = sock.data;
    this.bytes += chunk.length;
    const b = c.leftover ? Buffer.concat([c.leftover, chunk]) : chunk;
    c.leftover = null;
    let p = 0;
    if (!c.upgraded && (p = this.upgrade(sock, b)) < 0) return;
    const len = b.length;
    while (p + 2 <= len) {
      const b0 = b[p]!;
      const b1 = b[p + 1]!;
      let size = b1 & 127;
      let h = 2;
      if (size === 126) {
        if (p + 4 > len) break;
        size = (b[p + 2]! << 8) | b[p + 3]!;
        h = 4;
      } else if (size === 127) {
        if (p + 10 > len) break;
        size = b.readUIntBE(p + 4, 6);
        h = 10;
      }
      if (b1 & 128) {
        this.failures.add("masked frame from the server", `conn ${c.conn}`);
        Atomics.add(this.progress, P_BAD, 1);
        return void sock.end();
      }
      const s = p + h;
      const e = s + size;
      if (e > len) break;
      const op = b0 & 15;
      if (op === 1 && b0 & 128) this.onText(c, b, s, e, now);
      else if (op === 9) this.write(sock, clientFrame(10, b.subarray(s, e)));
      else if (op === 8) {
        if (!this.finishing)
          this.failures.add(
            "connection closed by the relay",
            `conn ${c.conn}: close code ${size >= 2 ? b.readUInt16BE(s) : "none"} ${b.toString("utf8", s + 2, e)}`,
          );
      } else if (op !== 10) this.bad(c, `unexpected frame opcode ${op} (fin ${b0 >> 7})`, b, s, e);
      p = e;
    }
    if (p < len) c.leftover = Buffer.from(b.subarray(p));
  }

  private readonly handlers = {
    data: (sock: Sock, chunk: Buffer) => this.onData(sock, chunk),
    drain: (sock: Sock) => {
      const c = sock.data;
      const buf = c.pendingWrite;
      if (!buf) return;
      c.pendingWrite = null;
      this.write(sock, buf);
    },
    close: (sock: Sock) => {
      const c = sock.data;
      if (c.closed) return;
      c.closed = true;
      if (!this.finishing) {
        this.failures.add("receiving connection closed", `conn ${c.conn}`);
        Atomics.add(this.progress, P_CLOSED, 1);
      }
    },
    error: (sock: Sock, err: Error) => {
      if (!this.finishing) this.failures.add("socket error", `conn ${sock.data.conn}: ${err.message}`);
    },
  };

  /** Every connection of this thread, 100 at a time: upgrade, then its REQs (sent on the 101). */
  async connectAll(): Promise<void> {
    const BATCH = 100;
    const { conns, port, path } = this.d;
    for (let i = 0; i < conns.length; i += BATCH) {
      await Promise.all(
        conns.slice(i, i + BATCH).map(async (spec) => {
          const c: RecvConn = {
            conn: spec.conn,
            slots: new Map(spec.subs.map((s) => [s.num, s.slot])),
            reqs: Buffer.concat(spec.subs.map((s) => clientFrame(1, Buffer.from(s.req)))),
            upgraded: false,
            head: "",
            leftover: null,
            pendingWrite: null,
            closed: false,
          };
          try {
            const sock = await Bun.connect<RecvConn>({ hostname: "127.0.0.1", port, data: c, socket: this.handlers });
            this.sockets.push(sock);
            this.write(sock, Buffer.from(upgradeRequest(port, path)));
          } catch (err) {
            this.failures.add("cannot connect", `conn ${spec.conn}: ${(err as Error).message}`);
            Atomics.add(this.progress, P_CLOSED, 1);
          }
        }),
      );
    }
  }

  /** Closes every connection (waiting up to 2 s for them to go), then the report. */
  async finish(): Promise<ReceiverReport> {
    this.finishing = true;
    const close = clientFrame(8, Buffer.from([0x03, 0xe8]));
    for (const s of this.sockets) if (!s.data.closed) s.write(close), s.end();
    const until = performance.now() + 2000;
    while (this.sockets.some((s) => !s.data.closed) && performance.now() < until) await Bun.sleep(10);
    return { type: "result", lat: this.lat, frames: this.frames, bytes: this.bytes, failures: this.failures.entries() };
  }
}

function receiverMain(d: ReceiverData): void {
  const receiver = new Receiver(d);
  const hello: ReceiverHello = { type: "tid", tid: Number(readlinkSync("/proc/thread-self").split("/").pop()) };
  parentPort!.postMessage(hello);
  void receiver.connectAll();
  parentPort!.on("message", async (m) => {
    if (m === "finish") parentPort!.postMessage(await receiver.finish());
  });
}

if (!isMainThread && (workerData as ReceiverData | undefined)?.role === "fanout-receiver") receiverMain(workerData as ReceiverData);
