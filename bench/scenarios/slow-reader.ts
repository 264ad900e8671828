// Slow reader: N normal subscribers receive a steady stream of small events ("ticks") while a
// bulk stream of ephemeral events runs beside it. The run alternates baseline windows (no slow
// reader) and slow windows: in each slow window a raw-TCP client subscribes to both streams with
// the same subscription ids and filters as the others (so it shares their Bun topics) and never
// reads. It must be cut off once its unsent output passes max_pending_bytes, while every normal
// subscriber keeps receiving every tick with a p99 latency close to the baseline's, and the
// relay's memory stays bounded. Alternating the windows keeps other load on the machine from
// landing in one of them only. Shared by test/slow-reader.test.ts and bench/slow-reader.ts.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Conn } from "../lib/conn.ts";
import { fakePubkey, unsignedEvent } from "../lib/events.ts";
import { cpuSeconds, memoryMiB, RATE_LIMITS_OFF, RelayProcess } from "../lib/relay.ts";
import { summarize, type Summary } from "../lib/stats.ts";
import { holdsSocket, socketFd, stuckReader, tcpEntry } from "../lib/tcp.ts";

export interface SlowReaderOptions {
  subscribers: number;
  /** Events per second that every subscriber receives. */
  tickRate: number;
  /**
   * Ticks are ephemeral (kind 20000) by default, so the latency compared is fanout alone; true =
   * stored kind-1 events, which adds the writer's commits and WAL checkpoints to the picture.
   */
  storedTicks?: boolean;
  /** Ephemeral events per second on the bulk stream (the witness and the slow readers receive them). */
  bulkRate: number;
  /** Content bytes of one bulk event. */
  bulkBytes: number;
  /** Baseline / slow window pairs. */
  rounds: number;
  /** Length of each baseline window, ms. */
  baselineMs: number;
  /** A slow window lasts until its slow reader is cut off, plus this (default 500 ms). */
  afterCutOffMs?: number;
  /** Give up waiting for a cut-off after this long. */
  maxSlowMs: number;
  /** Written to the relay's config; undefined = the relay's default. */
  maxPendingBytes?: number;
  /**
   * Ephemeral events (bulk-sized, subscribed by no one) published before measuring, so the
   * relay's catch-up ring of recent events (8,192 entries whatever their size) is already full and
   * its memory no longer grows during the run. Default 8192; 0 = skip.
   */
  prefillRing?: number;
  /** How often we look whether the relay still holds the slow reader's socket, ms (default 5). */
  pollMs?: number;
  log?: (m: string) => void;
}

export interface CutOff {
  /** Slow reader's REQs written -> the relay closed its socket (its descriptor gone from /proc/<pid>/fd), ms; null = never. */
  ms: number | null;
  /** Frame bytes the relay had been asked to send it by then (what the witness got since it joined: same frames). */
  destinedBytes: number;
  /** Bytes it finally read when it resumed reading (what sat in kernel buffers). */
  deliveredBytes: number;
  /** destinedBytes - deliveredBytes: what the relay held (or dropped) for it when it cut it off. */
  pendingBytes: number;
  /** It saw the connection close after resuming. */
  closed: boolean;
}

export interface PhaseStats {
  /** Ticks acknowledged that were sent in this kind of window. */
  ticks: number;
  /** Publisher sent a tick -> a subscriber received it, ms, over every (tick, subscriber). */
  latencyMs: Summary;
  /** Milliseconds spent in this kind of window. */
  ms: number;
  /**
   * The relay's CPU seconds in this kind of window (/proc): the work it did there, which other
   * load on the machine delays but does not add to, unlike latency.
   */
  relayCpuSec: number;
}

export interface SlowReaderResult {
  subscribers: number;
  maxPendingBytes: number;
  baseline: PhaseStats;
  slow: PhaseStats;
  cutOffs: CutOff[];
  /** Subscribers that did not receive every tick exactly once (name: missing/duplicates). */
  incomplete: string[];
  /** Bulk events acknowledged but not received by the witness. */
  witnessMissing: number;
  /** Ticks or bulk events refused by the relay. */
  refused: string[];
  /** A normal REQ after the run got EOSE. */
  relayServes: boolean;
  relayExitCode: number | null;
  /** Relay RSS: at the first baseline window, max in baseline windows, max in slow windows, at the end (MiB). */
  rss: { start: number; baselineMax: number; slowMax: number; end: number };
  /** Relay CPU seconds over the measured windows. */
  relayCpuSec: number;
  /** CPU seconds of this process (subscribers, publishers, slow readers) over the same time. */
  clientCpuSec: number;
  /** Wall time of the measured windows, s. */
  measuredSec: number;
  stderr: string;
}

const DEFAULT_MAX_PENDING = 4 * 1024 * 1024;
const UNMEASURED = 255;

/** A normal subscriber: a plain WebSocket; the tick number is read from the frame without JSON.parse. */
class Subscriber {
  ws!: WebSocket;
  readonly counts: Uint8Array;
  /** Latencies by window kind: [baseline, slow]. */
  readonly latencies: number[][] = [[], []];
  constructor(
    readonly name: string,
    capacity: number,
    private readonly sentAt: Float64Array,
    private readonly kindOf: Uint8Array,
  ) {
    this.counts = new Uint8Array(capacity);
  }

  connect(url: string, req: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url);
      this.ws = ws;
      const timer = setTimeout(() => reject(new Error(`${this.name}: no EOSE within 20 s`)), 20_000);
      ws.onerror = () => reject(new Error(`${this.name}: cannot connect`));
      ws.onopen = () => ws.send(req);
      ws.onmessage = (m) => {
        const s = m.data as string;
        if (s.startsWith('["EOSE"')) return (clearTimeout(timer), resolve());
        if (!s.startsWith('["EVENT","ticks"')) return;
        const now = performance.now();
        const at = s.indexOf('"content":"tick ');
        const seq = parseInt(s.slice(at + 16, s.indexOf('"', at + 16)), 10);
        if (!(seq >= 0 && seq < this.counts.length)) return;
        if (this.counts[seq]! < 255) this.counts[seq]!++;
        const kind = this.kindOf[seq]!;
        if (kind !== UNMEASURED) this.latencies[kind]!.push(now - this.sentAt[seq]!);
      };
    });
  }
}

export async function runSlowReader(opts: SlowReaderOptions): Promise<SlowReaderResult> {
  const log = opts.log ?? (() => {});
  const cap = opts.maxPendingBytes ?? DEFAULT_MAX_PENDING;
  const afterCutOffMs = opts.afterCutOffMs ?? 500;
  const pollMs = opts.pollMs ?? 5;
  const dataDir = mkdtempSync(join(tmpdir(), "bunstr-slow-reader-"));
  // Every client here comes from 127.0.0.1: lift the per-IP connection cap above our count.
  const limits = [`max_connections_per_ip = ${opts.subscribers + opts.rounds + 100}`];
  if (opts.maxPendingBytes !== undefined) limits.push(`max_pending_bytes = ${opts.maxPendingBytes}`);
  writeFileSync(join(dataDir, "bunstr.toml"), `[limits]\n${limits.join("\n")}\n${RATE_LIMITS_OFF}`);
  const args = ["--config", join(dataDir, "bunstr.toml")];
  const relay = await RelayProcess.spawn({ verify: false, dataDir, args });
  const port = Number(new URL(relay.url).port);
  const run = Math.random().toString(36).slice(2, 8);
  const tickKind = opts.storedTicks ? 1 : 20000;
  const tickReq = JSON.stringify(["REQ", "ticks", { kinds: [tickKind], "#t": [`tick-${run}`], limit: 0 }]);
  const bulkReq = JSON.stringify(["REQ", "bulk", { kinds: [20001], "#t": [`bulk-${run}`], limit: 0 }]);

  const totalMs = 1000 + opts.rounds * (opts.baselineMs + opts.maxSlowMs + afterCutOffMs + 1000) + 2000;
  const capacity = Math.ceil((opts.tickRate * totalMs) / 1000) + 100;
  const sentAt = new Float64Array(capacity);
  const kindOf = new Uint8Array(capacity).fill(UNMEASURED); // 0 baseline window, 1 slow window
  const acked = new Uint8Array(capacity);
  const subs: Subscriber[] = [];
  const conns: Conn[] = [];
  const stuckSockets: { destroy(): void }[] = [];
  // RSS sampled every 100 ms, tagged with the window kind it fell in.
  let kind = UNMEASURED;
  const rssMax = [0, 0];
  const sampler = setInterval(() => {
    if (!relay.running || kind === UNMEASURED) return;
    rssMax[kind] = Math.max(rssMax[kind]!, memoryMiB(relay.pid).rss);
  }, 100);
  try {
    for (let i = 0; i < opts.subscribers; i += 100) {
      const batch = Array.from(
        { length: Math.min(100, opts.subscribers - i) },
        (_, j) => new Subscriber(`sub-${i + j}`, capacity, sentAt, kindOf),
      );
      await Promise.all(batch.map((s) => s.connect(relay.url, tickReq)));
      subs.push(...batch);
    }
    log(`${subs.length} subscribers on the tick stream`);
    // The witness reads both streams as one more normal subscriber: every frame it gets, a slow
    // reader subscribed at the same moment is sent too (same subscription ids and filters).
    const witness = await Conn.connect(relay.url, "witness");
    conns.push(witness);
    let witnessBytes = 0;
    let witnessBulk = 0;
    let witnessEose = 0;
    witness.onFrame = (f, raw) => {
      if (f[0] === "EOSE") witnessEose++;
      if (f[0] !== "EVENT") return;
      witnessBytes += Buffer.byteLength(raw) + 4; // + websocket header (2 or 4 bytes; 4 for these sizes)
      if (f[1] === "bulk") witnessBulk++;
    };
    witness.send(tickReq);
    witness.send(bulkReq);
    while (witnessEose < 2) await Bun.sleep(5);

    const publisher = await Conn.connect(relay.url, "publisher");
    const bulkPublisher = await Conn.connect(relay.url, "bulk-publisher");
    conns.push(publisher, bulkPublisher);
    const refused: string[] = [];
    let ticksAnswered = 0;
    const tickIds = new Map<string, number>();
    publisher.onFrame = (f) => {
      if (f[0] !== "OK") return;
      const seq = tickIds.get(f[1] as string);
      if (seq === undefined) return;
      ticksAnswered++;
      if (f[2] === true) acked[seq] = 1;
      else refused.push(`tick ${seq}: ${f[3]}`);
    };
    let bulkAcked = 0;
    bulkPublisher.onFrame = (f) => {
      if (f[0] !== "OK") return;
      if (f[2] === true) bulkAcked++;
      else refused.push(`bulk: ${f[3]}`);
    };
    const author = fakePubkey();
    const pad = "b".repeat(opts.bulkBytes);
    let seq = 0;
    let bulkSent = 0;
    // Both streams are paced against the clock (timers fire late under load; we catch up).
    const t0 = performance.now();
    const due = (rate: number) => Math.floor(((performance.now() - t0) * rate) / 1000);
    const tickTimer = setInterval(
      () => {
        const n = Math.min(due(opts.tickRate), capacity);
        while (seq < n) {
          const e = unsignedEvent(author, { kind: tickKind, content: `tick ${seq}`, tags: [["t", `tick-${run}`]] });
          tickIds.set(e.id, seq);
          kindOf[seq] = kind;
          sentAt[seq] = performance.now();
          seq++;
          publisher.send(`["EVENT",${JSON.stringify(e)}]`);
        }
      },
      Math.max(1, Math.min(10, 1000 / opts.tickRate)),
    );
    const bulkTimer = setInterval(() => {
      const n = due(opts.bulkRate);
      while (bulkSent < n) {
        const e = unsignedEvent(author, { kind: 20001, content: `bulk ${bulkSent++} ${pad}`, tags: [["t", `bulk-${run}`]] });
        bulkPublisher.send(`["EVENT",${JSON.stringify(e)}]`);
      }
    }, 10);

    // Fill the catch-up ring first (pipelined, bounded), so RSS is at its steady state.
    const prefill = opts.prefillRing ?? 8192;
    if (prefill > 0) {
      const filler = await Conn.connect(relay.url, "filler");
      conns.push(filler);
      let oks = 0;
      let sent = 0;
      const WINDOW = 256;
      const sendMore = () => {
        while (sent < prefill && sent - oks < WINDOW) {
          const e = unsignedEvent(author, { kind: 20001, content: `fill ${sent++} ${pad}`, tags: [["t", `fill-${run}`]] });
          filler.send(`["EVENT",${JSON.stringify(e)}]`);
        }
      };
      filler.onFrame = (f) => {
        if (f[0] !== "OK") return;
        oks++;
        if (f[2] !== true) refused.push(`fill: ${f[3]}`);
        sendMore();
      };
      sendMore();
      const until = performance.now() + 60_000;
      while (oks < prefill && performance.now() < until) await Bun.sleep(20);
      if (oks < prefill) throw new Error(`pre-filling the ring: only ${oks}/${prefill} OKs within 60 s`);
      log(`catch-up ring pre-filled with ${prefill} events; relay RSS ${memoryMiB(relay.pid).rss.toFixed(1)} MiB`);
    }
    await Bun.sleep(1000); // warm-up, not measured
    const rssStart = memoryMiB(relay.pid).rss;
    const cpu0 = cpuSeconds(relay.pid);
    const client0 = process.cpuUsage();
    const wall0 = performance.now();
    const windowMs = [0, 0];
    const windowCpu = [0, 0];
    const cutOffs: CutOff[] = [];
    for (let r = 1; r <= opts.rounds; r++) {
      let w0 = performance.now();
      let c0 = cpuSeconds(relay.pid);
      kind = 0;
      await Bun.sleep(opts.baselineMs);
      windowMs[0]! += performance.now() - w0;
      windowCpu[0]! += cpuSeconds(relay.pid) - c0;

      w0 = performance.now();
      c0 = cpuSeconds(relay.pid);
      kind = 1;
      const witnessAtJoin = witnessBytes;
      const stuck = await stuckReader(port, [tickReq, bulkReq]);
      stuckSockets.push(stuck.sock);
      // The relay's end of this connection: its socket inode and descriptor. The cut-off is the
      // moment the relay no longer holds that descriptor (we never read, so we cannot see a close).
      const entry = tcpEntry(port, stuck.localPort);
      const fd = entry && socketFd(relay.pid, entry.inode);
      if (!entry || fd === undefined) throw new Error(`cannot find the relay's socket for the slow reader (port ${stuck.localPort})`);
      let cutAt: number | null = null;
      let destined = 0;
      while (performance.now() - w0 < opts.maxSlowMs) {
        if (!holdsSocket(relay.pid, fd, entry.inode)) {
          cutAt = performance.now();
          destined = witnessBytes - witnessAtJoin;
          break;
        }
        if (!relay.running) throw new Error(`relay died during the slow window:\n${relay.stderr.text}`);
        await Bun.sleep(pollMs);
      }
      await Bun.sleep(afterCutOffMs);
      windowMs[1]! += performance.now() - w0;
      windowCpu[1]! += cpuSeconds(relay.pid) - c0;
      kind = UNMEASURED; // reading what the slow reader was sent is our work, not the relay's
      const drained = await stuck.drain(5000);
      const cut: CutOff = {
        ms: cutAt === null ? null : cutAt - stuck.subscribedAt,
        destinedBytes: destined,
        deliveredBytes: drained.bytes,
        pendingBytes: destined - drained.bytes,
        closed: drained.closed,
      };
      cutOffs.push(cut);
      log(
        `round ${r}: slow reader ${cut.ms === null ? "NEVER cut off" : `cut off after ${cut.ms.toFixed(0)} ms, ${(cut.pendingBytes / 1048576).toFixed(2)} MiB pending in the relay`}`,
      );
      if (cutAt === null) break;
      await Bun.sleep(300);
    }
    const relayCpuSec = cpuSeconds(relay.pid) - cpu0;
    const clientCpu = process.cpuUsage(client0);
    const measuredSec = (performance.now() - wall0) / 1000;
    clearInterval(tickTimer);
    clearInterval(bulkTimer);

    // Let every tick arrive, then count.
    const deadline = performance.now() + 10_000;
    const allIn = () =>
      ticksAnswered >= seq &&
      bulkAcked >= bulkSent - refused.length &&
      witnessBulk >= bulkAcked &&
      subs.every((s) => s.counts.subarray(0, seq).every((c, i) => c >= acked[i]!));
    while (!allIn() && performance.now() < deadline) await Bun.sleep(50);
    const incomplete: string[] = [];
    for (const s of subs) {
      let missing = 0;
      let dup = 0;
      for (let i = 0; i < seq; i++) {
        if (acked[i] && s.counts[i] === 0) missing++;
        if (s.counts[i]! > 1) dup++;
      }
      if (missing || dup) incomplete.push(`${s.name}: ${missing} missing, ${dup} duplicated`);
    }
    const rssEnd = memoryMiB(relay.pid).rss;
    const probe = await Conn.connect(relay.url, "probe");
    conns.push(probe);
    const served = await new Promise<boolean>((resolve) => {
      const t = setTimeout(() => resolve(false), 5000);
      probe.onFrame = (f) => f[0] === "EOSE" && (clearTimeout(t), resolve(true));
      probe.send(JSON.stringify(["REQ", "probe", { kinds: [1], limit: 5 }]));
    });
    const stats = (k: number): PhaseStats => {
      let ticks = 0;
      for (let i = 0; i < seq; i++) if (kindOf[i] === k && acked[i]) ticks++;
      return { ticks, latencyMs: summarize(subs.flatMap((s) => s.latencies[k]!)), ms: windowMs[k]!, relayCpuSec: windowCpu[k]! };
    };
    const result = {
      subscribers: subs.length,
      maxPendingBytes: cap,
      baseline: stats(0),
      slow: stats(1),
      cutOffs,
      incomplete,
      witnessMissing: bulkAcked - witnessBulk,
      refused,
      relayServes: served,
      relayExitCode: null as number | null,
      rss: { start: rssStart, baselineMax: rssMax[0]!, slowMax: rssMax[1]!, end: rssEnd },
      relayCpuSec,
      clientCpuSec: (clientCpu.user + clientCpu.system) / 1e6,
      measuredSec,
      stderr: "",
    };
    clearInterval(sampler);
    await Promise.all(conns.map((c) => c.close(500)));
    for (const s of subs) s.ws.close();
    result.relayExitCode = await relay.stop();
    result.stderr = relay.stderr.text;
    return result;
  } finally {
    clearInterval(sampler);
    for (const s of stuckSockets) s.destroy();
    for (const s of subs) s.ws?.close();
    relay.kill();
    await relay.proc.exited;
    relay.removeDataDir();
  }
}

export function slowReaderReport(r: SlowReaderResult): string {
  const mib = (b: number) => (b / 1048576).toFixed(2);
  const lat = (p: PhaseStats) =>
    `p50 ${p.latencyMs.p50.toFixed(1)} / p99 ${p.latencyMs.p99.toFixed(1)} / max ${p.latencyMs.max.toFixed(1)} ms over ${p.latencyMs.n} deliveries (${p.ticks} ticks, ${(p.ms / 1000).toFixed(1)} s)`;
  return [
    `${r.subscribers} subscribers; max_pending_bytes ${r.maxPendingBytes} (${mib(r.maxPendingBytes)} MiB)`,
    `baseline windows   : ${lat(r.baseline)}`,
    `slow-reader windows: ${lat(r.slow)}`,
    ...r.cutOffs.map(
      (c, i) =>
        `slow reader ${i + 1}: ${c.ms === null ? "NEVER cut off" : `cut off ${c.ms.toFixed(0)} ms after subscribing`}; ${mib(c.destinedBytes)} MiB sent its way, ` +
        `${mib(c.deliveredBytes)} MiB of it sat in kernel buffers, so ${mib(c.pendingBytes)} MiB were pending in the relay when it was cut`,
    ),
    `relay RSS MiB      : start ${r.rss.start.toFixed(1)}, max in baseline ${r.rss.baselineMax.toFixed(1)}, max with slow reader ${r.rss.slowMax.toFixed(1)}, end ${r.rss.end.toFixed(1)}`,
    `CPU over ${r.measuredSec.toFixed(1)} s of windows: relay ${r.relayCpuSec.toFixed(1)} s, this process (clients) ${r.clientCpuSec.toFixed(1)} s (2 cores shared)`,
    `relay CPU per second of window: baseline ${(r.baseline.relayCpuSec / (r.baseline.ms / 1000)).toFixed(3)} s, with a slow reader ${(r.slow.relayCpuSec / (r.slow.ms / 1000)).toFixed(3)} s`,
    `delivery           : ${r.incomplete.length} subscribers incomplete, witness missed ${r.witnessMissing} bulk events, ${r.refused.length} refused; ` +
      `relay serves after: ${r.relayServes}; exit ${r.relayExitCode}`,
  ].join("\n");
}
