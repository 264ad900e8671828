// Issue 36, item 4: heavy events within policy. Attackers on addresses of their own send valid
// events that cost the writer a hundred times an ordinary note (1,800 tags, deletion requests of
// 1,700 `e` or 1,350 `a` targets, big replaceable lists), as fast as their EVENT burst allows,
// while an honest client publishes short notes. Charged one token an event and queued first come
// first served, the heavy events filled the writer for seconds and the honest OKs waited behind
// them; charged by their cost (policy/write-cost.ts) the attackers are refused `rate-limited:`
// after a few, and the writer queue takes its batches round-robin by address (store/queue.ts).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { RawWs, type Frame } from "../bench/lib/rawws.ts";
import type { NostrEvent } from "../src/protocol/event.ts";
import { failOnRelayErrors, signer, startTestRelay, type Signer, type TestRelay } from "./helpers.ts";

failOnRelayErrors();

const ATTACKERS = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"];
const HONEST = "127.0.0.9";
/** Heavy events each attacker sends at once, then one every TRICKLE_MS while the honest client publishes. */
const BURST = 40;
const TRICKLE = 20;
const TRICKLE_MS = 200;
/** The honest client's notes, one every 100 ms. */
const NOTES = 40;

let relay: TestRelay;
const sockets: RawWs[] = [];

beforeAll(async () => {
  // Default EVENT limits (600 a minute, bursts of 200) for every address, loopback included, as
  // issue 36 was tested; the other rate limits stay off (test/helpers.ts).
  relay = await startTestRelay({ rate_limits: { exempt_private_addresses: false, events_per_minute: 600, events_burst: 200 } });
});
afterAll(async () => {
  for (const s of sockets) s.close();
  await relay.stop();
});

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
      return s.sign({ kind: 10000, content: "", created_at: Math.floor(Date.now() / 1000) + i, tags: Array.from({ length: 1500 }, () => ["p", hex(32)]) });
  }
}

const okFor = (id: string) => (f: Frame) => f[0] === "OK" && f[1] === id;

test("attackers sending heavy events within policy are rate-limited; an honest client's OKs stay quick", async () => {
  const port = relay.server.port!;
  const attackers = await Promise.all(ATTACKERS.map((a) => RawWs.connect(port, a)));
  const honest = await RawWs.connect(port, HONEST);
  sockets.push(...attackers, honest);
  const signers = attackers.map(() => signer());
  const events = signers.map((s) => Array.from({ length: BURST + TRICKLE }, (_, i) => heavy(s, i)));

  // The burst: every attacker's first BURST events at once.
  attackers.forEach((ws, a) => {
    for (const e of events[a]!.slice(0, BURST)) ws.send(["EVENT", e]);
  });
  // Then a trickle from each while the honest client publishes a note every 100 ms.
  let sent = BURST;
  const trickle = setInterval(() => {
    if (sent >= BURST + TRICKLE) return;
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

  // Every honest note stored, and quickly: 250 ms is the bar, 2.5 s leaves a busy
  // machine room (before: 3-5 s at the 99th percentile, and here more).
  expect(oks.every((f) => f[2] === true)).toBe(true);
  latencies.sort((a, b) => a - b);
  const p99 = latencies[Math.ceil(latencies.length * 0.99) - 1]!;
  console.log(`honest OK latency: p50 ${latencies[latencies.length >> 1]!.toFixed(0)} ms, p99 ${p99.toFixed(0)} ms`);
  expect(p99).toBeLessThan(2500);

  // The attackers: every event answered; after the first few of each, `rate-limited:`.
  for (const [a, ws] of attackers.entries()) {
    const answers = await Promise.all(events[a]!.slice(0, sent).map((e) => ws.next(okFor(e.id), 20_000)));
    const limited = answers.filter((f) => f[2] === false && String(f[3]).startsWith("rate-limited:")).length;
    const stored = answers.filter((f) => f[2] === true).length;
    expect(stored).toBeGreaterThan(0);
    expect(stored).toBeLessThanOrEqual(10);
    expect(limited).toBeGreaterThanOrEqual(sent - 10);
  }
}, 30_000);
