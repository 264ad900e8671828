// A minimal websocket client over raw TCP (opened by tcp.ts) that can pick its source address
// (127.x.y.z), so one machine can play many clients: each attacker and each well-behaved client of
// a hostile-client scenario comes from an address of its own, as per-address limits see them.
import type { Socket } from "node:net";
import { clientFrame, clientTextFrame, openWebSocket, serverFrame } from "./tcp.ts";

export type Frame = [string, ...any[]];

export class RawWs {
  readonly frames: Frame[] = [];
  private buf: Buffer = Buffer.alloc(0);
  private waiters: { pred: (f: Frame) => boolean; resolve: (f: Frame) => void; from: number }[] = [];
  closed = false;
  /** Keep received frames (false: count them only, for clients that read megabytes). */
  keep = true;
  received = 0;
  /** Called with each frame kept, after it is stored (a client that times answers as they come). */
  onFrame?: (f: Frame) => void;

  private constructor(readonly sock: Socket) {}

  static async connect(port: number, localAddress: string, path = "/"): Promise<RawWs> {
    const { sock, rest } = await openWebSocket(port, path, localAddress);
    const ws = new RawWs(sock);
    ws.onData(rest);
    sock.on("data", (d: Buffer) => ws.onData(d));
    sock.on("error", () => {});
    sock.on("close", () => (ws.closed = true));
    sock.resume();
    return ws;
  }

  send(msg: unknown): void {
    if (!this.closed) this.sock.write(clientTextFrame(typeof msg === "string" ? msg : JSON.stringify(msg)));
  }

  /** The next frame (from index `from` on) matching pred; rejects after timeoutMs. */
  next(pred: (f: Frame) => boolean, timeoutMs = 10_000, from = 0): Promise<Frame> {
    for (let i = from; i < this.frames.length; i++) if (pred(this.frames[i]!)) return Promise.resolve(this.frames[i]!);
    return new Promise((resolve, reject) => {
      const w = { pred, resolve, from };
      this.waiters.push(w);
      setTimeout(() => {
        const i = this.waiters.indexOf(w);
        if (i >= 0) this.waiters.splice(i, 1), reject(new Error("timeout"));
      }, timeoutMs).unref?.();
    });
  }

  /** REQ until EOSE or CLOSED; the round-trip time in ms and the end frame. */
  async req(subId: string, filters: object[], timeoutMs = 10_000): Promise<{ ms: number; end: Frame; events: number }> {
    const from = this.frames.length;
    const t0 = performance.now();
    this.send(["REQ", subId, ...filters]);
    const end = await this.next((f) => (f[0] === "EOSE" || f[0] === "CLOSED") && f[1] === subId, timeoutMs, from);
    const events = this.frames.slice(from).filter((f) => f[0] === "EVENT" && f[1] === subId).length;
    this.send(["CLOSE", subId]);
    return { ms: performance.now() - t0, end, events };
  }

  close(): void {
    this.sock.destroy();
  }

  private onData(d: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
    for (let raw = serverFrame(this.buf); raw; raw = serverFrame(this.buf)) {
      const { opcode: op, payload } = raw;
      this.buf = this.buf.subarray(raw.size);
      if (op === 9) this.sock.write(clientFrame(10, payload)); // pong
      if (op !== 1) continue;
      this.received++;
      if (!this.keep) continue;
      const f = JSON.parse(payload.toString()) as Frame;
      this.frames.push(f);
      this.onFrame?.(f);
      for (let i = this.waiters.length - 1; i >= 0; i--) {
        const w = this.waiters[i]!;
        if (w.pred(f)) this.waiters.splice(i, 1), w.resolve(f);
      }
    }
  }
}
