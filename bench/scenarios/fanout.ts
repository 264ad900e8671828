// Live fanout: many subscriptions held open after EOSE, events published from one pipelined
// connection, every delivery checked exactly (which subscription got which event, byte for byte)
// against the reference matcher (lib/match.ts). Two workloads (fanout/workload.ts):
//   mixed  - 1,000 different subscriptions (kinds, authors, #t, #p, #e, combinations, several
//            filters per REQ) over 100 connections; events made so an average event reaches tens
//            of subscriptions.
//   shared - N connections holding the same subscription (same id, same filter): one Bun topic
//            in the relay, one serialization per event, N deliveries.
// The receiving sockets are raw TCP websocket clients in worker threads (fanout/receiver.ts),
// built so the client is not what limits the rate (`--mock` runs the same client against a
// do-nothing relay, fanout/mock-relay.ts, to show what it can take).
//
// A run (runFanout): sign the events and make the subscriptions; compute the expected deliveries
// (fanout/expected.ts); start the relay (fanout/targets.ts) and the receivers (fanout/receivers.ts);
// publish under load, then the probe events one at a time (fanout/publisher.ts), sampling CPU
// (fanout/cpu.ts); collect the receivers' reports and check every (subscription, event) pair.
import type { NostrEvent } from "../../src/protocol/event.ts";
import { Conn } from "../lib/conn.ts";
import { memoryMiB } from "../lib/relay.ts";
import { createSigner, verifySignature, type Signer } from "../lib/sign.ts";
import { P_EOSE, P_SIZE, type ReceiverReport } from "./fanout/channel.ts";
import { sampleCpu } from "./fanout/cpu.ts";
import { expectDeliveries, sharedJson, tallyDeliveries, type Expected } from "./fanout/expected.ts";
import { FailureLog } from "./fanout/failures.ts";
import { addHist, histSummary, newHist, nowMs, type LatencySummary } from "./fanout/latency.ts";
import { Publisher } from "./fanout/publisher.ts";
import { Receivers } from "./fanout/receivers.ts";
import { externalRelay, spawnMock, spawnRelay, type Target } from "./fanout/targets.ts";
import {
  makeWorkload,
  mixedWorkload,
  sharedWorkload,
  sortedKeysJson,
  wireJson,
  type ScenarioName,
  type Sub,
  type Workload,
} from "./fanout/workload.ts";

export { makeWorkload, type LatencySummary, type ScenarioName, type Sub };

// ---------------------------------------------------------------- options and results

export interface FanoutOptions {
  scenario: ScenarioName;
  /** Subscriptions (mixed) or connections each holding the one shared subscription (shared). */
  subs: number;
  /** Receiving connections (mixed only; shared has one per subscription). */
  conns: number;
  /** Events published under load (the measured phase). */
  events: number;
  /** Events published one at a time afterwards, for the latency of an unloaded relay (0: none). */
  probe: number;
  verify: boolean;
  /** Run against a trivial in-memory relay (client capacity) instead of bunstr. */
  mock: boolean;
  /** EVENTs the publisher may have without an OK. */
  window: number;
  /** Deliveries due (of events published) but not yet received: bounds what queues up in the relay. */
  lag: number;
  /** Worker threads holding the receiving sockets. */
  recvThreads: number;
  /** A running relay to measure instead of spawning bunstr (its URL and PID). */
  external?: { url: string; pid: number };
  /** The relay sends events with their keys sorted (strfry): expect those bytes. */
  sortedKeys?: boolean;
  /** Run the relay under `bun --cpu-prof`, writing the profile (.cpuprofile) into this directory. */
  cpuProfDir?: string;
  /** Fail when nothing progresses for this long, ms. */
  stallMs: number;
  seed: number;
  log: (m: string) => void;
}

export interface FanoutResult {
  scenario: ScenarioName;
  target: "bunstr" | "mock" | "external";
  verify: boolean;
  subs: number;
  conns: number;
  /** Distinct (subscription id, filters) pairs: the relay's topics. */
  topics: number;
  /** Filters over all subscriptions. */
  filters: number;
  /** Events of the load phase. */
  events: number;
  /** Of them ephemeral (fanned out without being stored). */
  ephemeral: number;
  /** Deliveries due in the load phase. */
  expectedDeliveries: number;
  /** expectedDeliveries / events. */
  deliveriesPerEvent: number;
  /** Load events that match no subscription. */
  eventsMatchingNothing: number;
  /** Probe events (one at a time, after the load phase) and their deliveries. */
  probeEvents: number;
  probeDeliveries: number;
  /** Every delivery of both phases, checked against the expected (subscription, event) pairs. */
  received: { ok: number; dropped: number; duplicated: number; extra: number; wrong: number };
  /** Load phase: first EVENT sent -> last delivery (or OK) received. */
  seconds: number;
  deliveriesPerSec: number;
  eventsPerSec: number;
  /** EVENT sent -> delivery received, ms, over all deliveries of the load phase (includes queueing behind the window). */
  latencyMs: LatencySummary;
  /** The same for the probe events: one event in flight, nothing queued. */
  probeLatencyMs: LatencySummary;
  /**
   * Relay (or mock) process during the fanout phase: CPU of all threads, of it kernel time (sys),
   * and of its main thread alone (websockets, matching, publishing; not the verify workers).
   */
  relay: {
    cpuSec: number;
    sysSec: number;
    mainThreadSec: number;
    cpuPer1kDeliveries: number;
    cpuPerEventMs: number;
    cores: number;
    rssMiB: number;
    peakRssMiB: number;
    exitCode: number | null;
  };
  /** This process during the fanout phase: all threads, kernel part, the receiver threads alone. */
  generator: { cpuSec: number; sysSec: number; receiverSec: number; cores: number; recvThreads: number };
  /** Flow control used. */
  window: number;
  lag: number;
  setupSec: { sign: number; expect: number; connect: number };
  signer: "libsecp256k1" | "noble";
  /**
   * With --calibrate: the same run against the mock relay just before (what this client takes
   * when the relay costs almost nothing), to tell a relay limit from a client/machine limit.
   */
  clientCeiling?: { deliveriesPerSec: number; mockCpuSec: number; generatorCpuSec: number; latencyP50Ms: number };
  failures: string[];
  warnings: string[];
}

// ---------------------------------------------------------------- the run

/** The workload with its expected deliveries and the memory the receiver threads share. */
interface Prepared {
  w: Workload;
  /** Load events [0, N), then probe events [N, ALL). */
  N: number;
  ALL: number;
  jsons: string[];
  exp: Expected;
  json: Uint8Array;
  offsets: Int32Array;
  /** Uint8Array(subscriptions x events): deliveries seen (saturating at 255). */
  counts: Uint8Array;
  /** Int32Array(P_SIZE): the counters of channel.ts. */
  progress: Int32Array;
  /** When the publisher sent each event (nowMs()). */
  sentAt: Float64Array;
  /** Per receiver thread: its last first-time valid delivery. */
  lastValid: Float64Array;
  threads: number;
  signer: FanoutResult["signer"];
  setupSec: { sign: number; expect: number };
}

/** What the load phase measured (NaN when it did not run). */
interface LoadPhase {
  seconds: number;
  relayCpu: number;
  relaySys: number;
  relayMain: number;
  genCpu: number;
  genSys: number;
  receivers: number;
  rss: number;
  peak: number;
}

/** 1 and 2: events and subscriptions, the deliveries due, the shared memory. */
function prepare(opts: FanoutOptions, warnings: string[]): Prepared {
  const log = opts.log;
  let t = performance.now();
  const signer = createSigner();
  if (signer.backend === "noble") warnings.push("libsecp256k1 not found: events signed with @noble/curves (~1 ms each), setup is slow");
  const total = opts.events + opts.probe;
  const w = workload(opts, signer, total);
  const signSec = (performance.now() - t) / 1000;
  const first = w.events[0]!;
  if (!verifySignature(Buffer.from(first.sig, "hex"), Buffer.from(first.id, "hex"), Buffer.from(first.pubkey, "hex")))
    throw new Error("the signer produced an invalid signature");
  const ALL = w.events.length;
  const N = opts.events;
  const kind = signer.backend === "native" ? "libsecp256k1" : "noble";
  log(`${opts.scenario}: ${ALL} events signed (${kind}) and ${w.subs.length} subscriptions made in ${signSec.toFixed(1)} s`);

  t = performance.now();
  const jsons = w.events.map(wireJson);
  const delivered = opts.sortedKeys ? w.events.map(sortedKeysJson) : jsons;
  const exp = expectDeliveries(opts.scenario, w, N);
  const expectSec = (performance.now() - t) / 1000;
  log(
    `${opts.scenario}: ${exp.loadDeliveries} deliveries due for ${N} events (${(exp.loadDeliveries / N).toFixed(1)} per event, ${exp.matchingNothing} match nothing), ` +
      `${exp.expectedTotal - exp.loadDeliveries} for ${ALL - N} probe events; computed in ${expectSec.toFixed(1)} s`,
  );
  const threads = Math.max(1, Math.min(opts.recvThreads, w.conns));
  return {
    w,
    N,
    ALL,
    jsons,
    exp,
    ...sharedJson(delivered),
    counts: new Uint8Array(new SharedArrayBuffer(w.subs.length * ALL)),
    progress: new Int32Array(new SharedArrayBuffer(4 * P_SIZE)),
    sentAt: new Float64Array(new SharedArrayBuffer(8 * ALL)),
    lastValid: new Float64Array(new SharedArrayBuffer(8 * threads)),
    threads,
    signer: kind,
    setupSec: { sign: signSec, expect: expectSec },
  };
}

const workload = (opts: FanoutOptions, signer: Signer, events: number): Workload =>
  opts.scenario === "mixed"
    ? mixedWorkload(signer, events, opts.subs, opts.conns, opts.seed)
    : sharedWorkload(signer, events, opts.subs, opts.seed);

/** 4: the receiver threads, subscribed on every connection (EOSE), and the publisher's connection. */
async function connect(
  opts: FanoutOptions,
  p: Prepared,
  target: Target,
  failures: FailureLog,
): Promise<{ receivers: Receivers; publisher: Conn; connectSec: number }> {
  const t = performance.now();
  const url = new URL(target.url);
  const receivers = new Receivers(p.w, p.threads, {
    port: Number(url.port),
    path: url.pathname || "/",
    events: p.ALL,
    loadEvents: p.N,
    json: p.json.buffer as SharedArrayBuffer,
    offsets: p.offsets.buffer as SharedArrayBuffer,
    expected: p.exp.expected.buffer as SharedArrayBuffer,
    counts: p.counts.buffer as SharedArrayBuffer,
    remaining: p.exp.remaining.buffer as SharedArrayBuffer,
    progress: p.progress.buffer as SharedArrayBuffer,
    sentAt: p.sentAt.buffer as SharedArrayBuffer,
    lastValid: p.lastValid.buffer as SharedArrayBuffer,
  });
  let publisher: Conn;
  try {
    publisher = await Conn.connect(target.url, "publisher");
  } catch (err) {
    receivers.terminate();
    throw err;
  }
  await Receivers.subscribed(p.progress, p.w, failures);
  const connectSec = (performance.now() - t) / 1000;
  opts.log(
    `${opts.scenario}: ${p.w.conns} connections, ${Atomics.load(p.progress, P_EOSE)}/${p.w.subs.length} subscriptions live (EOSE) in ${connectSec.toFixed(1)} s`,
  );
  return { receivers, publisher, connectSec };
}

/** 5: the load phase, measured (CPU, memory, time to the last delivery), then the probe phase. */
async function publish(
  opts: FanoutOptions,
  p: Prepared,
  target: Target,
  pub: Publisher,
  tids: number[],
  failures: FailureLog,
): Promise<LoadPhase> {
  const none = {
    seconds: NaN,
    relayCpu: NaN,
    relaySys: NaN,
    relayMain: NaN,
    genCpu: NaN,
    genSys: NaN,
    receivers: NaN,
    rss: NaN,
    peak: NaN,
  };
  if (failures.count !== 0 || Atomics.load(p.progress, P_EOSE) !== p.w.subs.length) return none;
  const running = () => target.running();
  const c0 = sampleCpu(target.pid, tids);
  const t0 = nowMs();
  const ok = await pub.phase(p.N, opts.window, opts.lag, opts.stallMs, running);
  const c1 = sampleCpu(target.pid, tids);
  const mem = memoryMiB(target.pid);
  let t1 = pub.lastOk;
  for (const x of p.lastValid) t1 = Math.max(t1, x);
  const load: LoadPhase = {
    seconds: (t1 - t0) / 1000,
    relayCpu: c1.relay.user + c1.relay.sys - c0.relay.user - c0.relay.sys,
    relaySys: c1.relay.sys - c0.relay.sys,
    relayMain: c1.relayMain - c0.relayMain,
    genCpu: c1.gen.user + c1.gen.sys - c0.gen.user - c0.gen.sys,
    genSys: c1.gen.sys - c0.gen.sys,
    receivers: c1.receivers - c0.receivers,
    rss: mem.rss,
    peak: mem.peak,
  };
  opts.log(
    `${opts.scenario}: load: ${pub.sent} sent, ${pub.oks} OKs, ${pub.done()}/${p.N} events fully delivered in ${load.seconds.toFixed(2)} s`,
  );
  if (ok && p.ALL > p.N) {
    const tp = performance.now();
    await pub.phase(p.ALL, 1, 0, opts.stallMs, running);
    opts.log(`${opts.scenario}: probe: ${p.ALL - p.N} events one at a time in ${((performance.now() - tp) / 1000).toFixed(2)} s`);
  }
  return load;
}

/** 6 and 7: the receivers' reports and the exact check of every (subscription, event) pair sent. */
function check(p: Prepared, reports: ReceiverReport[], pub: Publisher, publisher: Conn, failures: FailureLog) {
  const loadLat = newHist();
  const probeLat = newHist();
  for (const rep of reports) {
    addHist(loadLat, rep.lat[0]);
    addHist(probeLat, rep.lat[1]);
    failures.merge(rep.failures);
  }
  for (const e of publisher.errors) failures.add("bad frame on the publisher", e);
  if (pub.sent < p.ALL)
    failures.add("run aborted", `after the first failure, with ${pub.sent} of ${p.ALL} events published (only those are checked below)`);
  if (pub.oks < pub.sent) failures.add("events without an OK", `${pub.sent - pub.oks} of ${pub.sent} sent`);
  const tally = tallyDeliveries(p.w, p.jsons, p.exp.expected, p.counts, pub.sent, (kind, detail, count) =>
    failures.add(kind, detail, count),
  );
  const wrong = reports.reduce((a, rep) => a + rep.failures.reduce((b, [kind, c]) => b + (kind.startsWith("wrong") ? c : 0), 0), 0);
  return { received: { ...tally, wrong }, latencyMs: histSummary(loadLat), probeLatencyMs: histSummary(probeLat) };
}

export async function runFanout(opts: FanoutOptions): Promise<FanoutResult> {
  const failures = new FailureLog();
  const warnings: string[] = [];
  const p = prepare(opts, warnings);

  // 3. The relay.
  const target = opts.mock
    ? await spawnMock()
    : opts.external
      ? externalRelay(opts.external.url, opts.external.pid)
      : await spawnRelay(opts, p.w);
  opts.log(
    `${opts.scenario}: ${opts.mock ? "mock relay" : "relay"} pid ${target.pid} at ${target.url}${opts.mock ? "" : `, signature checks ${opts.verify ? "on" : "off"}`}`,
  );
  let receivers: Receivers | undefined;
  let publisher: Conn | undefined;
  try {
    const c = await connect(opts, p, target, failures);
    ({ receivers, publisher } = c);
    const pub = new Publisher(publisher, p.w.events, p.jsons, p.exp.initialRemaining, p.progress, p.sentAt, failures);
    const load = await publish(opts, p, target, pub, receivers.tids, failures);
    if (publisher.closed) failures.add("publisher connection closed", `code ${publisher.closeCode}`);
    if (!target.running()) failures.add("relay exited during the run", target.stderr().slice(-1500));

    // Late frames (duplicates, extras) get a moment to arrive, then the receivers report.
    await Bun.sleep(300);
    const checked = check(p, await receivers.finish(), pub, publisher, failures);

    await publisher.close();
    publisher = undefined;
    const exitCode = await target.stop();
    if (!opts.mock && exitCode !== 0) failures.add("relay exit code", `${exitCode} after SIGTERM, expected 0`);
    const stderr = target.stderr().trim();
    if (stderr) warnings.push(`relay stderr: ${stderr.slice(-1500)}`);
    return result(opts, p, load, checked, exitCode, c.connectSec, failures, warnings);
  } finally {
    publisher?.ws.close();
    receivers?.terminate();
    target.kill();
    target.cleanup();
  }
}

function result(
  opts: FanoutOptions,
  p: Prepared,
  load: LoadPhase,
  checked: Pick<FanoutResult, "received" | "latencyMs" | "probeLatencyMs">,
  exitCode: number | null,
  connectSec: number,
  failures: FailureLog,
  warnings: string[],
): FanoutResult {
  const { w, N, ALL, exp } = p;
  const loadDeliveries = exp.loadDeliveries;
  const seconds = load.seconds;
  return {
    scenario: opts.scenario,
    target: opts.mock ? "mock" : opts.external ? "external" : "bunstr",
    verify: opts.verify && !opts.mock,
    subs: w.subs.length,
    conns: w.conns,
    topics: new Set(w.subs.map((s) => JSON.stringify([s.num, s.filters]))).size,
    filters: w.subs.reduce((a, s) => a + s.filters.length, 0),
    events: N,
    ephemeral: w.events.slice(0, N).filter((e: NostrEvent) => e.kind >= 20000 && e.kind < 30000).length,
    expectedDeliveries: loadDeliveries,
    deliveriesPerEvent: loadDeliveries / N,
    eventsMatchingNothing: exp.matchingNothing,
    probeEvents: ALL - N,
    probeDeliveries: exp.expectedTotal - loadDeliveries,
    received: checked.received,
    seconds,
    deliveriesPerSec: loadDeliveries / seconds,
    eventsPerSec: N / seconds,
    latencyMs: checked.latencyMs,
    probeLatencyMs: checked.probeLatencyMs,
    relay: {
      cpuSec: load.relayCpu,
      sysSec: load.relaySys,
      mainThreadSec: load.relayMain,
      cpuPer1kDeliveries: (load.relayCpu / loadDeliveries) * 1000,
      cpuPerEventMs: (load.relayCpu / N) * 1000,
      cores: load.relayCpu / seconds,
      rssMiB: load.rss,
      peakRssMiB: load.peak,
      exitCode,
    },
    generator: {
      cpuSec: load.genCpu,
      sysSec: load.genSys,
      receiverSec: load.receivers,
      cores: load.genCpu / seconds,
      recvThreads: p.threads,
    },
    window: opts.window,
    lag: opts.lag,
    setupSec: { ...p.setupSec, connect: connectSec },
    signer: p.signer,
    failures: failures.lines(),
    warnings,
  };
}
