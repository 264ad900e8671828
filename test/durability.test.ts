// Durability of the relay as a real process: 8 connections publish as fast as they are
// acknowledged, the relay is killed (SIGKILL) or stopped (SIGTERM) mid-stream, and a relay
// restarted on the same data directory must return every event that got OK true, byte for byte,
// from a database that passes PRAGMA integrity_check.
//
// Volume runs use --no-verify with unsigned events (a correct id, a dummy signature) so that making
// thousands of events costs microseconds; one smaller run keeps signature checks on with events
// signed once for this file. The long version is bench/durability.ts.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fakePubkey, newSecretKey, signedEvent, unsignedEvent } from "../bench/lib/events.ts";
import {
  describe as describeCycle,
  killCycle,
  restartAndCheck,
  type KillCycleResult,
  type KillTrigger,
  type RestartCheck,
} from "../bench/scenarios/durability.ts";
import type { NostrEvent } from "../src/protocol/event.ts";

const dir = mkdtempSync(join(tmpdir(), "bunstr-durability-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const CONNS = 8;
const WINDOW = 200;
const authors = Array.from({ length: CONNS }, fakePubkey);
let nonce = 0;

/** Small kind-1 events from 8 authors; unique across the file. */
function smallEvents(): (k: number, i: number) => NostrEvent {
  const run = `${Date.now()}-${++nonce}`;
  return (k, i) =>
    unsignedEvent(authors[k]!, {
      content: `durability ${run} ${k}:${i}`,
      tags: [
        ["t", "durability"],
        ["n", `${i}`],
      ],
    });
}

/** Heavier events (24 tags, ~1 KB of content) so each commit writes megabytes of WAL. */
function heavyEvents(): (k: number, i: number) => NostrEvent {
  const run = `${Date.now()}-${++nonce}`;
  const pad = "x".repeat(1000);
  return (k, i) =>
    unsignedEvent(authors[k]!, {
      content: `heavy ${run} ${k}:${i} ${pad}`,
      tags: Array.from({ length: 24 }, (_, t) => [String.fromCharCode(97 + (t % 26)), `${run}-${k}-${i}-${t}`]),
    });
}

/** `extra`: events stored though never acknowledged (committed, OK lost with the process), all cycles on this data dir. */
function expectDurable(k: KillCycleResult, c: RestartCheck, expectedCount: number, extra = c.maybeFound): void {
  expect(k.anomalies).toEqual([]);
  expect(c.closed).toEqual([]);
  expect(c.missing.slice(0, 5)).toEqual([]); // acknowledged ids not found (first few)
  expect(c.altered).toEqual([]);
  expect(c.exitCode).toBe(0);
  expect(c.integrity).toEqual(["ok"]);
  expect(c.orphanTags).toBe(0);
  // Exactly what was acknowledged, plus what was in flight and committed without its OK getting out.
  expect(c.storedEvents).toBe(expectedCount + extra);
}

async function sigkillAt(name: string, trigger: KillTrigger): Promise<{ kill: KillCycleResult; check: RestartCheck }> {
  const dataDir = join(dir, name);
  const kill = await killCycle({ dataDir, verify: false, conns: CONNS, window: WINDOW, make: smallEvents(), trigger });
  const expected = new Map(kill.acked.map((id) => [id, kill.sent.get(id)!]));
  const check = await restartAndCheck({ dataDir, verify: false, expected, maybe: kill.unanswered });
  console.log(`[durability] ${name}: ${describeCycle(kill, check)}`);
  expect(kill.exitCode).toBeNull(); // killed, not exited
  expect(kill.refused.size).toBe(0);
  expectDurable(kill, check, expected.size);
  return { kill, check };
}

for (const n of [200, 1000, 2500]) {
  test(`SIGKILL after ~${n} acknowledged events: every acknowledged event survives, integrity ok`, async () => {
    const { kill } = await sigkillAt(`kill-${n}`, { afterAcked: n });
    expect(kill.ackedAtSignal).toBeGreaterThanOrEqual(n);
    // The kill really was mid-stream: events were still in flight.
    expect(kill.unanswered.length).toBeGreaterThan(0);
  }, 30_000);
}

test("SIGKILL while a large transaction is being written to the WAL: committed ones survive, the torn one vanishes whole", async () => {
  const dataDir = join(dir, "mid-commit");
  const expected = new Map<string, NostrEvent>();
  // The kill is sent the moment the -wal file grows (polled every ms). Proof that it landed
  // mid-commit is read from the WAL the dead process left: valid frames after the last commit
  // frame (or a torn frame) are a transaction that was being written. A few attempts, same data.
  const attempts: string[] = [];
  let landed = false;
  let extra = 0;
  for (let attempt = 1; attempt <= 5 && !landed; attempt++) {
    const kill = await killCycle({
      dataDir,
      verify: false,
      conns: CONNS,
      window: WINDOW,
      make: heavyEvents(),
      trigger: { walGrowthAfterAcked: 300 },
    });
    for (const id of kill.acked) expected.set(id, kill.sent.get(id)!);
    const check = await restartAndCheck({ dataDir, verify: false, expected, maybe: kill.unanswered });
    const line = describeCycle(kill, check);
    attempts.push(line);
    console.log(`[durability] mid-commit attempt ${attempt}: ${line}`);
    // Valid frames after the last commit frame, or a torn frame: a transaction was being written.
    // Recovery drops it whole: its events are not there (and were never acknowledged), none half
    // (no orphan tag rows), and the count is exactly acknowledged + committed-but-unanswered.
    landed = kill.wal.uncommittedFrames > 0 || kill.wal.trailingBytes > 0;
    extra += check.maybeFound;
    expect(kill.refused.size).toBe(0);
    expectDurable(kill, check, expected.size, extra);
  }
  if (!landed) throw new Error(`no kill landed mid-commit in 5 attempts:\n${attempts.join("\n")}`);
}, 60_000);

test("SIGKILL with signature checks on (events signed once for this file)", async () => {
  // 8 keys, 1,600 really signed events (~1.6 s). Window 100: at most 800 in flight.
  const keys = Array.from({ length: CONNS }, newSecretKey);
  const PER_CONN = 200;
  const corpus = keys.map((sk, k) =>
    Array.from({ length: PER_CONN }, (_, i) =>
      signedEvent(sk, { content: `verified ${Date.now()} ${k}:${i}`, tags: [["t", "durability"]] }),
    ),
  );
  const dataDir = join(dir, "verified");
  const kill = await killCycle({
    dataDir,
    verify: true,
    conns: CONNS,
    window: 100,
    make: (k, i) => corpus[k]![i]!,
    trigger: { afterAcked: 500 },
  });
  const expected = new Map(kill.acked.map((id) => [id, kill.sent.get(id)!]));
  const check = await restartAndCheck({ dataDir, verify: true, expected, maybe: kill.unanswered });
  console.log(`[durability] verified: ${describeCycle(kill, check)}`);
  expect(kill.exitCode).toBeNull();
  expect(kill.ackedAtSignal).toBeGreaterThanOrEqual(500);
  expect(kill.refused.size).toBe(0);
  expectDurable(kill, check, expected.size);
}, 30_000);

test("SIGTERM during heavy ingest: exit 0 within 10 s, nothing acknowledged lost, WAL checkpointed, restart answers at once", async () => {
  const dataDir = join(dir, "sigterm");
  // The 8 connections keep sending through the shutdown (new events then get OK false).
  const kill = await killCycle({
    dataDir,
    verify: false,
    conns: CONNS,
    window: WINDOW,
    make: smallEvents(),
    trigger: { afterAcked: 1500 },
    signal: "SIGTERM",
  });
  expect(kill.exitCode).toBe(0);
  expect(kill.exitMs).toBeLessThan(10_000);
  // Checkpointed on the way out: no WAL left, or an empty one.
  expect(kill.wal.exists ? kill.wal.bytes : 0).toBe(0);
  expect(kill.notices.some((n) => n.startsWith("closing:"))).toBe(true);
  // Refusals during shutdown carry a NIP-01 prefix.
  for (const reason of kill.refused.values()) expect(reason).toMatch(/^(error|rate-limited): /);

  const expected = new Map(kill.acked.map((id) => [id, kill.sent.get(id)!]));
  const check = await restartAndCheck({ dataDir, verify: false, expected, maybe: kill.unanswered });
  console.log(`[durability] sigterm: exit ${kill.exitCode} in ${kill.exitMs.toFixed(0)} ms; ${describeCycle(kill, check)}`);
  expectDurable(kill, check, expected.size);
  // "Right away": the restarted relay answers its first REQ quickly after it says it is listening.
  expect(check.firstReqMs).toBeLessThan(1000);
}, 30_000);
