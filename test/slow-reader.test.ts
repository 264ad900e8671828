// A subscriber that never reads, on a busy stream, is cut off once its unsent output passes
// limits.max_pending_bytes, while 200 other subscribers keep receiving every event with a p99
// latency close to the one measured without it, and the relay's memory stays bounded.
//
// The relay runs as its own process (--no-verify), so its RSS is its own (/proc). Baseline windows
// (no slow reader) and slow-reader windows alternate, twice, so load from elsewhere on the machine
// does not land in one kind of window only. The slow reader is raw TCP: it subscribes with the
// same subscription ids and filters as the others, so it shares their Bun topics, then never reads.
// The long version (1,000 subscribers) is bench/slow-reader.ts.
import { expect, test } from "bun:test";
import { runSlowReader, slowReaderReport } from "../bench/scenarios/slow-reader.ts";

const MiB = 1024 * 1024;

test("a never-reading subscriber is cut off at max_pending_bytes; 200 others get every event; the relay's work per second and the p99 stay near the baseline", async () => {
  const maxPendingBytes = 4 * MiB; // the default, written out so the test says what it checks
  const r = await runSlowReader({
    subscribers: 200,
    tickRate: 50, // every subscriber: 50 small ephemeral events/s
    bulkRate: 300, // the busy stream: 300 x 8 KiB events/s (~2.4 MiB/s) to the slow reader
    bulkBytes: 8192,
    rounds: 2,
    baselineMs: 3000,
    maxSlowMs: 15_000,
    maxPendingBytes,
    log: (m) => console.log(`[slow-reader] ${m}`),
  });
  console.log(slowReaderReport(r));

  // Each slow reader was cut off, not before its pending output reached the cap (allowing for the
  // witness-based estimate being a few frames off), and saw its connection closed.
  expect(r.cutOffs.length).toBe(2);
  for (const c of r.cutOffs) {
    expect(c.ms).not.toBeNull();
    expect(c.pendingBytes).toBeGreaterThan(maxPendingBytes / 2);
    expect(c.closed).toBe(true);
  }
  // Everyone else got everything, exactly once.
  expect(r.refused).toEqual([]);
  expect(r.incomplete).toEqual([]);
  expect(r.witnessMissing).toBe(0);
  expect(r.baseline.ticks).toBeGreaterThan(100);
  expect(r.slow.ticks).toBeGreaterThan(100);
  // The relay's own work: feeding and cutting off a slow reader costs it little CPU per second
  // of window beyond the baseline's (~0.13 s/s baseline, ~0.17 s/s with a slow reader here); a
  // relay that copied or retried the slow reader's pending output per frame would use far more.
  // CPU time is what the relay did, which other jobs on a shared box delay but do not add to.
  const cpuPerSec = (p: typeof r.baseline) => p.relayCpuSec / (p.ms / 1000);
  expect(cpuPerSec(r.slow)).toBeLessThanOrEqual(2 * cpuPerSec(r.baseline) + 0.05);
  // Latency, measured by this process's 200 subscribers, carries the whole machine's noise (runs
  // here saw either window's p99 at 2-3x the other's; beside a CPU hog at load 10: baseline p99
  // 97 ms, slow-reader windows 411 ms): no worse than four times the baseline + 50 ms, or 1,000 ms,
  // whichever is larger. A relay stalled by a slow reader shows seconds; the CPU bound above is
  // the one a loaded box cannot stretch.
  expect(r.slow.latencyMs.p99).toBeLessThanOrEqual(Math.max(4 * r.baseline.latencyMs.p99 + 50, 1000));
  // Memory: while slow readers were being fed and cut off, the relay's RSS stays within 100 MiB of
  // what it reached in the baseline windows (the catch-up ring is pre-filled, and baseline windows
  // alternate with slow ones, so garbage-collector lag shows in both).
  expect(r.rss.slowMax - Math.max(r.rss.start, r.rss.baselineMax)).toBeLessThan(100);
  // And the relay still serves and shuts down cleanly.
  expect(r.relayServes).toBe(true);
  expect(r.relayExitCode).toBe(0);
}, 60_000);
