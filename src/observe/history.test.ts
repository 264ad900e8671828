// The status page's history (observe/history.ts): the relay's counters sampled into fixed rings.
import { expect, test } from "bun:test";
import type { Store } from "../store/types.ts";
import { History, HISTORY_BYTES } from "./history.ts";
import { RECENT_REFUSALS, RelayMetrics } from "./metrics.ts";

function fakeRelay(startedAt: number) {
  const metrics = new RelayMetrics();
  let conns = 2;
  const src = {
    metrics,
    store: { lastSeq: () => 0, count: async () => ({ count: 5 }), sizeBytes: () => 4096 } as unknown as Store,
    fanout: { deliveries: 0, groupCount: 0 },
    writer: { depth: 0 },
    verifier: { depth: 0 },
    inflight: 0,
    startedAt,
    connections: () => conns,
  };
  return { metrics, src, setConnections: (n: number) => (conns = n) };
}

test("the history: per-minute rates by reason every 10 s, gauges, top kinds, recent refusals, bounded", async () => {
  const t0 = Date.now() - 60_000;
  const { metrics, src, setConnections } = fakeRelay(t0);
  const history = new History(src);
  for (let i = 0; i < 6; i++) metrics.countEventResult(1, true, "");
  metrics.countEventResult(7, true, "");
  metrics.countEventResult(1, true, "duplicate: have it");
  metrics.countEventResult(4, false, "rate-limited: slow down");
  metrics.countEventResult(undefined, false, "invalid: not json");
  // An older version of a stored replaceable event: refused (OK false) with "duplicate:".
  metrics.countEventResult(0, false, "duplicate: a newer version of this replaceable event is already stored");
  metrics.received.REQ += 3;
  setConnections(4);
  await history.sample(t0 + 10_000);
  const j = history.json(t0 + 15_000);
  const fine = j.series["10s"];
  expect(fine.interval_s).toBe(10);
  // The start, the sample, the interval so far.
  expect(fine.t).toEqual([t0, t0 + 10_000, t0 + 15_000]);
  // 6 + 1 accepted in 10 s = 42 per minute.
  expect(fine.values.accepted).toEqual([0, 42, 0]);
  expect(fine.values.duplicate).toEqual([0, 6, 0]);
  expect(fine.values.reqs).toEqual([0, 18, 0]);
  expect(fine.values["refused:rate-limited"]).toEqual([0, 6, 0]);
  expect(fine.values["refused:invalid"]).toEqual([0, 6, 0]);
  // Listed among the refusals below, so counted among them (before: in the list, on no chart).
  expect(fine.values["refused:duplicate"]).toEqual([0, 6, 0]);
  expect(fine.values.connections).toEqual([2, 4, 4]);
  expect(fine.values.events_stored).toEqual([null, 5, 5]);
  expect(fine.values.database_bytes).toEqual([null, 4096, 4096]);
  expect(Object.keys(j.series["1m"].values)).toEqual(Object.keys(fine.values));
  expect(j.top_kinds).toEqual([
    { kind: 1, accepted: 6 },
    { kind: 7, accepted: 1 },
  ]);
  expect(j.recent_refusals.map((r) => [r.kind, r.reason, r.message])).toEqual([
    [4, "rate-limited", "rate-limited: slow down"],
    [null, "invalid", "invalid: not json"],
    [0, "duplicate", "duplicate: a newer version of this replaceable event is already stored"],
  ]);
  expect(j.history_bytes).toBe(HISTORY_BYTES);
  expect(HISTORY_BYTES).toBeLessThan(512 * 1024);

  // A partial interval is a rate too: 2 accepted 5 s after the sample = 24 per minute.
  metrics.countEventResult(1, true, "");
  metrics.countEventResult(1, true, "");
  expect(history.json(t0 + 15_000).series["10s"].values.accepted?.at(-1)).toBe(24);

  // Bounded: a day of samples keeps one hour at 10 s and a day at 1 min; 50 refusals at most.
  for (let i = 2; i <= 8700; i++) await history.sample(t0 + i * 10_000);
  const after = history.json(t0 + 8701 * 10_000);
  expect(after.series["10s"].t.length).toBe(361);
  expect(after.series["1m"].t.length).toBe(1441);
  for (let i = 0; i < 120; i++) metrics.countEventResult(1, false, `blocked: no ${i}`);
  const refusals = history.json().recent_refusals;
  expect(refusals.length).toBe(RECENT_REFUSALS);
  expect(refusals.at(-1)?.message).toBe("blocked: no 119");
});
