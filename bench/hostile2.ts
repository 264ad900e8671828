// Hostile clients, second round (issue 36): each attack against a relay of its own, spawned on a
// default config with `[rate_limits] exempt_private_addresses = false` (every 127.x.y.z address is
// limited as an internet client is), while an honest client on 127.0.0.9 publishes a signed note
// and sends a small REQ every 100 ms without waiting for the answers. Attackers use 127.0.0.2-8
// (and 127.0.0.10-12 where an attack needs ten addresses).
//   search1      1 address, 8 connections x 50 REQs x 20 {"kinds":[1],"search":…,"limit":0}; four
//                60 KB notes every 5 s
//   search10     the same subscriptions from 10 addresses; 280-character notes at 20/s in all
//   count        a 200k-event store; 2 addresses (3 with --scale 1.5) pipeline 200 COUNT
//                [{}, {"kinds":[1]}] each, then more as the counts rate allows
//   delete       900 stored events of one author with 1,800 tags each; one kind 5 deletes them all
//   expiry       420 stored events of 1,800 tags expiring in the same second; the relay's first
//                expiration sweep (60 s after start) falls inside the measured window
//   writes       5 addresses inside their EVENT bursts: 1,800-tag notes, kind 5s with 1,700 e tags,
//                kind 5s with 1,350 a tags, a kind 3 with 1,600 p tags replaced each time
//   partial      10 addresses x 60 connections each hold 960 KB of an unfinished message (half of
//                them one 1,000,000-byte frame, half 15 fragments of 64 KB), a byte every 3 s
//   fts          a 150k-note full-text index; 2 addresses x 2 connections loop a search for 120
//                common words that never occur all together
//   auth         50 connections pipeline AUTH with a valid id and a bad signature, flat out
//   compression  [network] compression = "shared"; 8 connections (4 addresses) send frames that
//                inflate ~1,000x (120 KB of JSON whitespace from ~130 bytes), flat out
//   logs         NIP-86 calls from a valid non-admin NIP-98 token (refused), flat out: bytes the
//                relay writes to stdout+stderr; then SIGUSR2 twice during the hand-over: exit code
//   baseline     no attack (the honest client's own figures)
// Aliases: search = search1,search10; sweeps = delete,expiry. Default: all of them.
//
// Per attack: the honest client's EVENTs sent / answered, OK latency p50/p99/max, REQ (EOSE)
// latency p50/p99, timeouts (no answer within 5 s), the relay's RSS at start, peak and once it fell
// back (up to --settle 30 s after the attackers left; /proc/PID/status), what the attackers were answered (counts by message and
// prefix), and a verdict. HELD: the relay alive, the honest OK and REQ p99 under 250 ms with no
// timeouts, RSS growth under 300 MiB at peak and under 150 MiB at the end (it falls back), and the
// attack's own policy checks (logs: under 64 KiB written; SIGUSR2 twice: exit 0). An attack stops
// early when the relay's RSS passes --ceiling (NOT HELD); past ceiling + 300 MiB it is killed.
//
//   npx bun bench/hostile2.ts [--attack search,count,…] [--seconds 20] [--scale 1] [--main PATH/src/main.ts]
// --main: the relay's entry point (default this checkout's src/main.ts): the same script measures
// another checkout. Everything talks to 127.0.0.0/8 only; every attack is bounded and stops by itself.
import { Database } from "bun:sqlite";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect as tcpConnect, type Socket } from "node:net";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { constants, deflateRawSync } from "node:zlib";
import { finalizeEvent, generateSecretKey, getPublicKey } from "nostr-tools/pure";
import type { NostrEvent } from "../src/protocol/event.ts";
import { SqliteStore } from "../src/store/sqlite/store.ts";
import type { PendingWrite } from "../src/store/types.ts";
import { RawWs } from "./lib/rawws.ts";
import { memoryMiB, RelayProcess } from "./lib/relay.ts";
import { createSigner, type SigningKey } from "./lib/sign.ts";
import { clientFrame, clientTextFrame, serverFrame, upgradeRequest } from "./lib/tcp.ts";

const ALL = ["baseline", "search1", "search10", "count", "delete", "expiry", "writes", "partial", "fts", "auth", "compression", "logs"];
const ALIASES: Record<string, string[]> = { search: ["search1", "search10"], sweeps: ["delete", "expiry"] };
const { values: args } = parseArgs({
  options: {
    attack: { type: "string", default: ALL.join(",") },
    seconds: { type: "string", default: "20" },
    scale: { type: "string", default: "1" },
    main: { type: "string" },
    ceiling: { type: "string", default: "2200" },
    settle: { type: "string", default: "30" },
  },
});
const SECONDS = Math.min(60, Number(args.seconds));
const SCALE = Number(args.scale);
const CEILING = Number(args.ceiling);
const SETTLE = Number(args.settle);
const chosen = args.attack!.split(",").flatMap((a) => ALIASES[a] ?? [a]);
for (const a of chosen)
  if (!ALL.includes(a)) {
    console.error(`unknown attack ${a}; one of ${ALL.join(", ")} (aliases ${Object.keys(ALIASES).join(", ")})`);
    process.exit(2);
  }
if (!(SECONDS > 0) || !(SCALE > 0) || !(CEILING > 0)) {
  console.error("--seconds, --scale and --ceiling must be positive");
  process.exit(2);
}
const MAIN = args.main ? resolve(args.main) : undefined;
const log = (m: string) => console.error(`[hostile2] ${m}`);
const nowSec = () => Math.floor(Date.now() / 1000);
const hex64 = (seed: string) => createHash("sha256").update(seed).digest("hex");
const HONEST_IP = "127.0.0.9";
/** Attacker addresses: 127.0.0.2-8, then 127.0.0.10-12. */
const IPS = [
  "127.0.0.2",
  "127.0.0.3",
  "127.0.0.4",
  "127.0.0.5",
  "127.0.0.6",
  "127.0.0.7",
  "127.0.0.8",
  "127.0.0.10",
  "127.0.0.11",
  "127.0.0.12",
];

// --- signing (libsecp256k1 when it loads: ~25 µs an event) ------------------------------------------
const signer = createSigner();
interface Key {
  pk: string;
  key: SigningKey;
}
function newKey(): Key {
  const sk = generateSecretKey();
  return { pk: getPublicKey(sk), key: signer.key(sk) };
}
const AUX = new Uint8Array(32);
function sign(k: Key, kind: number, tags: string[][], content: string, created_at = nowSec()): NostrEvent {
  const id = createHash("sha256")
    .update(JSON.stringify([0, k.pk, created_at, kind, tags, content]))
    .digest("hex");
  const sig = Buffer.from(k.key.sign(Buffer.from(id, "hex"), AUX)).toString("hex");
  return { id, pubkey: k.pk, created_at, kind, tags, content, sig };
}

// --- a store written directly (a relay would take minutes to ingest it) ------------------------------
async function writeStore(dir: string, n: number, make: (i: number) => NostrEvent, search = false, batch = 2000): Promise<void> {
  const t0 = performance.now();
  const store = new SqliteStore({ path: join(dir, "bunstr.sqlite"), synchronous: "normal", readerWorkers: 1 });
  store.db.exec("PRAGMA synchronous = OFF");
  const rules = { deletion: false, vanish: false, search, searchSkipKinds: new Set<number>() };
  for (let i = 0; i < n; i += batch)
    store.writeBatch(
      Array.from({ length: Math.min(batch, n - i) }, (_, j) => {
        const event = make(i + j);
        return { event, json: JSON.stringify(event) } as PendingWrite;
      }),
      rules,
    );
  await store.close();
  log(`store: ${n} events written in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}

// --- an attacker's socket: raw websocket from any 127.x address, answers counted, never parsed -------
/** "OK false invalid:", "CLOSED rate-limited:", "EOSE", "COUNT", "NOTICE error:"… from a frame's start. */
function classify(head: string): string {
  const type = /^\["([A-Z-]+)"/.exec(head)?.[1] ?? "?";
  const prefix = (s: string | undefined) => (s === undefined ? "" : (/^([a-z-]+):/.exec(s)?.[1] ?? s.slice(0, 24)));
  if (type === "OK") {
    const m = /^\["OK","[0-9a-f]*",(true|false),"([^"]*)/.exec(head);
    return m ? (m[1] === "true" ? "OK true" : `OK false ${prefix(m[2])}:`) : "OK";
  }
  if (type === "CLOSED") return `CLOSED ${prefix(/^\["CLOSED","(?:[^"\\]|\\.)*","([^"]*)/.exec(head)?.[1])}:`;
  if (type === "NOTICE") return `NOTICE ${prefix(/^\["NOTICE","([^"]*)/.exec(head)?.[1])}:`;
  if (type === "NEG-ERR") return "NEG-ERR";
  return type;
}

class Attacker {
  readonly counts = new Map<string, number>();
  closed = false;
  private buf: Buffer = Buffer.alloc(0);
  /** Called with the first 300 characters of each text frame. */
  onText?: (head: string) => void;

  private constructor(readonly sock: Socket) {}

  /** A websocket from `ip`; `extensions` offers e.g. permessage-deflate. */
  static async connect(port: number, ip: string, extensions?: string): Promise<Attacker> {
    const sock = tcpConnect({ port, host: "127.0.0.1", localAddress: ip });
    sock.setNoDelay(true);
    await new Promise<void>((ok, fail) => (sock.once("connect", () => ok()), sock.once("error", fail)));
    sock.write(upgradeRequest(port, "/", extensions));
    const rest = await new Promise<Buffer>((ok, fail) => {
      let head = Buffer.alloc(0);
      const onData = (b: Buffer) => {
        head = Buffer.concat([head, b]);
        const at = head.indexOf("\r\n\r\n");
        if (at < 0) return;
        sock.off("data", onData);
        if (!head.subarray(0, 12).toString("latin1").startsWith("HTTP/1.1 101"))
          fail(new Error(`upgrade refused: ${head.subarray(0, 80)}`));
        else ok(head.subarray(at + 4));
      };
      sock.on("data", onData);
      sock.once("error", fail);
      sock.once("close", () => fail(new Error("closed during the upgrade")));
    });
    const a = new Attacker(sock);
    sock.removeAllListeners("error");
    sock.removeAllListeners("close");
    sock.on("error", () => {});
    sock.on("close", () => {
      if (!a.closed) a.count("disconnected");
      a.closed = true;
    });
    a.onData(rest);
    sock.on("data", (d: Buffer) => a.onData(d));
    return a;
  }

  count(key: string, n = 1): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + n);
  }

  /** Writes a frame (text by default); false when the socket's buffer is full (wait for drain()). */
  send(msg: unknown): boolean {
    if (this.closed) return false;
    return this.sock.write(clientTextFrame(typeof msg === "string" ? msg : JSON.stringify(msg)));
  }

  write(bytes: Uint8Array): boolean {
    return this.closed ? false : this.sock.write(bytes);
  }

  drain(timeoutMs = 2000): Promise<void> {
    if (this.closed || !this.sock.writableNeedDrain) return Promise.resolve();
    return new Promise((ok) => {
      const done = () => {
        clearTimeout(t);
        this.sock.off("drain", done);
        this.sock.off("close", done);
        ok();
      };
      const t = setTimeout(done, timeoutMs);
      this.sock.once("drain", done);
      this.sock.once("close", done);
    });
  }

  close(): void {
    this.closed = true;
    this.sock.destroy();
  }

  private onData(d: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
    let off = 0;
    for (let f = serverFrame(this.buf); f; f = serverFrame(this.buf.subarray(off))) {
      off += f.size;
      if (f.opcode === 9) this.sock.write(clientFrame(10, f.payload));
      else if (f.opcode === 8) this.count(`close ${f.payload.length >= 2 ? f.payload.readUInt16BE(0) : ""}`.trim());
      else if (f.opcode === 1 || f.opcode === 2) {
        // The relay sends only text; a deflated frame (RSV1) is counted as such, not decoded.
        const head = this.buf[off - f.size]! & 0x40 ? "deflated" : f.payload.subarray(0, 300).toString();
        this.count(head === "deflated" ? "deflated frame" : classify(head));
        this.onText?.(head);
      }
    }
    this.buf = off ? this.buf.subarray(off) : this.buf;
  }
}

/** The attackers' answers summed by kind. */
const tally = (as: Attacker[], extra: Record<string, number> = {}): Record<string, number> => {
  const m = new Map<string, number>(Object.entries(extra));
  // The AUTH challenge each connection gets on open is left out: it says nothing of the attack.
  for (const a of as) for (const [k, n] of a.counts) if (k !== "AUTH") m.set(k, (m.get(k) ?? 0) + n);
  return Object.fromEntries([...m].sort((x, y) => y[1] - x[1]));
};

async function connectAll(port: number, specs: { ip: string; n: number }[], extensions?: string): Promise<Attacker[]> {
  const out: Attacker[] = [];
  await Promise.all(
    specs.map(async ({ ip, n }) => {
      for (let i = 0; i < n; i++) {
        const a = await Attacker.connect(port, ip, extensions).catch((e: Error) => (log(`connect from ${ip}: ${e.message}`), undefined));
        if (a) out.push(a);
      }
    }),
  );
  return out;
}

// --- the honest client: a worker thread of its own, so the attackers' work in this thread (signing,
// writing megabytes) never delays its clock or its sends ------------------------------------------
type HonestFigures = import("./lib/honest.ts").HonestFigures;
class Honest {
  private readonly worker = new Worker(new URL("./lib/honest.ts", import.meta.url).href);
  private figuresP?: Promise<HonestFigures>;
  async start(port: number): Promise<void> {
    await new Promise<void>((ok, fail) => {
      this.worker.onmessage = (m) => (m.data === "started" ? ok() : fail(new Error(String(m.data))));
      this.worker.postMessage({ start: port, ip: HONEST_IP });
    });
  }
  /** Stops sending; waits up to 5 s for what is owed; the rest are timeouts. */
  stop(): Promise<HonestFigures> {
    this.figuresP = new Promise((ok) => {
      this.worker.onmessage = (m) => (ok(m.data as HonestFigures), this.worker.terminate());
    });
    this.worker.postMessage({ stop: true });
    return this.figuresP;
  }
}

// --- the attacks --------------------------------------------------------------------------------------
interface Env {
  port: number;
  relay: RelayProcess;
  dir: string;
  /** performance.now() when the attack must end. */
  until: number;
  /** Still attacking: before `until`, relay alive, under the memory ceiling. */
  active(): boolean;
  sleep(ms: number): Promise<void>;
}
interface Outcome {
  attackers: Attacker[];
  extra?: Record<string, number>;
  notes?: string[];
  policy?: string[];
}
interface Attack {
  what: string;
  config?: string;
  prepare?(dir: string): Promise<void>;
  /** Idle time after the relay starts, before the honest client and the attack (expiry: the sweep timer). */
  warmupMs?: number;
  run(env: Env): Promise<Outcome>;
  /** After the figures, before the relay is stopped (logs: SIGUSR2 twice); policy failures. */
  after?(env: Env, out: Outcome): Promise<void>;
}

/** 50 REQs x 20 live search filters on each connection: 1,000 filters it re-reads each new event for. */
function holdSearches(as: Attacker[]): void {
  for (const [c, a] of as.entries())
    for (let s = 0; s < 50; s++)
      a.send(["REQ", `s${s}`, ...Array.from({ length: 20 }, (_, f) => ({ kinds: [1], search: `zq${c}x${s}y${f} nowhere`, limit: 0 }))]);
}

const WORDS =
  "the be to of and a in that have it for not on with he as you do at this but his by from they we say her she or an will my one all would there their what so up out if about who get which go me when make can like time no just him know take people into year your good some could them see other than then now look only come its over think also back after use two how our work first well way even new want because any these give day most us is was are been has had were said did having may should am being".split(
    " ",
  );
function zipfWord(r: number): string {
  // P(rank k) ~ 1/k over the vocabulary: r in [0,1) mapped through the harmonic CDF, approximately.
  return WORDS[Math.min(WORDS.length - 1, Math.floor(Math.exp(r * Math.log(WORDS.length + 1)) - 1))]!;
}
function prose(seed: number, words: number): string {
  let x = seed * 2654435761;
  const out: string[] = [];
  for (let i = 0; i < words; i++) {
    x = (Math.imul(x ^ (x >>> 13), 1597334677) + 0x9e3779b9) >>> 0;
    out.push(zipfWord(x / 4294967296));
  }
  return out.join(" ");
}

const base = nowSec() - 30 * 86400;
const pubkeys = Array.from({ length: 1000 }, (_, i) => hex64(`pk ${i}`));
const SIG = "ab".repeat(64);

const deleteAuthor = newKey();
let deleteIds: string[] = [];
const heavyTags = (n: number, seed: string) => Array.from({ length: n }, (_, j) => ["t", `${seed}-${j}`]);

const ATTACKS: Record<string, Attack> = {
  baseline: {
    what: "no attack",
    async run(env) {
      await env.sleep(env.until - performance.now());
      return { attackers: [] };
    },
  },

  search1: {
    what: "1 address: 8 conns x 1,000 live search filters; four 60 KB notes every 5 s",
    async run(env) {
      const subs = await connectAll(env.port, [{ ip: IPS[0]!, n: Math.round(8 * SCALE) }]);
      holdSearches(subs);
      const [pub] = await connectAll(env.port, [{ ip: IPS[0]!, n: 1 }]);
      const k = newKey();
      const big = prose(1, 20_000).slice(0, 60_000);
      let sent = 0;
      while (env.active()) {
        for (let i = 0; i < 4; i++) pub!.send(["EVENT", sign(k, 1, [], `${sent++} ${big}`)]);
        await env.sleep(5000);
      }
      return { attackers: [...subs, pub!], notes: [`${subs.length * 1000} search filters, ${sent} notes of 60 KB`] };
    },
  },

  search10: {
    what: "10 addresses: 8 conns x 1,000 live search filters each; 280-character notes at 20/s",
    async run(env) {
      const per = Math.max(1, Math.round(8 * SCALE));
      const subs = await connectAll(
        env.port,
        IPS.map((ip) => ({ ip, n: per })),
      );
      holdSearches(subs);
      const pubs = await connectAll(
        env.port,
        IPS.map((ip) => ({ ip, n: 1 })),
      );
      const keys = pubs.map(() => newKey());
      let sent = 0;
      // 2 a second from each address: 20/s in all.
      while (env.active()) {
        const t = performance.now();
        for (const [i, p] of pubs.entries()) p.send(["EVENT", sign(keys[i]!, 1, [], prose(sent++, 60).slice(0, 280))]);
        await env.sleep(500 - (performance.now() - t));
      }
      return { attackers: [...subs, ...pubs], notes: [`${subs.length * 1000} search filters, ${sent} notes of 280 characters`] };
    },
  },

  count: {
    what: "200k stored events; 2 addresses (3 at --scale 1.5) pipeline 200 COUNT [{}, {kinds:[1]}] each, then at the counts rate",
    async prepare(dir) {
      const text = prose(7, 40);
      await writeStore(dir, Math.round(200_000 * Math.min(SCALE, 1)), (i) => ({
        id: hex64(`c${i}`),
        pubkey: pubkeys[i % 1000]!,
        created_at: base + i,
        kind: i % 10 === 9 ? 7 : 1,
        tags: [["t", `topic${i % 50}`]],
        content: `${i} ${text}`,
        sig: SIG,
      }));
    },
    async run(env) {
      const n = Math.max(1, Math.round(2 * SCALE));
      const as = await connectAll(
        env.port,
        IPS.slice(0, n).map((ip) => ({ ip, n: 1 })),
      );
      let sent = 0;
      await Promise.all(
        as.map(async (a, k) => {
          let answered = 0;
          a.onText = (h) => void (h.startsWith('["COUNT"') || h.startsWith('["CLOSED"') ? answered++ : 0);
          let mine = 0;
          for (; mine < 200; mine++) a.send(["COUNT", `c${k}-${mine}`, {}, { kinds: [1] }]);
          sent += 200;
          // Then one more for each answer, at 9 a second (the counts rate is 10/s after its burst).
          while (env.active()) {
            if (answered > mine - 200) a.send(["COUNT", `c${k}-${mine++}`, {}, { kinds: [1] }]), sent++;
            await env.sleep(111);
          }
        }),
      );
      return { attackers: as, notes: [`${sent} COUNTs sent from ${n} addresses`] };
    },
  },

  delete: {
    what: "900 stored events of one author with 1,800 tags each; one kind 5 deletes them all",
    async prepare(dir) {
      const n = Math.round(900 * SCALE);
      deleteIds = Array.from({ length: n }, (_, i) => hex64(`del ${i}`));
      await writeStore(
        dir,
        n,
        (i) => ({
          id: deleteIds[i]!,
          pubkey: deleteAuthor.pk,
          created_at: base + i,
          kind: 1,
          tags: heavyTags(1800, `d${i}`),
          content: `heavy ${i}`,
          sig: SIG,
        }),
        false,
        50,
      );
    },
    async run(env) {
      const [a] = await connectAll(env.port, [{ ip: IPS[0]!, n: 1 }]);
      await env.sleep(2000);
      const del = sign(
        deleteAuthor,
        5,
        deleteIds.map((id) => ["e", id]),
        "",
      );
      const t0 = performance.now();
      let okMs = NaN;
      a!.onText = (h) => void (h.startsWith(`["OK","${del.id}"`) ? (okMs = performance.now() - t0) : 0);
      a!.send(["EVENT", del]);
      await env.sleep(env.until - performance.now());
      for (let end = performance.now() + 10_000; Number.isNaN(okMs) && performance.now() < end && env.relay.running; ) await Bun.sleep(50);
      return { attackers: [a!], notes: [`kind 5 with ${deleteIds.length} e tags: its OK after ${okMs.toFixed(0)} ms`] };
    },
  },

  expiry: {
    what: "420 stored events of 1,800 tags expiring in the same second; the first sweep (60 s after start) in the window",
    warmupMs: 48_000,
    async prepare(dir) {
      const expires = nowSec() + 20;
      await writeStore(
        dir,
        Math.round(420 * SCALE),
        (i) => ({
          id: hex64(`exp ${i}`),
          pubkey: pubkeys[i % 1000]!,
          created_at: base + i,
          kind: 1,
          tags: [...heavyTags(1799, `x${i}`), ["expiration", String(expires)]],
          content: `expiring ${i}`,
          sig: SIG,
        }),
        false,
        50,
      );
    },
    async run(env) {
      await env.sleep(Math.max(SECONDS, 25) * 1000);
      return { attackers: [], notes: ["the relay's own sweep; no attacker traffic"] };
    },
    async after(env, out) {
      // Did the sweep run inside the window? (read-only, beside the running relay: WAL mode)
      const db = new Database(join(env.dir, "bunstr.sqlite"), { readonly: true });
      const left = (db.query("SELECT count(*) AS n FROM events WHERE expiration IS NOT NULL").get() as { n: number }).n;
      db.close();
      out.notes!.push(left ? `${left} expiring events still stored: the sweep did not run in the window` : "the sweep ran in the window");
    },
  },

  writes: {
    what: "5 addresses inside their EVENT bursts: 1,800-tag notes, kind 5s of 1,700 e / 1,350 a tags, a 1,600-p kind 3",
    async run(env) {
      const as = await connectAll(
        env.port,
        IPS.slice(0, 5).map((ip) => ({ ip, n: 1 })),
      );
      let sent = 0;
      await Promise.all(
        as.map(async (a, k) => {
          const key = newKey();
          const t0 = nowSec() - 3600;
          const make = (i: number): NostrEvent => {
            switch (i % 4) {
              case 0:
                return sign(key, 1, heavyTags(1800, `w${k}-${i}`), `heavy ${i}`);
              case 1:
                return sign(
                  key,
                  5,
                  Array.from({ length: 1700 }, (_, j) => ["e", hex64(`w${k}-${i}-${j}`)]),
                  "",
                );
              case 2:
                return sign(
                  key,
                  5,
                  Array.from({ length: 1350 }, (_, j) => ["a", `30023:${key.pk}:${k}-${i}-${j}`]),
                  "",
                );
              default:
                return sign(
                  key,
                  3,
                  Array.from({ length: 1600 }, (_, j) => ["p", pubkeys[(i + j) % 1000]!]),
                  "",
                  t0 + i,
                );
            }
          };
          // The burst (200) at once, then 9.5 a second (the rate is 10/s).
          let i = 0;
          for (; i < 200 && env.active(); i++) a.send(["EVENT", make(i)]), sent++;
          const start = performance.now();
          while (env.active()) {
            const due = 200 + Math.floor(((performance.now() - start) / 1000) * 9.5);
            for (; i < due; i++) a.send(["EVENT", make(i)]), sent++;
            await env.sleep(50);
          }
        }),
      );
      return { attackers: as, notes: [`${sent} heavy events sent`] };
    },
  },

  partial: {
    what: "10 addresses x 60 conns each hold 960 KB of an unfinished message (one frame or 15 fragments)",
    async run(env) {
      const per = Math.max(1, Math.round(60 * SCALE));
      const as = await connectAll(
        env.port,
        IPS.map((ip) => ({ ip, n: per })),
      );
      // Half of them: a masked frame header announcing 1,000,000 bytes, then 960 KB of its payload;
      // the other half: the same 960 KB as 15 fragments of 64 KB, none of them final.
      const head = Buffer.alloc(14);
      head[0] = 0x81;
      head[1] = 0x80 | 127;
      head.writeBigUInt64BE(1_000_000n, 2);
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      const fragment = (first: boolean, payload: Buffer) => {
        const f = clientFrame(first ? 1 : 0, payload);
        f[0] = f[0]! & 0x7f; // FIN off: more to come
        return f;
      };
      for (const [k, a] of as.entries()) {
        if (!env.active()) break;
        if (k % 2 === 0) {
          a.write(head);
          for (let sent = 0; sent < 960 * 1024; sent += chunk.length) if (!a.write(chunk)) await a.drain();
        } else for (let i = 0; i < 15; i++) if (!a.write(fragment(i === 0, chunk))) await a.drain();
      }
      // A byte every 3 s keeps each one moving (a 1-byte fragment for the fragmented ones).
      const one = Buffer.from([0x20]);
      const oneFragment = fragment(false, one);
      while (env.active()) {
        await env.sleep(3000);
        for (const [k, a] of as.entries()) a.write(k % 2 === 0 ? one : oneFragment);
      }
      const open = as.filter((a) => !a.closed).length;
      return { attackers: as, notes: [`${as.length} connections, ${open} still open at the end`] };
    },
  },

  fts: {
    what: "150k-note full-text index; 2 addresses x 2 conns loop a search for 120 common words",
    async prepare(dir) {
      await writeStore(
        dir,
        Math.round(150_000 * SCALE),
        (i) => ({
          id: hex64(`f${i}`),
          pubkey: pubkeys[i % 1000]!,
          created_at: base + i,
          kind: 1,
          tags: [],
          content: prose(i + 1, 30),
          sig: SIG,
        }),
        true,
      );
    },
    async run(env) {
      const as = await connectAll(env.port, [
        { ip: IPS[0]!, n: 2 },
        { ip: IPS[1]!, n: 2 },
      ]);
      const query = WORDS.slice(0, 120).join(" ");
      let sent = 0;
      await Promise.all(
        as.map(async (a, k) => {
          for (let i = 0; env.active() && !a.closed; i++) {
            const sub = `q${k}-${i}`;
            let done = false;
            a.onText = (h) => void (h.startsWith(`["EOSE","${sub}"`) || h.startsWith(`["CLOSED","${sub}"`) ? (done = true) : 0);
            a.send(["REQ", sub, { kinds: [1], search: query, limit: 10 }]);
            sent++;
            while (!done && env.active()) await Bun.sleep(5);
            a.send(["CLOSE", sub]);
          }
        }),
      );
      return { attackers: as, notes: [`${sent} searches of ${query.length} characters`] };
    },
  },

  auth: {
    what: "50 conns (5 addresses) pipeline AUTH with a valid id and a bad signature, flat out",
    async run(env) {
      const as = await connectAll(
        env.port,
        IPS.slice(0, 5).map((ip) => ({ ip, n: Math.max(1, Math.round(10 * SCALE)) })),
      );
      await Promise.all(
        as.map(async (a, k) => {
          let challenge = "";
          a.onText = (h) => void (h.startsWith('["AUTH"') ? (challenge = JSON.parse(h)[1]) : 0);
          for (let end = performance.now() + 1000; !challenge && performance.now() < end; ) await Bun.sleep(10);
          const key = newKey();
          // 100 AUTH frames (ids valid, signatures of other ids) in one buffer, written while the socket takes them.
          const frames = Buffer.concat(
            Array.from({ length: 100 }, (_, i) => {
              const e = sign(
                key,
                22242,
                [
                  ["relay", `ws://127.0.0.1:${env.port}/`],
                  ["challenge", challenge],
                ],
                "",
                nowSec() - i,
              );
              e.sig = sign(key, 1, [], `other ${k} ${i}`).sig;
              return clientTextFrame(JSON.stringify(["AUTH", e]));
            }),
          );
          // A write the kernel takes at once returns true: without a turn of the event loop in
          // between, this thread would spin (and never see the socket close).
          while (env.active() && !a.closed) {
            if (!a.write(frames)) await a.drain(500);
            else await Bun.sleep(0);
          }
        }),
      );
      return { attackers: as };
    },
  },

  compression: {
    what: 'compression = "shared"; 8 conns (4 addresses) send frames inflating ~1,000x, flat out',
    config: '[network]\ncompression = "shared"\n',
    async run(env) {
      const as = await connectAll(
        env.port,
        IPS.slice(0, 4).map((ip) => ({ ip, n: Math.max(1, Math.round(2 * SCALE)) })),
        "permessage-deflate; client_no_context_takeover; server_no_context_takeover",
      );
      // A CLOSE of no subscription padded with 120 KB of JSON whitespace: no answer, no rate charged.
      const text = `["CLOSE",${" ".repeat(120_000)}"nothing"]`;
      // A sync flush, its 00 00 ff ff tail taken off, as RFC 7692 7.2.1 has a sender do.
      const payload = deflateRawSync(Buffer.from(text), { finishFlush: constants.Z_SYNC_FLUSH }).subarray(0, -4);
      const frame = clientFrame(0x41, payload); // FIN | RSV1 | text
      const batch = Buffer.concat(Array.from({ length: 200 }, () => frame));
      let reconnects = 0;
      const all = [...as];
      await Promise.all(
        as.map(async (first, k) => {
          const ip = IPS[Math.floor(k / Math.max(1, Math.round(2 * SCALE)))]!;
          for (let a: Attacker | undefined = first; env.active(); ) {
            while (a && env.active() && !a.closed) {
              if (!a.write(batch)) await a.drain(500);
              else await Bun.sleep(0); // a turn of the event loop: see auth
            }
            // Closed: again, as fast as the connection limits let this address.
            await env.sleep(100);
            if (!env.active()) break;
            [a] = await connectAll(env.port, [{ ip, n: 1 }], "permessage-deflate; client_no_context_takeover; server_no_context_takeover");
            if (a) all.push(a), reconnects++;
          }
        }),
      );
      // What the kernel took (the upgrade requests' few hundred bytes aside).
      const frames = Math.round(all.reduce((n, a) => n + a.sock.bytesWritten, 0) / frame.length);
      return {
        attackers: all,
        notes: [
          `${frames} frames of ${frame.length} bytes written, each inflating to ${text.length} (${Math.round(text.length / frame.length)}x); ${reconnects} reconnections`,
        ],
      };
    },
  },

  logs: {
    what: "NIP-86 calls with a valid non-admin NIP-98 token, flat out; then SIGUSR2 twice",
    async run(env) {
      const before = env.relay.stdout.bytes + env.relay.stderr.bytes;
      const body = JSON.stringify({ method: "listbannedpubkeys", params: [] });
      const sk = generateSecretKey();
      const token = finalizeEvent(
        {
          kind: 27235,
          created_at: nowSec(),
          content: "",
          tags: [
            ["u", `http://127.0.0.1:${env.port}/`],
            ["method", "POST"],
            ["payload", createHash("sha256").update(body).digest("hex")],
          ],
        },
        sk,
      );
      const request = Buffer.from(
        `POST / HTTP/1.1\r\nHost: 127.0.0.1:${env.port}\r\nContent-Type: application/nostr+json+rpc\r\n` +
          `Authorization: Nostr ${Buffer.from(JSON.stringify(token)).toString("base64")}\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      );
      const statuses = new Map<string, number>();
      let calls = 0;
      // 8 keep-alive connections from each of 2 addresses, each sending its next call as soon as the
      // last is answered (Bun closes a connection that pipelines them), reconnecting when closed.
      await Promise.all(
        [IPS[0]!, IPS[1]!].flatMap((ip) =>
          Array.from({ length: 8 }, async () => {
            while (env.active()) {
              const sock = tcpConnect({ port: env.port, host: "127.0.0.1", localAddress: ip });
              sock.on("error", () => {});
              let tail = "";
              const next = () => {
                if (env.active()) sock.write(request), calls++;
                else sock.destroy();
              };
              sock.on("data", (d: Buffer) => {
                const s = tail + d.toString("latin1");
                let n = 0;
                for (const m of s.matchAll(/HTTP\/1\.1 (\d{3})/g)) n++, statuses.set(m[1]!, (statuses.get(m[1]!) ?? 0) + 1);
                tail = s.slice(-16);
                for (let i = 0; i < n; i++) next();
              });
              sock.once("connect", next);
              await new Promise<void>((ok) => sock.once("close", () => ok()));
              if (env.active()) await env.sleep(50);
            }
          }),
        ),
      );
      const bytes = env.relay.stdout.bytes + env.relay.stderr.bytes - before;
      const policy = bytes > 64 * 1024 ? [`the relay wrote ${(bytes / 1024).toFixed(0)} KiB of log lines for refused NIP-86 calls`] : [];
      return {
        attackers: [],
        extra: Object.fromEntries([...statuses].map(([s, n]) => [`HTTP ${s}`, n])),
        notes: [`${calls} calls sent; relay wrote ${bytes} bytes to stdout+stderr (${(bytes / Math.max(1, calls)).toFixed(0)} per call)`],
        policy,
      };
    },
    async after(env, out) {
      // A second SIGUSR2 while the first hand-over drains: one open connection keeps the drain busy.
      const ws = await RawWs.connect(env.port, HONEST_IP);
      env.relay.proc.kill("SIGUSR2");
      await Bun.sleep(20);
      env.relay.proc.kill("SIGUSR2");
      const code = await Promise.race([env.relay.proc.exited, Bun.sleep(15_000).then(() => "none")]);
      ws.close();
      out.notes!.push(`SIGUSR2 twice: exit code ${code}`);
      if (code !== 0) out.policy!.push(`a second SIGUSR2 during the hand-over: exit code ${code}`);
    },
  },
};

// --- the runner ---------------------------------------------------------------------------------------
function anonMiB(pid: number): number {
  try {
    return memoryMiB(pid).anon;
  } catch {
    return NaN;
  }
}
const rssNow = (pid: number) => {
  try {
    return memoryMiB(pid).rss;
  } catch {
    return NaN;
  }
};

interface Result {
  attack: string;
  load: string;
  honest: HonestFigures;
  rssStart: number;
  rssPeak: number;
  rssEnd: number;
  anonEnd: number;
  alive: boolean;
  ceiling: boolean;
  attackers: Record<string, number>;
  notes: string[];
  failures: string[];
  held: boolean;
}

async function runAttack(name: string): Promise<Result> {
  const attack = ATTACKS[name]!;
  const dir = mkdtempSync(join(tmpdir(), "bunstr-hostile2-"));
  try {
    await attack.prepare?.(dir);
    const configFile = join(dir, "bunstr.toml");
    writeFileSync(configFile, `[rate_limits]\nexempt_private_addresses = false\n${attack.config ?? ""}`);
    const relay = await RelayProcess.spawn({
      verify: true,
      dataDir: dir,
      args: ["--config", configFile],
      startTimeoutMs: 60_000,
      command: MAIN ? [process.execPath, MAIN] : undefined,
    });
    const port = Number(new URL(relay.url).port);
    log(`${name}: relay ${relay.url} pid ${relay.pid}: ${attack.what}`);
    if (attack.warmupMs) await Bun.sleep(attack.warmupMs);
    const load = loadavg()
      .map((x) => x.toFixed(2))
      .join(" ");
    const rssStart = rssNow(relay.pid);
    let rssPeak = rssStart;
    let ceiling = false;
    const sampler = setInterval(() => {
      if (!relay.running) return;
      const r = rssNow(relay.pid);
      rssPeak = Math.max(rssPeak, r);
      if (r > CEILING) ceiling = true;
      if (r > CEILING + 300) log(`${name}: RSS ${r.toFixed(0)} MiB: killing the relay`), relay.kill();
    }, 100);
    const honest = new Honest();
    await honest.start(port);
    const t0 = performance.now();
    const until = t0 + SECONDS * 1000;
    const env: Env = {
      port,
      relay,
      dir,
      until,
      active: () => performance.now() < env.until && relay.running && !ceiling,
      sleep: async (ms) => {
        for (const end = performance.now() + ms; performance.now() < end && performance.now() < env.until && relay.running && !ceiling; )
          await Bun.sleep(Math.min(100, end - performance.now()));
      },
    };
    if (name === "expiry") env.until = t0 + Math.max(SECONDS, 25) * 1000;
    const out = await attack.run(env);
    out.notes ??= [];
    out.policy ??= [];
    const h = await honest.stop();
    for (const a of out.attackers) a.close();
    const attackers = tally(out.attackers, out.extra);
    // Settle: the attackers gone, does the memory fall back (within 50 MiB of the start), and how soon?
    const left = performance.now();
    for (const end = left + SETTLE * 1000; performance.now() < end && relay.running; await Bun.sleep(100))
      if (rssNow(relay.pid) < rssStart + 50) {
        out.notes.push(`RSS back within 50 MiB of the start ${((performance.now() - left) / 1000).toFixed(1)} s after the attackers left`);
        break;
      }
    clearInterval(sampler);
    const alive = relay.running;
    const rssEnd = rssNow(relay.pid);
    const anonEnd = anonMiB(relay.pid);
    if (alive) await attack.after?.(env, out);
    const exit = relay.running ? await relay.stop() : relay.proc.exitCode;
    if (name !== "logs" && exit !== 0) out.notes.push(`relay exit code ${exit}`);
    const failures: string[] = [];
    if (!alive) failures.push("the relay died");
    if (ceiling) failures.push(`RSS passed the ${CEILING} MiB ceiling: attack stopped early`);
    if (!(h.okP99 < 250)) failures.push(`honest OK p99 ${h.okP99.toFixed(0)} ms`);
    if (!(h.reqP99 < 250)) failures.push(`honest REQ p99 ${h.reqP99.toFixed(0)} ms`);
    if (h.timeouts) failures.push(`${h.timeouts} honest timeouts`);
    // One note every 100 ms: far fewer sent means the honest client's own thread was starved (by
    // this process's attackers or the box), so its latencies say nothing about the relay.
    const expected = ((performance.now() - t0) / 100) * 0.5;
    if (h.okSent < Math.min(expected, SECONDS * 5))
      failures.push(`the honest client sent only ${h.okSent} notes: this run measured nothing`);
    if (rssPeak - rssStart >= 300) failures.push(`RSS grew ${(rssPeak - rssStart).toFixed(0)} MiB`);
    else if (!(rssEnd - rssStart < 150)) failures.push(`RSS ${(rssEnd - rssStart).toFixed(0)} MiB above the start after the attack`);
    failures.push(...out.policy);
    const r: Result = {
      attack: name,
      load,
      honest: h,
      rssStart,
      rssPeak,
      rssEnd,
      anonEnd,
      alive,
      ceiling,
      attackers,
      notes: [...out.notes, ...h.notes],
      failures,
      held: failures.length === 0,
    };
    log(`${name}: ${r.held ? "HELD" : `NOT HELD (${failures.join("; ")})`}`);
    return r;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const results: Result[] = [];
for (const name of chosen) results.push(await runAttack(name));

const f0 = (x: number) => (Number.isFinite(x) ? x.toFixed(0) : "-");
console.log(
  `\nhostile clients, second round: ${SECONDS} s per attack, scale ${SCALE}, relay ${MAIN ?? "src/main.ts"}, exempt_private_addresses = false`,
);
console.log(
  "attack       load (1/5/15)     honest OK sent/answered  OK p50/p99/max ms      REQ p50/p99 ms  timeouts  RSS start/peak/end MiB  verdict",
);
for (const r of results) {
  const h = r.honest;
  console.log(
    `${r.attack.padEnd(12)} ${r.load.padEnd(17)} ${`${h.okSent}/${h.okAnswered}`.padEnd(24)} ${`${f0(h.okP50)}/${f0(h.okP99)}/${f0(h.okMax)}`.padEnd(22)} ${`${f0(h.reqP50)}/${f0(h.reqP99)}`.padEnd(15)} ${String(h.timeouts).padEnd(9)} ${`${f0(r.rssStart)}/${f0(r.rssPeak)}/${f0(r.rssEnd)}`.padEnd(23)} ${r.held ? "HELD" : "NOT HELD"}`,
  );
}
for (const r of results) {
  console.log(`\n${r.attack}: ${ATTACKS[r.attack]!.what}`);
  console.log(`  attackers were answered: ${JSON.stringify(r.attackers)}`);
  console.log(`  honest OKs answered: ${JSON.stringify(r.honest.okAnswers)}`);
  for (const n of r.notes) console.log(`  ${n}`);
  if (!r.held) console.log(`  NOT HELD: ${r.failures.join("; ")}`);
}
console.log(JSON.stringify(results.map((r) => ({ ...r, honest: { ...r.honest } }))));
process.exit(results.every((r) => r.held) ? 0 : 1);
