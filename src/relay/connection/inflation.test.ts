import { expect, test } from "bun:test";
import { INFLATE_BURST_SECONDS, InflationBudget, NO_DEFLATE_MS } from "./inflation.ts";

test("an address over its inflation budget loses compression for a while; others keep theirs", () => {
  const b = new InflationBudget();
  const rate = 1000;
  // The burst: 8 s worth at once.
  expect(b.charge("a", rate * INFLATE_BURST_SECONDS, rate, 0)).toBe(true);
  expect(b.mayDeflate("a", 0)).toBe(true);
  // A second later one second's worth has come back, no more.
  expect(b.charge("a", rate, rate, 1000)).toBe(true);
  expect(b.charge("a", 1, rate, 1000)).toBe(false);
  expect(b.mayDeflate("a", 1000)).toBe(false);
  // Over already: every further message is refused, and so is compression, until it expires.
  expect(b.charge("a", 1, rate, 5000)).toBe(false);
  expect(b.mayDeflate("b", 1000)).toBe(true);
  expect(b.charge("b", rate, rate, 1000)).toBe(true);
  expect(b.mayDeflate("a", 1000 + NO_DEFLATE_MS)).toBe(true);
  expect(b.charge("a", rate, rate, 1000 + NO_DEFLATE_MS)).toBe(true);
  // 0 = no limit.
  expect(b.charge("c", 1e12, 0, 0)).toBe(true);
});
