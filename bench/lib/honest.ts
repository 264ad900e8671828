// The honest client of bench/hostile2.ts, run in a worker thread of its own: from its own address it
// publishes a signed note and sends a small REQ every 100 ms without waiting for the answers, and
// times each OK and EOSE as it arrives (the attackers' work in the main thread never delays it).
// Messages: {start: port, ip} -> "started"; {stop: true} -> HonestFigures (after up to 5 s for
// what is still owed; anything unanswered then is a timeout, counted at its age).
import { finalizeEvent, generateSecretKey } from "nostr-tools/pure";
import { RawWs } from "./rawws.ts";
import { percentile } from "./stats.ts";

const TIMEOUT_MS = 5000;
const nowSec = () => Math.floor(Date.now() / 1000);

export interface HonestFigures {
  okSent: number;
  okAnswered: number;
  okAnswers: Record<string, number>;
  okP50: number;
  okP99: number;
  okMax: number;
  reqSent: number;
  reqAnswered: number;
  reqP50: number;
  reqP99: number;
  /** OKs and EOSEs not answered within 5 s (late answers included). */
  timeouts: number;
  notes: string[];
}

class Honest {
  readonly sk = generateSecretKey();
  okSent = 0;
  reqSent = 0;
  readonly okMs: number[] = [];
  readonly reqMs: number[] = [];
  readonly okAnswers = new Map<string, number>();
  private readonly pendingOk = new Map<string, number>();
  private readonly pendingReq = new Map<string, number>();
  private timer?: Timer;
  private ws?: RawWs;
  notes: string[] = [];

  async start(port: number, ip: string): Promise<void> {
    const ws = (this.ws = await RawWs.connect(port, ip));
    ws.keep = true;
    const seen = ws.frames;
    // Answers are taken as they come (the frames array grows); one pass per tick is enough at 100 ms.
    let read = 0;
    const take = () => {
      for (; read < seen.length; read++) {
        const f = seen[read]!;
        const t = performance.now();
        if (f[0] === "OK" && this.pendingOk.has(f[1])) {
          this.okMs.push(t - this.pendingOk.get(f[1])!);
          this.pendingOk.delete(f[1]);
          const key = f[2] === true ? "true" : `false ${String(f[3]).split(":")[0]}:`;
          this.okAnswers.set(key, (this.okAnswers.get(key) ?? 0) + 1);
        } else if ((f[0] === "EOSE" || f[0] === "CLOSED") && this.pendingReq.has(f[1])) {
          this.reqMs.push(t - this.pendingReq.get(f[1])!);
          this.pendingReq.delete(f[1]);
          if (f[0] === "CLOSED") this.notes.push(`REQ CLOSED ${f[2]}`);
          ws.send(["CLOSE", f[1]]);
        }
      }
      seen.splice(0, read);
      read = 0;
    };
    this.take = take;
    let i = 0;
    this.timer = setInterval(() => {
      take();
      if (ws.closed) return;
      const e = finalizeEvent({ kind: 1, created_at: nowSec(), tags: [["t", "honest"]], content: `honest note ${i}` }, this.sk);
      this.pendingOk.set(e.id, performance.now());
      ws.send(["EVENT", e]);
      this.okSent++;
      // A small REQ, unless 20 are still unanswered (the relay allows 50 subscriptions).
      if (this.pendingReq.size < 20) {
        const sub = `r${i}`;
        this.pendingReq.set(sub, performance.now());
        ws.send(["REQ", sub, { authors: [e.pubkey], kinds: [1], limit: 5 }]);
        this.reqSent++;
      }
      i++;
    }, 100);
    // Frames arriving between ticks are timed when they arrive.
    ws.onFrame = () => take();
  }
  private take = () => {};

  /** Stops sending; waits up to 5 s for what is owed; the rest are timeouts. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    for (const end = performance.now() + TIMEOUT_MS; performance.now() < end && (this.pendingOk.size || this.pendingReq.size); )
      await Bun.sleep(20), this.take();
    this.ws?.close();
  }

  figures(): HonestFigures {
    const now = performance.now();
    const late = (xs: number[]) => xs.filter((ms) => ms > TIMEOUT_MS).length;
    const unOk = [...this.pendingOk.values()].map((t) => now - t);
    const unReq = [...this.pendingReq.values()].map((t) => now - t);
    // Unanswered ones count at their age (a lower bound), so a stall shows in the percentiles.
    const ok = Float64Array.from([...this.okMs, ...unOk]).sort();
    const req = Float64Array.from([...this.reqMs, ...unReq]).sort();
    return {
      okSent: this.okSent,
      okAnswered: this.okMs.length,
      okAnswers: Object.fromEntries(this.okAnswers),
      okP50: percentile(ok, 50),
      okP99: percentile(ok, 99),
      okMax: ok.length ? ok[ok.length - 1]! : NaN,
      reqSent: this.reqSent,
      reqAnswered: this.reqMs.length,
      reqP50: percentile(req, 50),
      reqP99: percentile(req, 99),
      timeouts: unOk.length + unReq.length + late(this.okMs) + late(this.reqMs),
      notes: [...new Set(this.notes)].slice(0, 3),
    };
  }
}

declare const self: Worker;
let honest: Honest | undefined;
self.onmessage = async (m: MessageEvent) => {
  const d = m.data as { start?: number; ip?: string; stop?: boolean };
  if (d.start !== undefined) {
    honest = new Honest();
    try {
      await honest.start(d.start, d.ip!);
      postMessage("started");
    } catch (e) {
      postMessage(String(e));
    }
  } else if (d.stop && honest) {
    await honest.stop();
    postMessage(honest.figures());
  }
};
