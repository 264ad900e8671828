// bunstr big-deletion stall check: a key with 40,000 stored events asks to
// vanish (NIP-62), or is banned (NIP-86 banpubkey), or deletes 2,000 of its events at once
// (NIP-09), while another client keeps publishing an event and reading it back. The SQLite writer
// runs on the main thread: one transaction deleting 40k events stalled every client ~2 s. Prints
// that client's EVENT->OK and REQ->EOSE latency (p50/p99/max) before and during the deletion,
// how long the deletion took, and a verdict.
//
//   npx bun bench/vanish-stall.ts [--events 40000] [--scenario vanish|ban|delete|all] [--max-ms 500]
//   BUNSTR_RELAY_MAIN=/path/to/old/src/main.ts npx bun bench/vanish-stall.ts   (another build)
//
// The relay runs with --no-verify (events carry valid ids and dummy signatures): the stall is
// the writer's, not the signature checks'. 127.0.0.1 only; every wait is bounded; about 30 s.
// Exit 0 when, for each scenario, the deletion completed and the other client's max latency
// stayed under --max-ms; 1 otherwise; 2 on bad arguments.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { finalizeEvent, generateSecretKey, getPublicKey } from "nostr-tools/pure";
import type { NostrEvent } from "../src/protocol/event.ts";
import { Conn, type RelayFrame } from "./lib/conn.ts";
import { fakePubkey, unsignedEvent } from "./lib/events.ts";
import { RATE_LIMITS_OFF, RelayProcess } from "./lib/relay.ts";
import { round, summarize, type Summary } from "./lib/stats.ts";

const { values } = parseArgs({
  args: process.argv.slice(2),
  strict: true,
  options: {
    events: { type: "string", default: "40000" },
    scenario: { type: "string", default: "all" },
    "max-ms": { type: "string", default: "500" },
    help: { type: "boolean", short: "h", default: false },
  },
});
if (values.help) {
  console.log("usage: npx bun bench/vanish-stall.ts [--events 40000] [--scenario vanish|ban|delete|all] [--max-ms 500]");
  process.exit(0);
}
const EVENTS = Number(values.events);
const MAX_MS = Number(values["max-ms"]);
const SCENARIOS = values.scenario === "all" ? ["vanish", "ban", "delete"] : [values.scenario!];
if (
  !Number.isInteger(EVENTS) ||
  EVENTS < 1000 ||
  EVENTS > 1_000_000 ||
  !(MAX_MS > 0) ||
  SCENARIOS.some((s) => !["vanish", "ban", "delete"].includes(s))
) {
  console.error("--events must be an integer in 1000..1000000, --max-ms positive, --scenario vanish|ban|delete|all");
  process.exit(2);
}
/** Targets of the NIP-09 request: as many as fit in max_message_bytes (128 KiB by default). */
const DELETE_TARGETS = 1700;
const HARD_LIMIT_MS = 120_000;
const t0 = performance.now();
const log = (m: string) => console.error(`[vanish-stall] ${((performance.now() - t0) / 1000).toFixed(1)} s: ${m}`);
const hardStop = setTimeout(() => {
  console.error(`FAIL: the run took longer than ${HARD_LIMIT_MS / 1000} s`);
  process.exit(1);
}, HARD_LIMIT_MS);

/** A connection that matches answers to requests by event id / subscription id. */
class Client {
  private waiting = new Map<string, (f: RelayFrame) => void>();
  private constructor(readonly conn: Conn) {
    conn.onFrame = (f) => {
      if (f[0] === "EVENT") this.events.get(f[1] as string)?.push(f[2] as NostrEvent);
      // CLOSED answers a REQ or a COUNT: whichever waits.
      const key =
        f[0] === "OK"
          ? `OK:${f[1]}`
          : f[0] === "EOSE"
            ? `END:${f[1]}`
            : f[0] === "COUNT"
              ? `COUNT:${f[1]}`
              : f[0] === "CLOSED"
                ? [`END:${f[1]}`, `COUNT:${f[1]}`].find((k) => this.waiting.has(k))
                : undefined;
      const w = key && this.waiting.get(key);
      if (w) this.waiting.delete(key), w(f);
    };
  }
  private events = new Map<string, NostrEvent[]>();
  static async open(url: string, name: string): Promise<Client> {
    return new Client(await Conn.connect(url, name));
  }
  private wait(key: string, ms = 30_000): Promise<RelayFrame> {
    return new Promise((resolve, reject) => {
      const t = setTimeout(
        () => (this.waiting.delete(key), reject(new Error(`${this.conn.name}: no answer for ${key} within ${ms} ms`))),
        ms,
      );
      this.waiting.set(key, (f) => (clearTimeout(t), resolve(f)));
    });
  }
  publish(e: NostrEvent): Promise<RelayFrame> {
    const p = this.wait(`OK:${e.id}`);
    this.conn.send(JSON.stringify(["EVENT", e]));
    return p;
  }
  async count(sub: string, filter: object): Promise<number> {
    const p = this.wait(`COUNT:${sub}`);
    this.conn.send(JSON.stringify(["COUNT", sub, filter]));
    const f = await p;
    if (f[0] !== "COUNT") throw new Error(`COUNT refused: ${JSON.stringify(f)}`);
    return (f[2] as { count: number }).count;
  }
  async req(sub: string, filter: object): Promise<NostrEvent[]> {
    this.events.set(sub, []);
    const p = this.wait(`END:${sub}`);
    this.conn.send(JSON.stringify(["REQ", sub, filter]));
    await p;
    if ((await p)[0] === "CLOSED") throw new Error(`REQ closed: ${JSON.stringify(await p)}`);
    const got = this.events.get(sub)!;
    this.events.delete(sub);
    this.conn.send(JSON.stringify(["CLOSE", sub]));
    return got;
  }
}

interface Probe {
  at: number;
  publishMs: number;
  reqMs: number;
}

/** Another client: publish one event, wait for its OK, read it back, again and again. */
function probeLoop(c: Client, stop: { done: boolean }): { samples: Probe[]; finished: Promise<void> } {
  const samples: Probe[] = [];
  const pk = fakePubkey();
  let i = 0;
  const finished = (async () => {
    while (!stop.done) {
      const e = unsignedEvent(pk, { content: `probe ${i++} ${Math.random()}` });
      const a = performance.now();
      const ok = await c.publish(e);
      const b = performance.now();
      if (ok[2] !== true) throw new Error(`probe event refused: ${JSON.stringify(ok)}`);
      const got = await c.req(`p${i}`, { ids: [e.id] });
      const d = performance.now();
      if (got.length !== 1) throw new Error("probe event not read back");
      samples.push({ at: a, publishMs: b - a, reqMs: d - b });
      await Bun.sleep(2);
    }
  })();
  return { samples, finished };
}

async function fill(url: string, pubkey: string, n: number): Promise<NostrEvent[]> {
  const conns = await Promise.all([0, 1, 2, 3].map((k) => Client.open(url, `fill${k}`)));
  const base = Math.floor(Date.now() / 1000) - n - 100;
  const events = Array.from({ length: n }, (_, k) =>
    unsignedEvent(pubkey, {
      created_at: base + k,
      content: `note ${k} of a key about to vanish`,
      tags: [
        ["t", `topic${k % 50}`],
        ["p", fakePubkey()],
      ],
    }),
  );
  let next = 0;
  await Promise.all(
    conns.map(async (c) => {
      const window: Promise<RelayFrame>[] = [];
      while (next < events.length) {
        window.push(c.publish(events[next++]!));
        if (window.length >= 400)
          for (const f of await Promise.all(window.splice(0))) if (f[2] !== true) throw new Error(`fill refused: ${JSON.stringify(f)}`);
      }
      for (const f of await Promise.all(window)) if (f[2] !== true) throw new Error(`fill refused: ${JSON.stringify(f)}`);
    }),
  );
  for (const c of conns) await c.conn.close();
  return events;
}

async function nip86(url: string, sk: Uint8Array, method: string, params: unknown[]): Promise<unknown> {
  const http = url.replace(/^ws/, "http");
  const body = JSON.stringify({ method, params });
  const payload = new Bun.CryptoHasher("sha256").update(body).digest("hex");
  const token = finalizeEvent(
    {
      kind: 27235,
      created_at: Math.floor(Date.now() / 1000),
      tags: [
        ["u", http],
        ["method", "POST"],
        ["payload", payload],
      ],
      content: "",
    },
    sk,
  );
  const res = await fetch(http, {
    method: "POST",
    headers: { "Content-Type": "application/nostr+json+rpc", Authorization: `Nostr ${btoa(JSON.stringify(token))}` },
    body,
  });
  return res.json();
}

interface Result {
  scenario: string;
  events: number;
  /** Events of the key left when the run stopped waiting (what should stay: 1, 0, or all but the targets). */
  left: number;
  fillPerSecond: number;
  answerMs: number;
  doneMs: number;
  baseline: { publish: Summary; req: Summary };
  during: { publish: Summary; req: Summary };
  pass: boolean;
}

async function runScenario(scenario: string): Promise<Result> {
  const adminSk = generateSecretKey();
  const dir = mkdtempSync(join(tmpdir(), "bunstr-vanish-stall-"));
  const configFile = join(dir, "bunstr.toml");
  writeFileSync(configFile, `${RATE_LIMITS_OFF}\n[admin]\npubkeys = ["${getPublicKey(adminSk)}"]\n`);
  const relay = await RelayProcess.spawn({ verify: false, args: ["--config", configFile] });
  try {
    const victim = fakePubkey();
    const f0 = performance.now();
    const stored = await fill(relay.url, victim, EVENTS);
    const fillPerSecond = EVENTS / ((performance.now() - f0) / 1000);
    log(`${scenario}: ${EVENTS} events of one key stored (${Math.round(fillPerSecond)} ev/s)`);
    const probe = await Client.open(relay.url, "probe");
    const actor = await Client.open(relay.url, "actor");
    const watcher = await Client.open(relay.url, "watcher");
    const stop = { done: false };
    const loop = probeLoop(probe, stop);
    await Bun.sleep(1500); // baseline
    const started = performance.now();
    let expectLeft: number;
    if (scenario === "vanish") {
      const ok = await actor.publish(unsignedEvent(victim, { kind: 62, tags: [["relay", "ALL_RELAYS"]], content: "bye" }));
      if (ok[2] !== true) throw new Error(`request to vanish refused: ${JSON.stringify(ok)}`);
      expectLeft = 1; // the request itself stays
    } else if (scenario === "ban") {
      const r = await nip86(relay.url, adminSk, "banpubkey", [victim, "bench"]);
      if ((r as { result?: unknown }).result !== true) throw new Error(`banpubkey failed: ${JSON.stringify(r)}`);
      expectLeft = 0;
    } else {
      const targets = stored.slice(0, DELETE_TARGETS);
      const ok = await actor.publish(unsignedEvent(victim, { kind: 5, tags: targets.map((e) => ["e", e.id]), content: "" }));
      if (ok[2] !== true) throw new Error(`deletion refused: ${JSON.stringify(ok)}`);
      expectLeft = EVENTS - DELETE_TARGETS + 1;
    }
    const answerMs = performance.now() - started;
    // Done when only what should stay is left (NIP-45 COUNT: the watcher reads no events).
    let left = -1;
    let doneMs = NaN;
    for (let k = 0; performance.now() - started < 60_000; k++) {
      left = await watcher.count(`w${k}`, { authors: [victim] });
      if (left === expectLeft) {
        doneMs = performance.now() - started;
        break;
      }
      await Bun.sleep(50);
    }
    await Bun.sleep(300);
    stop.done = true;
    await loop.finished;
    const before = loop.samples.filter((s) => s.at < started);
    const during = loop.samples.filter((s) => s.at >= started - 1 && s.at <= started + (Number.isFinite(doneMs) ? doneMs : 60_000));
    // A probe already waiting when the deletion began counts too: it is the one that stalls.
    const straddling = loop.samples.filter((s) => s.at < started && s.at + s.publishMs + s.reqMs > started);
    const win = [...straddling, ...during];
    const sum = (xs: Probe[], k: "publishMs" | "reqMs") => summarize(xs.map((s) => s[k]));
    const r: Result = {
      scenario,
      events: EVENTS,
      left,
      fillPerSecond: Math.round(fillPerSecond),
      answerMs: round(answerMs, 1),
      doneMs: round(doneMs, 1),
      baseline: { publish: sum(before, "publishMs"), req: sum(before, "reqMs") },
      during: { publish: sum(win, "publishMs"), req: sum(win, "reqMs") },
      pass: false,
    };
    r.pass = Number.isFinite(doneMs) && r.during.publish.max <= MAX_MS && r.during.req.max <= MAX_MS && win.length >= 3;
    for (const c of [probe, actor, watcher]) await c.conn.close();
    return r;
  } finally {
    if (process.env.DEBUG_STDERR) console.error(relay.stderr.text);
    await relay.stop();
    relay.removeDataDir();
    rmSync(dir, { recursive: true, force: true });
  }
}

const fmt = (s: Summary) =>
  `n ${String(s.n).padStart(4)}  p50 ${s.p50.toFixed(1).padStart(7)}  p99 ${s.p99.toFixed(1).padStart(7)}  max ${s.max.toFixed(1).padStart(7)} ms`;
const results: Result[] = [];
let failed = false;
for (const s of SCENARIOS) {
  try {
    results.push(await runScenario(s));
  } catch (e) {
    console.log(`FAIL ${s}: ${(e as Error).message}`);
    failed = true;
  }
}
for (const r of results) {
  console.log(
    `\n${r.scenario}: ${r.events} events of one key (filled at ${r.fillPerSecond} ev/s); answered in ${r.answerMs} ms, deletion complete after ${r.doneMs} ms`,
  );
  console.log(`  other client, before   EVENT->OK ${fmt(r.baseline.publish)}   REQ->EOSE ${fmt(r.baseline.req)}`);
  console.log(`  other client, during   EVENT->OK ${fmt(r.during.publish)}   REQ->EOSE ${fmt(r.during.req)}`);
  console.log(
    `  ${r.pass ? "PASS" : "FAIL"}: max latency during the deletion ${Math.max(r.during.publish.max, r.during.req.max).toFixed(1)} ms (limit ${MAX_MS} ms)${Number.isFinite(r.doneMs) ? "" : "; the deletion did not complete within 60 s"}`,
  );
  if (!r.pass) failed = true;
}
console.log(
  JSON.stringify({
    maxMs: MAX_MS,
    results: results.map((r) => ({
      ...r,
      baseline: undefined,
      publishMax: round(r.during.publish.max, 1),
      publishP99: round(r.during.publish.p99, 1),
      reqMax: round(r.during.req.max, 1),
      reqP99: round(r.during.req.p99, 1),
    })),
  }),
);
clearTimeout(hardStop);
process.exit(failed ? 1 : 0);
