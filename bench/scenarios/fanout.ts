// Live fanout: many subscriptions held open after EOSE, events published from one pipelined
// connection, every delivery checked exactly (which subscription got which event, byte for byte)
// against the reference matcher (lib/match.ts). Two workloads:
//   mixed  - 1,000 different subscriptions (kinds, authors, #t, #p, #e, combinations, several
//            filters per REQ) over 100 connections; events made so an average event reaches tens
//            of subscriptions.
//   shared - N connections holding the same subscription (same id, same filter): one Bun topic
//            in the relay, one serialization per event, N deliveries.
// The receiving sockets are raw TCP websocket clients in worker threads (receiverMain below):
// they cut frames out of the byte stream, find subscription and event id by position, compare
// the event bytes with what was published, and count per (subscription, event) in shared memory.
// No JSON.parse, no per-message objects, one clock read per TCP read: the client should not be
// what limits the rate (`--mock` runs the same client against a do-nothing relay to show what
// it can take).
import { dlopen, FFIType } from "bun:ffi";
import type { Socket as BunSocket } from "bun";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import { schnorr } from "@noble/curves/secp256k1.js";
import type { NostrEvent } from "../../src/protocol/event.ts";
import { Conn, type RelayFrame } from "../lib/conn.ts";
import { naiveMatch, naiveOf, type RawFilter } from "../lib/match.ts";
import { clockTicks, memoryMiB, RATE_LIMITS_OFF, RelayProcess } from "../lib/relay.ts";
import { prng } from "../lib/stats.ts";

// ---------------------------------------------------------------- options and results

export type ScenarioName = "mixed" | "shared";

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
  /** Run the relay under `bun --cpu-prof`, writing the profile (.cpuprofile) into this directory. */
  cpuProfDir?: string;
  /** Fail when nothing progresses for this long, ms. */
  stallMs: number;
  seed: number;
  log: (m: string) => void;
}

export interface LatencySummary {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

export interface FanoutResult {
  scenario: ScenarioName;
  target: "bunstr" | "mock";
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

// ---------------------------------------------------------------- failures (mergeable across threads)

type FailureEntry = [kind: string, count: number, examples: string[]];

class FailureLog {
  private readonly byKind = new Map<string, { count: number; examples: string[] }>();
  add(kind: string, detail: string, count = 1): void {
    let k = this.byKind.get(kind);
    if (!k) this.byKind.set(kind, (k = { count: 0, examples: [] }));
    k.count += count;
    if (k.examples.length < 3 && detail) k.examples.push(detail);
  }
  merge(entries: FailureEntry[]): void {
    for (const [kind, count, examples] of entries) {
      this.add(kind, examples[0] ?? "", count);
      for (const ex of examples.slice(1)) this.add(kind, ex, 0);
    }
  }
  entries(): FailureEntry[] {
    return [...this.byKind].map(([kind, k]) => [kind, k.count, k.examples]);
  }
  get count(): number {
    let n = 0;
    for (const k of this.byKind.values()) n += k.count;
    return n;
  }
  lines(): string[] {
    return [...this.byKind].map(([kind, k]) => `${kind} x${k.count}${k.examples.length ? `: ${k.examples.join(" | ")}` : ""}`);
  }
}

// ---------------------------------------------------------------- signing

interface Key {
  pubkey: string;
  /** BIP-340 signature of a 32-byte message, no auxiliary randomness (deterministic). */
  sign(msg: Uint8Array): Uint8Array;
}

/**
 * Schnorr signing with the system's libsecp256k1 (~20 µs a signature) when it is installed, else
 * @noble/curves (~1 ms). Both are deterministic with zero auxiliary data and give the same bytes.
 */
function makeSigner(): { kind: "libsecp256k1" | "noble"; key(sk: Uint8Array): Key } {
  const native = loadNativeSigner();
  if (native) return { kind: "libsecp256k1", key: native };
  const aux = new Uint8Array(32);
  return {
    kind: "noble",
    key: (sk) => ({ pubkey: Buffer.from(schnorr.getPublicKey(sk)).toString("hex"), sign: (msg) => schnorr.sign(msg, sk, aux) }),
  };
}

function loadNativeSigner(): ((sk: Uint8Array) => Key) | undefined {
  const names = process.platform === "darwin" ? ["libsecp256k1.dylib", "/opt/homebrew/lib/libsecp256k1.dylib", "/usr/local/lib/libsecp256k1.dylib"] : ["libsecp256k1.so.2", "libsecp256k1.so.1", "libsecp256k1.so"];
  for (const name of names) {
    let lib;
    try {
      lib = dlopen(name, {
        secp256k1_context_create: { args: [FFIType.u32], returns: FFIType.ptr },
        secp256k1_keypair_create: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
        secp256k1_keypair_xonly_pub: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
        secp256k1_xonly_pubkey_serialize: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
        secp256k1_schnorrsig_sign32: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
      });
    } catch {
      continue;
    }
    const f = lib.symbols;
    const ctx = f.secp256k1_context_create(0x301); // SIGN | VERIFY (flags are ignored since 0.2)
    if (!ctx) continue;
    return (sk) => {
      const keypair = new Uint8Array(96);
      if (f.secp256k1_keypair_create(ctx, keypair, sk) !== 1) throw new Error("secp256k1_keypair_create failed");
      const xonly = new Uint8Array(64);
      const pk = new Uint8Array(32);
      f.secp256k1_keypair_xonly_pub(ctx, xonly, null, keypair);
      f.secp256k1_xonly_pubkey_serialize(ctx, pk, xonly);
      return {
        pubkey: Buffer.from(pk).toString("hex"),
        sign(msg) {
          const sig = new Uint8Array(64);
          if (f.secp256k1_schnorrsig_sign32(ctx, sig, msg, keypair, null) !== 1) throw new Error("secp256k1_schnorrsig_sign32 failed");
          return sig;
        },
      };
    };
  }
  return undefined;
}

const sha256 = (s: string): Buffer => createHash("sha256").update(s, "utf8").digest();

function buildEvent(key: Key, created_at: number, kind: number, tags: string[][], content: string): NostrEvent {
  // Content is plain ASCII without control characters, so JSON.stringify is NIP-01's serialization.
  const id = sha256(JSON.stringify([0, key.pubkey, created_at, kind, tags, content]));
  return { id: id.toString("hex"), pubkey: key.pubkey, created_at, kind, tags, content, sig: Buffer.from(key.sign(id)).toString("hex") };
}

/** The event as a relay should put it on the wire: the seven fields in NIP-01 order. */
const wireJson = (e: NostrEvent): string =>
  JSON.stringify({ id: e.id, pubkey: e.pubkey, created_at: e.created_at, kind: e.kind, tags: e.tags, content: e.content, sig: e.sig });

// ---------------------------------------------------------------- workloads

export interface Sub {
  /** Row in the (subscription x event) matrices. */
  slot: number;
  conn: number;
  /** The subscription id is "s<num>". */
  num: number;
  filters: RawFilter[];
  /** What kind of subscription it is (for the record). */
  label: string;
}

interface Workload {
  events: NostrEvent[];
  subs: Sub[];
  conns: number;
}

const BASE_TIME = 1_700_000_000;
const WORDS = "the a relay note bun fast nostr event filter kind tag zap reply thread sats garden coffee morning build ship test code open source signal noise fanout topic".split(" ");

/** Index in [0, n) skewed towards 0 (popular authors, topics, threads). */
const skewed = (n: number, r: number): number => Math.min(n - 1, Math.floor(n * r * r));

function distinct(count: number, pick: () => number): number[] {
  const s = new Set<number>();
  for (let guard = 0; s.size < count && guard < count * 20; guard++) s.add(pick());
  return [...s];
}

/**
 * The mixed workload: 200 authors, 64 hashtags, 100 threads; events of kinds 1 (notes), 7
 * (reactions), 6/16 (reposts), 1111 (comments), 20001 (ephemeral), with t, p and e tags; the
 * subscriptions are what clients ask for: global feeds by kind, follow feeds (authors lists),
 * profiles, hashtags, notifications (#p), threads (#e), and REQs with several filters.
 */
function mixedWorkload(signer: ReturnType<typeof makeSigner>, nEvents: number, nSubs: number, nConns: number, seed: number): Workload {
  const AUTHORS = 200;
  const TOPICS = 64;
  const THREADS = 100;
  const keys = Array.from({ length: AUTHORS }, (_, i) => signer.key(sha256(`bunstr-bench-fanout-v1:key:${i}`)));
  const pubkeys = keys.map((k) => k.pubkey);
  const topic = (i: number) => `topic${i}`;
  const roots = Array.from({ length: THREADS }, (_, i) => sha256(`bunstr-bench-fanout-v1:root:${i}`).toString("hex"));
  const rootAuthor = (j: number) => pubkeys[(j * 37) % AUTHORS]!;

  let r = prng(seed);
  const events: NostrEvent[] = [];
  for (let i = 0; i < nEvents; i++) {
    const author = skewed(AUTHORS, r());
    const created = BASE_TIME + i; // distinct, so no two events are identical (reactions "+" by one author)
    const x = r();
    const thread = skewed(THREADS, r());
    const mention = () => pubkeys[skewed(AUTHORS, r())]!;
    let kind: number;
    let tags: string[][] = [];
    let content = "";
    if (x < 0.55) {
      kind = 1;
      if (r() < 0.3) tags.push(["e", roots[thread]!, "", "root"], ["p", rootAuthor(thread)]);
      for (const t of distinct(r() < 0.3 ? 0 : 1 + Math.floor(r() * 3), () => skewed(TOPICS, r()))) tags.push(["t", topic(t)]);
      for (let m = Math.floor(r() * 3); m > 0; m--) tags.push(["p", mention()]);
      const words = 6 + Math.floor(r() * 40);
      content = Array.from({ length: words }, () => WORDS[Math.floor(r() * WORDS.length)]).join(" ") + ` #${i}`;
    } else if (x < 0.78) {
      kind = 7;
      tags = [["e", roots[thread]!], ["p", rootAuthor(thread)], ["k", "1"]];
      content = r() < 0.8 ? "+" : "\u{1F525}";
    } else if (x < 0.86 || x < 0.9) {
      kind = x < 0.86 ? 6 : 16;
      tags = [["e", roots[thread]!, ""], ["p", rootAuthor(thread)]];
      if (kind === 16) tags.push(["k", "1"]);
    } else if (x < 0.95) {
      kind = 1111;
      tags = [["E", roots[thread]!, "", rootAuthor(thread)], ["K", "1"], ["e", roots[thread]!, "", rootAuthor(thread)], ["k", "1"], ["p", rootAuthor(thread)]];
      content = `comment ${i} on thread ${thread}`;
    } else {
      kind = 20001;
      tags = [["t", topic(skewed(TOPICS, r()))]];
      content = `ephemeral ${i}`;
    }
    events.push(buildEvent(keys[author]!, created, kind, tags, content));
  }

  // Subscriptions from their own stream, so they do not depend on the number of events.
  r = prng(seed + 1_000_003);
  const authorsList = (min: number, max: number) => distinct(min + Math.floor(r() * (max - min + 1)), () => skewed(AUTHORS, r())).map((a) => pubkeys[a]!);
  const topicsList = (n: number) => distinct(n, () => skewed(TOPICS, r())).map(topic);
  const subs: Sub[] = [];
  for (let s = 0; s < nSubs; s++) {
    const x = r();
    const me = pubkeys[skewed(AUTHORS, r())]!;
    const root = roots[skewed(THREADS, r())]!;
    let label: string;
    let filters: RawFilter[];
    if (x < 0.04) {
      const kinds = [[1], [7], [6, 16], [1, 1111], [20001]][Math.floor(r() * 5)]!;
      (label = "kinds"), (filters = [{ kinds }]);
    } else if (x < 0.22) (label = "authors+kinds"), (filters = [{ authors: authorsList(5, 40), kinds: [1, 6, 16] }]);
    else if (x < 0.27) (label = "authors"), (filters = [{ authors: authorsList(1, 1) }]);
    else if (x < 0.36) (label = "#t"), (filters = [{ "#t": topicsList(1 + Math.floor(r() * 3)) }]);
    else if (x < 0.45) (label = "kinds+#t"), (filters = [{ kinds: [1], "#t": topicsList(1 + Math.floor(r() * 3)) }]);
    else if (x < 0.51) (label = "#p"), (filters = [{ "#p": [me] }]);
    else if (x < 0.58) (label = "kinds+#p"), (filters = [{ kinds: [1, 6, 7, 16], "#p": [me] }]);
    else if (x < 0.63) (label = "#e"), (filters = [{ "#e": [root] }]);
    else if (x < 0.68) (label = "kinds+#e"), (filters = [{ kinds: [1, 7, 1111], "#e": [root] }]);
    else if (x < 0.7) (label = "authors+#t"), (filters = [{ authors: authorsList(10, 30), "#t": topicsList(2) }]);
    else if (x < 0.78) (label = "kinds+authors"), (filters = [{ kinds: [7], authors: authorsList(5, 30) }]);
    else if (x < 0.88) (label = "multi:home"), (filters = [{ authors: authorsList(5, 40), kinds: [1, 6] }, { kinds: [1, 7], "#p": [me] }]);
    else if (x < 0.95) (label = "multi:topic+thread"), (filters = [{ "#t": topicsList(1) }, { "#e": [root] }, { kinds: [1111], "#E": [root] }]);
    else (label = "multi:profile"), (filters = [{ kinds: [7], "#p": [me] }, { authors: [me] }]);
    for (const f of filters) f.limit = 0; // live only: the database is empty anyway
    subs.push({ slot: s, conn: Math.floor((s * nConns) / nSubs), num: s, filters, label });
  }
  return { events, subs, conns: nConns };
}

/** The shared workload: every connection holds ["REQ","s0",{"kinds":[1],"#t":["fanout"]}]; every event matches. */
function sharedWorkload(signer: ReturnType<typeof makeSigner>, nEvents: number, nConns: number, seed: number): Workload {
  const keys = Array.from({ length: 50 }, (_, i) => signer.key(sha256(`bunstr-bench-fanout-v1:shared-key:${i}`)));
  const r = prng(seed);
  const events: NostrEvent[] = [];
  for (let i = 0; i < nEvents; i++) {
    const words = 10 + Math.floor(r() * 40);
    const content = Array.from({ length: words }, () => WORDS[Math.floor(r() * WORDS.length)]).join(" ") + ` #${i}`;
    const tags = [["t", "fanout"], ["p", keys[Math.floor(r() * 50)]!.pubkey]];
    events.push(buildEvent(keys[i % 50]!, BASE_TIME + i, 1, tags, content));
  }
  const filters: RawFilter[] = [{ kinds: [1], "#t": ["fanout"], limit: 0 }];
  const subs = Array.from({ length: nConns }, (_, k): Sub => ({ slot: k, conn: k, num: 0, filters, label: "shared" }));
  return { events, subs, conns: nConns };
}

/** The events and subscriptions of a scenario, as the run makes them (for tools and micro-benchmarks). */
export function makeWorkload(scenario: ScenarioName, events: number, subs: number, conns: number, seed = 1): { events: NostrEvent[]; subs: Sub[]; conns: number } {
  const signer = makeSigner();
  return scenario === "mixed" ? mixedWorkload(signer, events, subs, conns, seed) : sharedWorkload(signer, events, subs, seed);
}

// ---------------------------------------------------------------- shared memory layout

/** Int32 slots of the progress array. */
const P_DONE = 0; // events received by every subscription that should get them
const P_EOSE = 1; // EOSEs received
const P_CLOSED = 2; // receiving connections closed by the other side
const P_BAD = 3; // wrong / unexpected frames
const P_READY = 4; // connections that finished the websocket upgrade
const P_RECV = 5; // valid first-time deliveries received
const P_SIZE = 8;

interface ReceiverData {
  role: "fanout-receiver";
  thread: number;
  port: number;
  path: string;
  conns: { conn: number; subs: { num: number; slot: number; req: string }[] }[];
  events: number;
  /** Events below this index are the load phase, the rest the probe (separate latency histograms). */
  loadEvents: number;
  json: SharedArrayBuffer; // all event JSON, concatenated
  offsets: SharedArrayBuffer; // Int32Array(events + 1)
  expected: SharedArrayBuffer; // Uint8Array(slots * events): 1 = this subscription must get this event
  counts: SharedArrayBuffer; // Uint8Array(slots * events): deliveries seen (saturating at 255)
  remaining: SharedArrayBuffer; // Int32Array(events): deliveries still to come
  progress: SharedArrayBuffer; // Int32Array(P_SIZE)
  sentAt: SharedArrayBuffer; // Float64Array(events): when the publisher sent it (nowMs())
  lastValid: SharedArrayBuffer; // Float64Array(threads): last first-time valid delivery
}

interface ReceiverHello {
  type: "tid";
  tid: number;
}

interface ReceiverReport {
  type: "result";
  /** Latency histograms: load phase, probe phase. */
  lat: [LatencyHist, LatencyHist];
  frames: number;
  bytes: number;
  failures: FailureEntry[];
}

/**
 * A clock all threads agree on, in ms. Bun's process.hrtime and performance.now() count from
 * each thread's own start; performance.timeOrigin (wall clock at that start, sub-ms) lines them
 * up. The constant keeps the double's resolution well under a microsecond.
 */
const CLOCK_ORIGIN = performance.timeOrigin - 1_700_000_000_000;
const nowMs = (): number => CLOCK_ORIGIN + performance.now();

// Latency histogram over integer microseconds: exact below 1,024 µs, then 1,024 buckets per
// power of two (0.1 % resolution).
const HIST_SIZE = 23 * 1024;
function histBucket(us: number): number {
  if (us < 1024) return us < 0 ? 0 : us;
  if (us >= 2 ** 31) return HIST_SIZE - 1;
  const e = 31 - Math.clz32(us);
  return ((e - 9) << 10) + ((us >>> (e - 10)) & 1023);
}
function histValue(b: number): number {
  if (b < 1024) return b;
  const e = (b >> 10) + 9;
  return (1024 + (b & 1023)) * 2 ** (e - 10);
}
/** Latency samples as a histogram (a plain object, so it crosses postMessage as is). */
interface LatencyHist {
  hist: Uint32Array;
  n: number;
  sumMs: number;
  maxMs: number;
}
const newHist = (): LatencyHist => ({ hist: new Uint32Array(HIST_SIZE), n: 0, sumMs: 0, maxMs: 0 });
function addHist(into: LatencyHist, from: LatencyHist): void {
  for (let b = 0; b < HIST_SIZE; b++) into.hist[b]! += from.hist[b]!;
  into.n += from.n;
  into.sumMs += from.sumMs;
  into.maxMs = Math.max(into.maxMs, from.maxMs);
}
function histSummary({ hist, n, sumMs, maxMs }: LatencyHist): LatencySummary {
  const at = (p: number) => {
    const rank = Math.max(1, Math.ceil((p / 100) * n));
    let c = 0;
    for (let b = 0; b < hist.length; b++) if ((c += hist[b]!) >= rank) return histValue(b) / 1000;
    return NaN;
  };
  return n ? { n, p50: at(50), p90: at(90), p99: at(99), max: maxMs, mean: sumMs / n } : { n: 0, p50: NaN, p90: NaN, p99: NaN, max: NaN, mean: NaN };
}

// ---------------------------------------------------------------- /proc

/** User and system CPU seconds from a /proc/.../stat file (a process or one thread). */
function procTimes(statPath: string): { user: number; sys: number } {
  try {
    const stat = readFileSync(statPath, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { user: Number(f[11]) / clockTicks(), sys: Number(f[12]) / clockTicks() };
  } catch {
    return { user: NaN, sys: NaN };
  }
}

interface CpuSample {
  relay: { user: number; sys: number };
  relayMain: number;
  gen: { user: number; sys: number };
  receivers: number;
}

function sampleCpu(relayPid: number, receiverTids: number[]): CpuSample {
  const m = procTimes(`/proc/${relayPid}/task/${relayPid}/stat`);
  let receivers = 0;
  for (const tid of receiverTids) {
    const t = procTimes(`/proc/self/task/${tid}/stat`);
    receivers += t.user + t.sys;
  }
  return { relay: procTimes(`/proc/${relayPid}/stat`), relayMain: m.user + m.sys, gen: procTimes("/proc/self/stat"), receivers };
}

// ---------------------------------------------------------------- the run

interface Target {
  pid: number;
  url: string;
  stop(): Promise<number | null>;
  kill(): void;
  stderr(): string;
  running(): boolean;
  cleanup(): void;
}

export async function runFanout(opts: FanoutOptions): Promise<FanoutResult> {
  const log = opts.log;
  const failures = new FailureLog();
  const warnings: string[] = [];

  // 1. Events and subscriptions.
  let t = performance.now();
  const signer = makeSigner();
  if (signer.kind === "noble") warnings.push("libsecp256k1 not found: events signed with @noble/curves (~1 ms each), setup is slow");
  const total = opts.events + opts.probe;
  const w = opts.scenario === "mixed" ? mixedWorkload(signer, total, opts.subs, opts.conns, opts.seed) : sharedWorkload(signer, total, opts.subs, opts.seed);
  const signSec = (performance.now() - t) / 1000;
  const first = w.events[0]!;
  if (!schnorr.verify(Buffer.from(first.sig, "hex"), Buffer.from(first.id, "hex"), Buffer.from(first.pubkey, "hex")))
    throw new Error("the signer produced an invalid signature");
  const ALL = w.events.length; // load events, then probe events
  const N = opts.events;
  const S = w.subs.length;
  log(`${opts.scenario}: ${ALL} events signed (${signer.kind}) and ${S} subscriptions made in ${signSec.toFixed(1)} s`);

  // 2. Expected deliveries, from the reference matcher.
  t = performance.now();
  const jsons = w.events.map(wireJson);
  const expected = new Uint8Array(new SharedArrayBuffer(S * ALL));
  const remaining = new Int32Array(new SharedArrayBuffer(4 * ALL));
  let expectedTotal = 0;
  if (opts.scenario === "shared") {
    expected.fill(1);
    remaining.fill(S);
    expectedTotal = S * ALL;
  } else {
    for (const sub of w.subs) {
      const naive = sub.filters.map(naiveOf);
      const row = sub.slot * ALL;
      for (let i = 0; i < ALL; i++) {
        const e = w.events[i]!;
        for (const n of naive)
          if (naiveMatch(n, e)) {
            expected[row + i] = 1;
            remaining[i]!++;
            expectedTotal++;
            break;
          }
      }
    }
  }
  const initialRemaining = Int32Array.from(remaining);
  let matchingNothing = 0;
  let loadDeliveries = 0;
  for (let i = 0; i < N; i++) {
    if (remaining[i] === 0) matchingNothing++;
    loadDeliveries += remaining[i]!;
  }
  const expectSec = (performance.now() - t) / 1000;
  const topics = new Set(w.subs.map((s) => JSON.stringify([s.num, s.filters]))).size;
  const filterCount = w.subs.reduce((a, s) => a + s.filters.length, 0);
  const ephemeral = w.events.slice(0, N).filter((e) => e.kind >= 20000 && e.kind < 30000).length;
  log(
    `${opts.scenario}: ${loadDeliveries} deliveries due for ${N} events (${(loadDeliveries / N).toFixed(1)} per event, ${matchingNothing} match nothing), ` +
      `${expectedTotal - loadDeliveries} for ${ALL - N} probe events; computed in ${expectSec.toFixed(1)} s`,
  );

  // Shared memory for the receiver threads.
  const enc = new TextEncoder();
  const jsonBytes = jsons.map((j) => enc.encode(j));
  const offsets = new Int32Array(new SharedArrayBuffer(4 * (ALL + 1)));
  for (let i = 0; i < ALL; i++) offsets[i + 1] = offsets[i]! + jsonBytes[i]!.length;
  const jsonBuf = new Uint8Array(new SharedArrayBuffer(offsets[ALL]!));
  for (let i = 0; i < ALL; i++) jsonBuf.set(jsonBytes[i]!, offsets[i]!);
  const counts = new Uint8Array(new SharedArrayBuffer(S * ALL));
  const progress = new Int32Array(new SharedArrayBuffer(4 * P_SIZE));
  const sentAt = new Float64Array(new SharedArrayBuffer(8 * ALL));
  const threads = Math.max(1, Math.min(opts.recvThreads, w.conns));
  const lastValid = new Float64Array(new SharedArrayBuffer(8 * threads));

  // 3. The relay.
  const target = opts.mock ? await spawnMock() : await spawnRelay(opts, w);
  log(`${opts.scenario}: ${opts.mock ? "mock relay" : "relay"} pid ${target.pid} at ${target.url}${opts.mock ? "" : `, signature checks ${opts.verify ? "on" : "off"}`}`);
  const workers: Worker[] = [];
  let publisher: Conn | undefined;
  try {
    // 4. Receivers: raw websocket clients in worker threads; REQ on every connection, wait for all EOSEs.
    t = performance.now();
    const url = new URL(target.url);
    const byConn: ReceiverData["conns"] = Array.from({ length: w.conns }, (_, conn) => ({ conn, subs: [] }));
    for (const s of w.subs) byConn[s.conn]!.subs.push({ num: s.num, slot: s.slot, req: JSON.stringify(["REQ", `s${s.num}`, ...s.filters]) });
    const results: Promise<ReceiverReport>[] = [];
    const tids: number[] = [];
    for (let k = 0; k < threads; k++) {
      const data: ReceiverData = {
        role: "fanout-receiver",
        thread: k,
        port: Number(url.port),
        path: url.pathname || "/",
        conns: byConn.filter((_, c) => c % threads === k),
        events: ALL,
        loadEvents: N,
        json: jsonBuf.buffer as SharedArrayBuffer,
        offsets: offsets.buffer as SharedArrayBuffer,
        expected: expected.buffer as SharedArrayBuffer,
        counts: counts.buffer as SharedArrayBuffer,
        remaining: remaining.buffer as SharedArrayBuffer,
        progress: progress.buffer as SharedArrayBuffer,
        sentAt: sentAt.buffer as SharedArrayBuffer,
        lastValid: lastValid.buffer as SharedArrayBuffer,
      };
      const worker = new Worker(import.meta.path, { workerData: data });
      workers.push(worker);
      results.push(
        new Promise((resolve, reject) => {
          worker.on("message", (m: ReceiverReport | ReceiverHello) => (m.type === "tid" ? tids.push(m.tid) : resolve(m)));
          worker.on("error", reject);
          worker.on("exit", (code) => reject(new Error(`receiver thread ${k} exited (${code}) before reporting`)));
        }),
      );
    }
    publisher = await Conn.connect(target.url, "publisher");
    const connectDeadline = performance.now() + 60_000;
    while (Atomics.load(progress, P_EOSE) < S) {
      if (Atomics.load(progress, P_BAD) || Atomics.load(progress, P_CLOSED)) break;
      if (performance.now() > connectDeadline) {
        failures.add("subscriptions not ready", `${Atomics.load(progress, P_READY)}/${w.conns} connections upgraded, ${Atomics.load(progress, P_EOSE)}/${S} EOSEs after 60 s`);
        break;
      }
      await Bun.sleep(10);
    }
    const connectSec = (performance.now() - t) / 1000;
    log(`${opts.scenario}: ${w.conns} connections, ${Atomics.load(progress, P_EOSE)}/${S} subscriptions live (EOSE) in ${connectSec.toFixed(1)} s`);

    // 5. Fanout under load: events [0, N) with at most `window` EVENTs unacknowledged and at
    // most `lag` deliveries due but not received yet (a client that publishes faster than its
    // subscribers read only grows queues: in the relay, which disconnects slow readers at
    // max_pending_bytes, and in the kernel). Then the probe: events [N, N + probe) one at a
    // time, each sent once the previous one is acknowledged and fully delivered.
    const idIndex = new Map<string, number>();
    w.events.forEach((e, i) => idIndex.set(e.id, i));
    const oked = new Uint8Array(ALL);
    let sent = 0;
    let due = 0; // deliveries of the events sent so far
    let oks = 0;
    let zeroDone = 0; // OKed events that nobody should receive
    let lastOk = 0;
    let limit = 0; // events below this may be sent in the current phase
    let window = opts.window;
    let lag = opts.lag;
    const done = () => Atomics.load(progress, P_DONE) + zeroDone;
    const pump = () => {
      // An event always goes when nothing is outstanding, however many deliveries it has.
      while (sent < limit && sent - oks < window && (due - Atomics.load(progress, P_RECV) < lag || sent === done())) {
        sentAt[sent] = nowMs();
        publisher!.send(`["EVENT",${jsons[sent]}]`);
        due += initialRemaining[sent]!;
        sent++;
      }
    };
    publisher.onFrame = (f: RelayFrame, raw: string) => {
      if (f[0] === "OK") {
        const i = idIndex.get(f[1] as string);
        if (i === undefined) return failures.add("OK for an unknown id", raw.slice(0, 200));
        if (oked[i]) return failures.add("OK twice", raw.slice(0, 200));
        oked[i] = 1;
        oks++;
        lastOk = nowMs();
        if (f[2] !== true || f[3] !== "") failures.add(f[2] === true ? "OK true with a message (duplicate?)" : "OK false", `#${i}: ${raw.slice(0, 200)}`);
        if (initialRemaining[i] === 0) zeroDone++;
        pump();
      } else if (f[0] !== "AUTH") failures.add("unexpected frame on the publisher", raw.slice(0, 200));
    };
    /** Publishes up to event `upTo` and waits until all of them are acknowledged and delivered; false on failure. */
    const phase = async (upTo: number, phaseWindow: number, phaseLag: number): Promise<boolean> => {
      (limit = upTo), (window = phaseWindow), (lag = phaseLag);
      let lastProgress = performance.now();
      let seen = -1;
      pump();
      for (;;) {
        const d = done();
        if (oks === upTo && d === upTo) return true;
        if (Atomics.load(progress, P_BAD) || Atomics.load(progress, P_CLOSED) || publisher!.closed || !target.running()) return false;
        if (d + oks !== seen) (seen = d + oks), (lastProgress = performance.now());
        else if (performance.now() - lastProgress > opts.stallMs) {
          failures.add("stalled", `no progress for ${opts.stallMs} ms: ${sent}/${upTo} sent, ${oks} OKs, ${d} events fully delivered`);
          return false;
        }
        pump();
        await Bun.sleep(1);
      }
    };

    let load = { seconds: NaN, relayCpu: NaN, relaySys: NaN, relayMain: NaN, genCpu: NaN, genSys: NaN, receivers: NaN, rss: NaN, peak: NaN };
    if (failures.count === 0 && Atomics.load(progress, P_EOSE) === S) {
      const c0 = sampleCpu(target.pid, tids);
      const t0 = nowMs();
      const ok = await phase(N, opts.window, opts.lag);
      const c1 = sampleCpu(target.pid, tids);
      const mem = memoryMiB(target.pid);
      let t1 = lastOk;
      for (const x of lastValid) t1 = Math.max(t1, x);
      load = {
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
      log(`${opts.scenario}: load: ${sent} sent, ${oks} OKs, ${done()}/${N} events fully delivered in ${load.seconds.toFixed(2)} s`);
      if (ok && ALL > N) {
        const tp = performance.now();
        await phase(ALL, 1, 0);
        log(`${opts.scenario}: probe: ${ALL - N} events one at a time in ${((performance.now() - tp) / 1000).toFixed(2)} s`);
      }
    }
    if (publisher.closed) failures.add("publisher connection closed", `code ${publisher.closeCode}`);
    if (!target.running()) failures.add("relay exited during the run", target.stderr().slice(-1500));

    // 6. Late frames (duplicates, extras) get a moment to arrive, then the receivers report.
    await Bun.sleep(300);
    for (const wk of workers) wk.postMessage("finish");
    const reports = await Promise.race([Promise.all(results), Bun.sleep(20_000).then(() => undefined)]);
    if (!reports) throw new Error("receiver threads did not report within 20 s");
    const loadLat = newHist();
    const probeLat = newHist();
    for (const rep of reports) {
      addHist(loadLat, rep.lat[0]);
      addHist(probeLat, rep.lat[1]);
      failures.merge(rep.failures);
    }
    for (const e of publisher.errors) failures.add("bad frame on the publisher", e);
    if (sent < ALL) failures.add("run aborted", `after the first failure, with ${sent} of ${ALL} events published (only those are checked below)`);
    if (oks < sent) failures.add("events without an OK", `${sent - oks} of ${sent} sent`);

    // 7. Exact check: every (subscription, event) pair received exactly as often as expected
    // (for the events published: all of them unless the run was cut short).
    let ok = 0;
    let dropped = 0;
    let duplicated = 0;
    let extra = 0;
    for (const sub of w.subs) {
      const row = sub.slot * ALL;
      for (let i = 0; i < sent; i++) {
        const c = counts[row + i]!;
        const x = expected[row + i]!;
        if (x && c >= 1) ok++;
        if (x && c === 0) dropped++ < 3 && failures.add("dropped delivery", `sub s${sub.num} (${sub.label}) on conn ${sub.conn} never got event #${i} ${w.events[i]!.id}`, 0);
        if (c > 1) duplicated++ < 3 && failures.add("duplicated delivery", `sub s${sub.num} on conn ${sub.conn} got event #${i} ${c} times`, 0);
        if (!x && c > 0) extra++ < 3 && failures.add("extra delivery (event does not match the filters)", `sub s${sub.num} ${JSON.stringify(sub.filters).slice(0, 300)} got event #${i} ${jsons[i]!.slice(0, 300)}`, 0);
      }
    }
    // The per-kind counts above were added with count 0 (examples only); put the real totals in.
    if (dropped) failures.add("dropped delivery", "", dropped);
    if (duplicated) failures.add("duplicated delivery", "", duplicated);
    if (extra) failures.add("extra delivery (event does not match the filters)", "", extra);
    const wrong = reports.reduce((a, rep) => a + rep.failures.reduce((b, [kind, c]) => b + (kind.startsWith("wrong") ? c : 0), 0), 0);

    await publisher.close();
    publisher = undefined;
    const exitCode = await target.stop();
    if (!opts.mock && exitCode !== 0) failures.add("relay exit code", `${exitCode} after SIGTERM, expected 0`);
    const stderr = target.stderr().trim();
    if (stderr) warnings.push(`relay stderr: ${stderr.slice(-1500)}`);

    const seconds = load.seconds;
    return {
      scenario: opts.scenario,
      target: opts.mock ? "mock" : "bunstr",
      verify: opts.verify && !opts.mock,
      subs: S,
      conns: w.conns,
      topics,
      filters: filterCount,
      events: N,
      ephemeral,
      expectedDeliveries: loadDeliveries,
      deliveriesPerEvent: loadDeliveries / N,
      eventsMatchingNothing: matchingNothing,
      probeEvents: ALL - N,
      probeDeliveries: expectedTotal - loadDeliveries,
      received: { ok, dropped, duplicated, extra, wrong },
      seconds,
      deliveriesPerSec: loadDeliveries / seconds,
      eventsPerSec: N / seconds,
      latencyMs: histSummary(loadLat),
      probeLatencyMs: histSummary(probeLat),
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
      generator: { cpuSec: load.genCpu, sysSec: load.genSys, receiverSec: load.receivers, cores: load.genCpu / seconds, recvThreads: threads },
      window: opts.window,
      lag: opts.lag,
      setupSec: { sign: signSec, expect: expectSec, connect: connectSec },
      signer: signer.kind,
      failures: failures.lines(),
      warnings,
    };
  } finally {
    publisher?.ws.close();
    for (const wk of workers) void wk.terminate();
    target.kill();
    target.cleanup();
  }
}

/** bunstr with a config that lets all our connections and subscriptions in (everything else default). */
async function spawnRelay(opts: FanoutOptions, w: Workload): Promise<Target> {
  const cfgDir = mkdtempSync(join(tmpdir(), "bunstr-fanout-cfg-"));
  process.on("exit", () => rmSync(cfgDir, { recursive: true, force: true })); // also after a timeout
  const perConn = Math.max(...Array.from({ length: w.conns }, (_, c) => w.subs.filter((s) => s.conn === c).length));
  const cfg = join(cfgDir, "bunstr.toml");
  writeFileSync(cfg, `[limits]\nmax_connections_per_ip = ${w.conns + 100}\nmax_subscriptions = ${Math.max(50, perConn)}\n${RATE_LIMITS_OFF}`);
  let relay: RelayProcess;
  try {
    // --cpu-prof goes between bun and the relay's entry point: a shell puts it there.
    const wrap = opts.cpuProfDir ? ["sh", "-c", 'd="$1"; b="$2"; shift 2; exec "$b" --cpu-prof --cpu-prof-dir="$d" "$@"', "sh", resolve(opts.cpuProfDir)] : undefined;
    relay = await RelayProcess.spawn({ verify: opts.verify, args: ["--config", cfg], wrap });
  } catch (err) {
    rmSync(cfgDir, { recursive: true, force: true });
    throw err;
  }
  return {
    pid: relay.pid,
    url: relay.url,
    stop: () => relay.stop(),
    kill: () => relay.kill(),
    stderr: () => relay.stderr.text,
    running: () => relay.running,
    cleanup: () => {
      relay.removeDataDir();
      rmSync(cfgDir, { recursive: true, force: true });
    },
  };
}

// ---------------------------------------------------------------- the mock relay

/**
 * A relay that does nothing but fan out: no verification, no storage, REQ -> EOSE + one Bun
 * topic per (id, filters), EVENT -> OK + server.publish to every topic whose filters match (a
 * linear scan with the reference matcher). Runs as a child process (this file with --mock-relay).
 */
function serveMock(): void {
  const groups = new Map<string, { prefix: string; naive: ReturnType<typeof naiveOf>[] }>();
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req, srv) {
      return srv.upgrade(req, { data: undefined }) ? undefined : new Response("websocket only", { status: 400 });
    },
    websocket: {
      perMessageDeflate: false,
      maxPayloadLength: 16 * 1024 * 1024,
      message(ws, message) {
        const m = JSON.parse(String(message)) as [string, ...unknown[]];
        if (m[0] === "REQ") {
          const subId = m[1] as string;
          const filters = m.slice(2) as RawFilter[];
          const topic = JSON.stringify([subId, filters]);
          if (!groups.has(topic)) groups.set(topic, { prefix: `["EVENT",${JSON.stringify(subId)},`, naive: filters.map(naiveOf) });
          ws.subscribe(topic);
          ws.send(`["EOSE",${JSON.stringify(subId)}]`);
        } else if (m[0] === "EVENT") {
          const e = m[1] as NostrEvent;
          const json = wireJson(e);
          for (const [topic, g] of groups) if (g.naive.some((n) => naiveMatch(n, e))) server.publish(topic, `${g.prefix}${json}]`);
          ws.send(`["OK",${JSON.stringify(e.id)},true,""]`);
        }
      },
    },
  });
  console.log(`listening on ws://127.0.0.1:${server.port}/`);
  process.on("SIGTERM", () => {
    server.stop(true);
    process.exit(0);
  });
}

async function spawnMock(): Promise<Target> {
  const proc = Bun.spawn([process.execPath, import.meta.path, "--mock-relay"], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  let stderr = "";
  void (async () => {
    for await (const c of proc.stderr) stderr = (stderr + new TextDecoder().decode(c)).slice(-8000);
  })().catch(() => {});
  const reader = proc.stdout.getReader();
  let out = "";
  const deadline = Date.now() + 15_000;
  while (!/listening on (\S+)/.test(out)) {
    const r = await Promise.race([reader.read(), Bun.sleep(Math.max(1, deadline - Date.now())).then(() => undefined)]);
    if (!r || r.done) {
      proc.kill("SIGKILL");
      throw new Error(`mock relay did not start: ${stderr}`);
    }
    out += new TextDecoder().decode(r.value);
  }
  reader.releaseLock();
  process.on("exit", () => proc.kill("SIGKILL"));
  const running = () => proc.exitCode === null && proc.signalCode === null;
  return {
    pid: proc.pid,
    url: /listening on (\S+)/.exec(out)![1]!,
    async stop() {
      if (running()) proc.kill("SIGTERM");
      const code = await Promise.race([proc.exited, Bun.sleep(5000).then(() => undefined)]);
      if (code === undefined) proc.kill("SIGKILL");
      return code ?? null;
    },
    kill: () => running() && proc.kill("SIGKILL"),
    stderr: () => stderr,
    running,
    cleanup: () => {},
  };
}

// ---------------------------------------------------------------- the receiver thread

const HEX = new Int8Array(256).fill(-1);
for (let i = 0; i < 10; i++) HEX[48 + i] = i;
for (let i = 0; i < 6; i++) HEX[97 + i] = 10 + i;

/** A masked client frame (RFC 6455) with any opcode. */
function maskedFrame(opcode: number, payload: Uint8Array): Buffer {
  const n = payload.length;
  const head = n < 126 ? 2 : n < 65536 ? 4 : 10;
  const f = Buffer.alloc(head + 4 + n);
  f[0] = 0x80 | opcode;
  if (n < 126) f[1] = 0x80 | n;
  else if (n < 65536) (f[1] = 0x80 | 126), f.writeUInt16BE(n, 2);
  else (f[1] = 0x80 | 127), f.writeBigUInt64BE(BigInt(n), 2);
  const mask = [0x12, 0x34, 0x56, 0x78];
  f.set(mask, head);
  for (let i = 0; i < n; i++) f[head + 4 + i] = payload[i]! ^ mask[i & 3]!;
  return f;
}

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

function receiverMain(d: ReceiverData): void {
  const N = d.events;
  const json = Buffer.from(d.json);
  const offsets = new Int32Array(d.offsets);
  const expected = new Uint8Array(d.expected);
  const counts = new Uint8Array(d.counts);
  const remaining = new Int32Array(d.remaining);
  const progress = new Int32Array(d.progress);
  const sentAt = new Float64Array(d.sentAt);
  const lastValid = new Float64Array(d.lastValid);
  const failures = new FailureLog();
  const lat: [LatencyHist, LatencyHist] = [newHist(), newHist()];
  let frames = 0;
  let bytes = 0;
  let finishing = false;

  // Event lookup by the first 12 hex digits of its id (48 bits: no collisions among our events).
  const byKey = new Map<number, number>();
  for (let i = 0; i < N; i++) {
    let key = 0;
    for (let k = 0; k < 12; k++) key = key * 16 + HEX[json[offsets[i]! + 7 + k]!]!;
    if (byKey.has(key)) throw new Error(`two events share the id prefix of event #${i}`);
    byKey.set(key, i);
  }

  const bad = (c: RecvConn, kind: string, buf: Buffer, s: number, e: number) => {
    failures.add(kind, `conn ${c.conn}: ${buf.toString("utf8", s, Math.min(e, s + 300))}`);
    Atomics.add(progress, P_BAD, 1);
  };

  /** One text frame, bytes [s, e) of buf, received at `now`. */
  const onText = (c: RecvConn, b: Buffer, s: number, e: number, now: number) => {
    frames++;
    // ["EVENT","s<num>",{"id":"<64 hex>",...}]
    if (b[s + 2] === 0x45 && b[s + 3] === 0x56 && b[s + 9] === 0x22 && b[s + 10] === 0x73) {
      let q = s + 11;
      let num = 0;
      while (b[q]! >= 48 && b[q]! <= 57) num = num * 10 + b[q++]! - 48;
      const slot = c.slots.get(num);
      if (b[q] !== 0x22 || b[q + 1] !== 0x2c || slot === undefined) return bad(c, "wrong: EVENT for a subscription this connection does not hold", b, s, e);
      const js = q + 2;
      let key = 0;
      for (let k = 0; k < 12; k++) {
        const v = HEX[b[js + 7 + k]!]!;
        if (v < 0) return bad(c, "wrong: EVENT frame not in the expected form", b, s, e);
        key = key * 16 + v;
      }
      const ev = byKey.get(key);
      if (ev === undefined) return bad(c, "wrong: EVENT with an event never published", b, s, e);
      const off = offsets[ev]!;
      const len = offsets[ev + 1]! - off;
      if (e - 1 - js !== len || b[e - 1] !== 0x5d || b.compare(json, off, off + len, js, e - 1) !== 0)
        return bad(c, "wrong: event bytes differ from what was published", b, s, e);
      const cell = slot * N + ev;
      const cnt = counts[cell]!;
      if (cnt < 255) counts[cell] = cnt + 1;
      if (cnt === 0 && expected[cell] === 1) {
        if (Atomics.sub(remaining, ev, 1) === 1) Atomics.add(progress, P_DONE, 1);
        Atomics.add(progress, P_RECV, 1);
        const ms = now - sentAt[ev]!;
        const h = lat[ev < d.loadEvents ? 0 : 1];
        h.hist[histBucket(Math.round(ms * 1000))]!++;
        h.n++;
        h.sumMs += ms;
        if (ms > h.maxMs) h.maxMs = ms;
        lastValid[d.thread] = now;
      }
      return;
    }
    // ["EOSE","s<num>"]
    if (b[s + 2] === 0x45 && b[s + 3] === 0x4f && b[s + 8] === 0x22 && b[s + 9] === 0x73) {
      Atomics.add(progress, P_EOSE, 1);
      return;
    }
    if (b[s + 2] === 0x41 && b[s + 3] === 0x55) return; // ["AUTH", challenge]: not needed here
    bad(c, "unexpected frame on a subscriber", b, s, e);
  };

  const write = (sock: BunSocket<RecvConn>, buf: Buffer) => {
    const c = sock.data;
    if (c.pendingWrite) return void (c.pendingWrite = Buffer.concat([c.pendingWrite, buf]));
    const n = sock.write(buf);
    if (n < buf.length) c.pendingWrite = buf.subarray(Math.max(0, n));
  };

  const onData = (sock: BunSocket<RecvConn>, chunk: Buffer) => {
    const now = nowMs();
    const c = sock.data;
    bytes += chunk.length;
    let b = c.leftover ? Buffer.concat([c.leftover, chunk]) : chunk;
    c.leftover = null;
    let p = 0;
    if (!c.upgraded) {
      c.head += b.toString("latin1");
      const end = c.head.indexOf("\r\n\r\n");
      if (end < 0) return;
      if (!c.head.startsWith("HTTP/1.1 101")) {
        failures.add("websocket upgrade refused", `conn ${c.conn}: ${c.head.slice(0, 200)}`);
        Atomics.add(progress, P_BAD, 1);
        return void sock.end();
      }
      c.upgraded = true;
      Atomics.add(progress, P_READY, 1);
      p = end + 4 - (c.head.length - b.length);
      c.head = "";
      write(sock, c.reqs);
    }
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
        failures.add("masked frame from the server", `conn ${c.conn}`);
        Atomics.add(progress, P_BAD, 1);
        return void sock.end();
      }
      const s = p + h;
      const e = s + size;
      if (e > len) break;
      const op = b0 & 15;
      if (op === 1 && b0 & 128) onText(c, b, s, e, now);
      else if (op === 9) write(sock, maskedFrame(10, b.subarray(s, e)));
      else if (op === 8) {
        if (!finishing) failures.add("connection closed by the relay", `conn ${c.conn}: close code ${size >= 2 ? b.readUInt16BE(s) : "none"} ${b.toString("utf8", s + 2, e)}`);
      } else if (op !== 10) bad(c, `unexpected frame opcode ${op} (fin ${b0 >> 7})`, b, s, e);
      p = e;
    }
    if (p < len) c.leftover = Buffer.from(b.subarray(p));
  };

  const sockets: BunSocket<RecvConn>[] = [];
  const handlers = {
    data: onData,
    drain(sock: BunSocket<RecvConn>) {
      const c = sock.data;
      const buf = c.pendingWrite;
      if (!buf) return;
      c.pendingWrite = null;
      write(sock, buf);
    },
    close(sock: BunSocket<RecvConn>) {
      const c = sock.data;
      if (c.closed) return;
      c.closed = true;
      if (!finishing) {
        failures.add("receiving connection closed", `conn ${c.conn}`);
        Atomics.add(progress, P_CLOSED, 1);
      }
    },
    error(sock: BunSocket<RecvConn>, err: Error) {
      if (!finishing) failures.add("socket error", `conn ${sock.data.conn}: ${err.message}`);
    },
  };

  const connectAll = async () => {
    const BATCH = 100;
    for (let i = 0; i < d.conns.length; i += BATCH) {
      await Promise.all(
        d.conns.slice(i, i + BATCH).map(async (spec) => {
          const c: RecvConn = {
            conn: spec.conn,
            slots: new Map(spec.subs.map((s) => [s.num, s.slot])),
            reqs: Buffer.concat(spec.subs.map((s) => maskedFrame(1, Buffer.from(s.req)))),
            upgraded: false,
            head: "",
            leftover: null,
            pendingWrite: null,
            closed: false,
          };
          try {
            const sock = await Bun.connect<RecvConn>({ hostname: "127.0.0.1", port: d.port, data: c, socket: handlers });
            sockets.push(sock);
            write(
              sock,
              Buffer.from(
                `GET ${d.path} HTTP/1.1\r\nHost: 127.0.0.1:${d.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
              ),
            );
          } catch (err) {
            failures.add("cannot connect", `conn ${spec.conn}: ${(err as Error).message}`);
            Atomics.add(progress, P_CLOSED, 1);
          }
        }),
      );
    }
  };
  const hello: ReceiverHello = { type: "tid", tid: Number(readlinkSync("/proc/thread-self").split("/").pop()) };
  parentPort!.postMessage(hello);
  void connectAll();

  parentPort!.on("message", async (m) => {
    if (m !== "finish") return;
    finishing = true;
    const close = maskedFrame(8, Buffer.from([0x03, 0xe8]));
    for (const s of sockets) if (!s.data.closed) s.write(close), s.end();
    const until = performance.now() + 2000;
    while (sockets.some((s) => !s.data.closed) && performance.now() < until) await Bun.sleep(10);
    const report: ReceiverReport = { type: "result", lat, frames, bytes, failures: failures.entries() };
    parentPort!.postMessage(report);
  });
}

if (!isMainThread && (workerData as ReceiverData | undefined)?.role === "fanout-receiver") receiverMain(workerData as ReceiverData);
if (isMainThread && import.meta.main && process.argv.includes("--mock-relay")) serveMock();
