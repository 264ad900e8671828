// The exact answer of a fanout run, from the reference matcher (lib/match.ts): which subscription
// must get which event, in shared memory the receiver threads count against, and the published
// events' bytes they compare with.
import { naiveMatch, naiveOf } from "../../lib/match.ts";
import type { ScenarioName, Workload } from "./workload.ts";

export interface Expected {
  /** Uint8Array(subscriptions x events): 1 = this subscription must get this event. */
  expected: Uint8Array;
  /** Int32Array(events): deliveries still to come (the receivers count it down). */
  remaining: Int32Array;
  /** Deliveries due per event (a copy of `remaining` before the run). */
  initialRemaining: Int32Array;
  /** Deliveries due over all events (load and probe). */
  expectedTotal: number;
  /** Deliveries due for the load events [0, loadEvents). */
  loadDeliveries: number;
  /** Load events no subscription should get. */
  matchingNothing: number;
}

export function expectDeliveries(scenario: ScenarioName, w: Workload, loadEvents: number): Expected {
  const ALL = w.events.length;
  const S = w.subs.length;
  const expected = new Uint8Array(new SharedArrayBuffer(S * ALL));
  const remaining = new Int32Array(new SharedArrayBuffer(4 * ALL));
  let expectedTotal = 0;
  if (scenario === "shared") {
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
  for (let i = 0; i < loadEvents; i++) {
    if (remaining[i] === 0) matchingNothing++;
    loadDeliveries += remaining[i]!;
  }
  return { expected, remaining, initialRemaining, expectedTotal, loadDeliveries, matchingNothing };
}

/** The events' wire JSON, concatenated in shared memory, with the offsets of each. */
export function sharedJson(jsons: string[]): { json: Uint8Array; offsets: Int32Array } {
  const enc = new TextEncoder();
  const jsonBytes = jsons.map((j) => enc.encode(j));
  const offsets = new Int32Array(new SharedArrayBuffer(4 * (jsons.length + 1)));
  for (let i = 0; i < jsons.length; i++) offsets[i + 1] = offsets[i]! + jsonBytes[i]!.length;
  const json = new Uint8Array(new SharedArrayBuffer(offsets[jsons.length]!));
  for (let i = 0; i < jsons.length; i++) json.set(jsonBytes[i]!, offsets[i]!);
  return { json, offsets };
}

export interface Tally {
  ok: number;
  dropped: number;
  duplicated: number;
  extra: number;
}

/**
 * The exact check: every (subscription, event) pair received exactly as often as expected, for
 * the events [0, sent) published. `fail` gets up to 3 examples of each kind with count 0, then the
 * total of each kind that occurred.
 */
export function tallyDeliveries(
  w: Workload,
  jsons: string[],
  expected: Uint8Array,
  counts: Uint8Array,
  sent: number,
  fail: (kind: string, detail: string, count: number) => void,
): Tally {
  const ALL = w.events.length;
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
      if (x && c === 0)
        dropped++ < 3 &&
          fail("dropped delivery", `sub s${sub.num} (${sub.label}) on conn ${sub.conn} never got event #${i} ${w.events[i]!.id}`, 0);
      if (c > 1) duplicated++ < 3 && fail("duplicated delivery", `sub s${sub.num} on conn ${sub.conn} got event #${i} ${c} times`, 0);
      if (!x && c > 0)
        extra++ < 3 &&
          fail(
            "extra delivery (event does not match the filters)",
            `sub s${sub.num} ${JSON.stringify(sub.filters).slice(0, 300)} got event #${i} ${jsons[i]!.slice(0, 300)}`,
            0,
          );
    }
  }
  // The per-kind examples above were added with count 0; put the real totals in.
  if (dropped) fail("dropped delivery", "", dropped);
  if (duplicated) fail("duplicated delivery", "", duplicated);
  if (extra) fail("extra delivery (event does not match the filters)", "", extra);
  return { ok, dropped, duplicated, extra };
}
