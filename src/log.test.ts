import { describe, expect, test } from "bun:test";
import { LogLimiter } from "./log.ts";

describe("LogLimiter", () => {
  test("one line per kind per interval; the held-back ones are counted and handed to the next line", () => {
    const l = new LogLimiter(60_000);
    expect(l.take("a", 1, 0)).toEqual({ count: 0, weight: 0 });
    for (let t = 1; t <= 100; t++) expect(l.take("a", 3, t)).toBeUndefined();
    // Another kind has its own interval.
    expect(l.take("b", 1, 50)).toEqual({ count: 0, weight: 0 });
    expect(l.take("a", 1, 60_000)).toEqual({ count: 100, weight: 300 });
    expect(l.take("a", 1, 60_001)).toBeUndefined();
  });

  test("takeHeld tells what each kind holds back, once", () => {
    const l = new LogLimiter(60_000);
    l.take("a", 1, 0);
    l.take("a", 5, 1);
    l.take("b", 1, 0);
    expect(l.takeHeld()).toEqual([["a", { count: 1, weight: 5 }]]);
    expect(l.takeHeld()).toEqual([]);
    expect(l.take("a", 1, 60_000)).toEqual({ count: 0, weight: 0 });
  });
});
