// Issue 36, item 4: heavy events within policy. Attackers on addresses of their own send valid
// events that cost the writer a hundred times an ordinary note (1,800 tags, deletion requests of
// 1,700 `e` or 1,350 `a` targets, big replaceable lists), as fast as their EVENT burst allows,
// while an honest client publishes short notes. Charged one token an event and queued first come
// first served, the heavy events filled the writer for seconds and the honest OKs waited behind
// them; charged by their cost (policy/write-cost.ts) the attackers are refused `rate-limited:`
// after a few, and the writer queue takes its batches round-robin by address (store/queue.ts).
import { afterAll, expect, test } from "bun:test";
import { RawWs, type Frame } from "../bench/lib/rawws.ts";
import type { NostrEvent } from "../src/protocol/event.ts";
import { failOnRelayErrors, signer, startTestRelay, type ConfigPatch, type Signer, type TestRelay } from "./helpers.ts";

failOnRelayErrors();

const ATTACKERS = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"];
const HONEST = "127.0.0.9";
/** Heavy events each attacker sends one every TRICKLE_MS after its first burst, while the honest client publishes. */
const TRICKLE = 20;
const TRICKLE_MS = 200;
/** The honest client's notes, one every 100 ms. */
const NOTES = 40;

const relays: TestRelay[] = [];
const sockets: RawWs[] = [];
afterAll(async () => {
  for (const s of sockets) s.close();
  for (const r of relays) await r.stop();
});

async function relayWith(patch: ConfigPatch): Promise<TestRelay> {
  const r = await startTestRelay(patch);
  relays.push(r);
  return r;
}

const hex = (n: number) => Array.from(crypto.getRandomValues(new Uint8Array(n)), (b) => b.toString(16).padStart(2, "0")).join("");

/** The heavy events of issue 36, in turn, each under the default 128 KiB message and 2,000 tags. */
function heavy(s: Signer, i: number): NostrEvent {
  switch (i % 4) {
    case 0:
      return s.sign({ kind: 1, content: `heavy ${i}`, tags: Array.from({ length: 1800 }, (_, k) => ["t", `topic-${i}-${k}`]) });
    case 1:
      return s.sign({ kind: 5, content: "", tags: Array.from({ length: 1700 }, () => ["e", hex(32)]) });
    case 2:
      return s.sign({ kind: 5, content: "", tags: Array.from({ length: 1350 }, (_, k) => ["a", `30023:${s.pubkey}:d-${i}-${k}`]) });
    default:
      // A replaceable list, replaced by the next one: its predecessor's tag rows are deleted too.
      return s.sign({
        kind: 10000,
        content: "",
        created_at: Math.floor(Date.now() / 1000) + i,
        tags: Array.from({ length: 1500 }, () => ["p", hex(32)]),
      });
  }
}

const okFor = (id: string) => (f: Frame) => f[0] === "OK" && f[1] === id;

interface Run {
  /** The honest client's OK latencies (ms), sorted. */
  latencies: number[];
  honestStored: boolean;
  /** Per attacker: how many of its events were stored, and how many refused `rate-limited:`. */
  attackers: { sent: number; stored: number; limited: number }[];
}

/**
 * Each attacker sends `burst` heavy events at once, then one every TRICKLE_MS (TRICKLE more),
 * while the honest client publishes NOTES short notes, one every 100 ms.
 */
async function attack(relay: TestRelay, burst: number): Promise<Run> {
  const port = relay.server.port!;
  const attackers = await Promise.all(ATTACKERS.map((a) => RawWs.connect(port, a)));
  const honest = await RawWs.connect(port, HONEST);
  sockets.push(...attackers, honest);
  const signers = attackers.map(() => signer());
  const events = signers.map((s) => Array.from({ length: burst + TRICKLE }, (_, i) => heavy(s, i)));

  attackers.forEach((ws, a) => {
    for (const e of events[a]!.slice(0, burst)) ws.send(["EVENT", e]);
  });
  let sent = burst;
  const trickle = setInterval(() => {
    if (sent >= burst + TRICKLE) return;
    attackers.forEach((ws, a) => ws.send(["EVENT", events[a]![sent]]));
    sent++;
  }, TRICKLE_MS);
  const author = signer();
  const latencies: number[] = [];
  const oks: Frame[] = [];
  try {
    const pending: Promise<void>[] = [];
    for (let i = 0; i < NOTES; i++) {
      const note = author.sign({ kind: 1, content: `hello ${i}`, tags: [["t", "honest"]] });
      const t0 = performance.now();
      honest.send(["EVENT", note]);
      pending.push(
        honest.next(okFor(note.id), 20_000).then((f) => {
          latencies.push(performance.now() - t0);
          oks.push(f);
        }),
      );
      await Bun.sleep(100);
    }
    await Promise.all(pending);
  } finally {
    clearInterval(trickle);
  }
  latencies.sort((a, b) => a - b);
  const result: Run = { latencies, honestStored: oks.every((f) => f[2] === true), attackers: [] };
  for (const [a, ws] of attackers.entries()) {
    const answers = await Promise.all(events[a]!.slice(0, sent).map((e) => ws.next(okFor(e.id), 20_000)));
    result.attackers.push({
      sent,
      stored: answers.filter((f) => f[2] === true).length,
      limited: answers.filter((f) => f[2] === false && String(f[3]).startsWith("rate-limited:")).length,
    });
  }
  const p = (q: number) => latencies[Math.ceil(latencies.length * q) - 1]!.toFixed(0);
  console.log(`honest OK latency: p50 ${p(0.5)} ms, p99 ${p(0.99)} ms; attackers ${JSON.stringify(result.attackers)}`);
  return result;
}

const p99 = (r: Run) => r.latencies[Math.ceil(r.latencies.length * 0.99) - 1]!;

test("attackers sending heavy events within their EVENT limits are rate-limited after a few; an honest client's OKs stay quick", async () => {
  // Default EVENT limits (600 a minute, bursts of 200) for every address, loopback included, as
  // issue 36 was tested; the other rate limits stay off (test/helpers.ts).
  const relay = await relayWith({ rate_limits: { exempt_private_addresses: false, events_per_minute: 600, events_burst: 200 } });
  const r = await attack(relay, 40);
  // Every honest note stored, and quickly: 250 ms is the bar, 2.5 s leaves a busy
  // machine room (before: 4-5 s at the 99th percentile here, 2-3 s at the median; after: under
  // 0.7 s on a 2-core machine at load 8).
  expect(r.honestStored).toBe(true);
  expect(p99(r)).toBeLessThan(2500);
  // A heavy event costs a hundred tokens or a whole burst: one or two of each attacker's are
  // stored, the rest refused (before: all of them stored, one token each).
  for (const a of r.attackers) {
    expect(a.stored).toBeGreaterThan(0);
    expect(a.stored).toBeLessThanOrEqual(10);
    expect(a.limited).toBeGreaterThanOrEqual(a.sent - 10);
  }
  // 26 s beside a CPU hog at load 10 (the attack's heavy events are signed and sent by this
  // process, and the writer commits them): room for that, the bounds above unchanged.
}, 90_000);

test("without EVENT limits, the writer queue is fair between addresses and holds each to its share", async () => {
  // No rate limits at all (test/helpers.ts): only the writer queue stands between the attackers'
  // heavy events and the honest client's notes.
  const relay = await relayWith({ rate_limits: { exempt_private_addresses: false } });
  const r = await attack(relay, 60);
  expect(r.honestStored).toBe(true);
  // Before: 9 s at the 99th percentile, 7 s at the median (first come, first served); after: the
  // batch committing and the next, 1.3 s on a 2-core machine at load 8, 2.2-2.4 s beside a CPU
  // hog (load 7-10). The old code fails on `limited` below as well (no share per address).
  expect(p99(r)).toBeLessThan(5000);
  // Each attacker holds at most its share of the queue (max_write_queue_bytes_per_ip, 2 MiB: some
  // 20-40 of these events); what it sends past it is refused at once.
  for (const a of r.attackers) {
    expect(a.stored).toBeGreaterThan(0);
    expect(a.limited).toBeGreaterThan(0);
  }
  // Past 30 s beside a CPU hog at load 10: room for that, the bounds above unchanged.
}, 90_000);
