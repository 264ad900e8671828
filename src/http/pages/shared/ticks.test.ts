// The charts' arithmetic (ticks.js, a browser module shared by the pages' scripts).
import { expect, test } from "bun:test";
// @ts-expect-error: a plain-JS browser module; its JSDoc types are checked with the pages' (pages/tsconfig.json), not here.
import { bytes, nearest, niceTicks, runs, short, timeTicks, withUnit } from "./ticks.js";

test("value ticks of a count of things are whole numbers (the status page showed '0.5' open connections)", () => {
  expect(niceTicks(1)).toEqual([0, 0.5, 1]);
  expect(niceTicks(1, 4, true)).toEqual([0, 1]);
  expect(niceTicks(3, 4, true)).toEqual([0, 1, 2, 3]);
  expect(niceTicks(7, 4, true)).toEqual([0, 2, 4, 6, 8]);
  expect(niceTicks(0, 4, true)).toEqual([0, 1]);
});

test("value ticks: 0 to at least the largest value, 1/2/5 steps, 3 to 6 of them", () => {
  expect(niceTicks(108)).toEqual([0, 50, 100, 150]);
  expect(niceTicks(100)).toEqual([0, 50, 100]);
  expect(niceTicks(7)).toEqual([0, 2, 4, 6, 8]);
  expect(niceTicks(0.3)).toEqual([0, 0.1, 0.2, 0.3]);
  expect(niceTicks(279_000)).toEqual([0, 100_000, 200_000, 300_000]);
  expect(niceTicks(1)).toEqual([0, 0.5, 1]);
  // Nothing, or only zeros: still an axis.
  expect(niceTicks(0)).toEqual([0, 1]);
  expect(niceTicks(Number.NaN)).toEqual([0, 1]);
  for (let max = 0.01; max < 1e7; max *= 1.37) {
    const ticks = niceTicks(max);
    const step = ticks[1]!;
    expect(ticks.length).toBeGreaterThanOrEqual(3);
    expect(ticks.length).toBeLessThanOrEqual(6);
    expect(ticks.at(-1)!).toBeGreaterThanOrEqual(max);
    expect(ticks.at(-2)!).toBeLessThan(max);
    const mantissa = step / 10 ** Math.floor(Math.log10(step) + 1e-9);
    expect([1, 2, 5].some((m) => Math.abs(mantissa - m) < 1e-9)).toBe(true);
  }
});

const utc = () => 0;
const at = (iso: string) => Date.parse(iso);

test("time ticks: every 10 min over the last hour, every 3 h over the last day, on round local times", () => {
  const now = at("2026-12-06T08:53:20Z");
  const hour = timeTicks(now - 3_600_000, now, 600, 70, utc);
  expect(hour.step).toBe(600_000);
  expect(hour.ticks.map((t: number) => new Date(t).toISOString().slice(11, 16))).toEqual([
    "08:00",
    "08:10",
    "08:20",
    "08:30",
    "08:40",
    "08:50",
  ]);
  const day = timeTicks(now - 86_400_000, now, 600, 70, utc);
  expect(day.step).toBe(3 * 3_600_000);
  expect(day.ticks.map((t: number) => new Date(t).toISOString().slice(11, 16))).toEqual([
    "09:00",
    "12:00",
    "15:00",
    "18:00",
    "21:00",
    "00:00",
    "03:00",
    "06:00",
  ]);
  // Wider: more labels; narrower: fewer.
  expect(timeTicks(now - 3_600_000, now, 1200, 70, utc).step).toBe(300_000);
  expect(timeTicks(now - 3_600_000, now, 250, 70, utc).step).toBe(1_200_000 * 1.5);
  // Local time: at UTC+5:30 the ticks fall on the local hour's tens, not UTC's.
  const india = timeTicks(now - 3_600_000, now, 600, 70, () => 330);
  expect(india.ticks.map((t: number) => new Date(t + 330 * 60_000).toISOString().slice(11, 16))).toEqual([
    "13:30",
    "13:40",
    "13:50",
    "14:00",
    "14:10",
    "14:20",
  ]);
});

test("runs: a line breaks at an unknown value and where samples are more than 1.5 intervals apart", () => {
  const t = [0, 10, 20, 30, 60, 70, 80, 90].map((s) => s * 1000);
  expect(runs(t, [1, 2, 3, 4, 5, 6, 7, 8], 10_000)).toEqual([
    [0, 1, 2, 3],
    [4, 5, 6, 7],
  ]);
  expect(runs(t, [1, null, 3, 4, 5, 6, null, 8], 10_000)).toEqual([[0], [2, 3], [4, 5], [7]]);
  // The last point (the interval so far) is closer than one interval: same run.
  expect(runs([0, 10_000, 13_000], [1, 1, 1], 10_000)).toEqual([[0, 1, 2]]);
  expect(runs([], [], 10_000)).toEqual([]);
});

test("nearest sample, and numbers in a few characters", () => {
  expect(nearest([0, 10, 20, 30], 14)).toBe(1);
  expect(nearest([0, 10, 20, 30], 99)).toBe(3);
  expect(nearest([], 5)).toBe(-1);
  expect([short(0), short(0.25), short(150), short(1234), short(2_500_000)]).toEqual(["0", "0.3", "150", "1.2k", "2.5M"]);
  expect([bytes(512), bytes(279_000), bytes(4_200_000)]).toEqual(["512 B", "279 kB", "4.2 MB"]);
});

test("a value with its unit: one in the singular (the status page read '1 connections')", () => {
  expect(withUnit("1", "connections")).toBe("1 connection");
  expect(withUnit("3", "connections")).toBe("3 connections");
  expect(withUnit("1", "events/min")).toBe("1 event/min");
  expect(withUnit("1", "REQs/min")).toBe("1 REQ/min");
  expect(withUnit("0.5", "events/min")).toBe("0.5 events/min");
  expect(withUnit("1.2k", "events")).toBe("1.2k events");
  expect(withUnit("1 kB", "")).toBe("1 kB");
});
