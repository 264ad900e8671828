// The receiver threads (receiver.ts) seen from the main thread: start them, wait until every
// subscription is live, ask for their reports.
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import { P_BAD, P_CLOSED, P_EOSE, P_READY, type ReceiverData, type ReceiverHello, type ReceiverReport } from "./channel.ts";
import type { FailureLog } from "./failures.ts";
import type { Workload } from "./workload.ts";

const RECEIVER = join(import.meta.dir, "receiver.ts");

/** What every thread shares (ReceiverData without the per-thread part). */
export type SharedData = Omit<ReceiverData, "role" | "thread" | "conns">;

export class Receivers {
  /** The threads' kernel thread ids, as they say hello (for their CPU time). */
  readonly tids: number[] = [];
  private readonly workers: Worker[] = [];
  private readonly reports: Promise<ReceiverReport>[] = [];

  /** `threads` threads, connection c on thread c % threads; each connects and subscribes at once. */
  constructor(w: Workload, threads: number, shared: SharedData) {
    const byConn: ReceiverData["conns"] = Array.from({ length: w.conns }, (_, conn) => ({ conn, subs: [] }));
    for (const s of w.subs)
      byConn[s.conn]!.subs.push({ num: s.num, slot: s.slot, req: JSON.stringify(["REQ", `s${s.num}`, ...s.filters]) });
    for (let k = 0; k < threads; k++) {
      const data: ReceiverData = { role: "fanout-receiver", thread: k, conns: byConn.filter((_, c) => c % threads === k), ...shared };
      const worker = new Worker(RECEIVER, { workerData: data });
      this.workers.push(worker);
      this.reports.push(
        new Promise((resolve, reject) => {
          worker.on("message", (m: ReceiverReport | ReceiverHello) => (m.type === "tid" ? this.tids.push(m.tid) : resolve(m)));
          worker.on("error", reject);
          worker.on("exit", (code) => reject(new Error(`receiver thread ${k} exited (${code}) before reporting`)));
        }),
      );
    }
  }

  /** Waits (up to 60 s) for the EOSE of every subscription; stops early on a bad frame or a closed connection. */
  static async subscribed(progress: Int32Array, w: Workload, failures: FailureLog): Promise<void> {
    const S = w.subs.length;
    const deadline = performance.now() + 60_000;
    while (Atomics.load(progress, P_EOSE) < S) {
      if (Atomics.load(progress, P_BAD) || Atomics.load(progress, P_CLOSED)) break;
      if (performance.now() > deadline) {
        failures.add(
          "subscriptions not ready",
          `${Atomics.load(progress, P_READY)}/${w.conns} connections upgraded, ${Atomics.load(progress, P_EOSE)}/${S} EOSEs after 60 s`,
        );
        break;
      }
      await Bun.sleep(10);
    }
  }

  /** Every thread closes its connections and reports; throws if they do not within 20 s. */
  async finish(): Promise<ReceiverReport[]> {
    for (const wk of this.workers) wk.postMessage("finish");
    const reports = await Promise.race([Promise.all(this.reports), Bun.sleep(20_000).then(() => undefined)]);
    if (!reports) throw new Error("receiver threads did not report within 20 s");
    return reports;
  }

  terminate(): void {
    for (const wk of this.workers) void wk.terminate();
  }
}
