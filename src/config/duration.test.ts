import { expect, test } from "bun:test";
import { DURATION_60S, durationSeconds } from "./duration.ts";

test("durations in nostr-rs-relay's words", () => {
  expect(durationSeconds("1 week")).toBe(604_800);
  expect(durationSeconds("24 hours")).toBe(86_400);
  expect(durationSeconds("90s")).toBe(90);
  expect(durationSeconds("2 days")).toBe(172_800);
  expect(durationSeconds("5 mins")).toBe(300);
  expect(durationSeconds("1 minute")).toBe(60);
  expect(durationSeconds(" 3 w ")).toBe(1_814_400);
  for (const bad of ["", "week", "1 fortnight", "1.5 hours", "-1 s", "1 week 2 days"])
    expect(() => durationSeconds(bad)).toThrow("not a duration");
});

test("the schema's pattern takes 60 s and more only", () => {
  for (const ok of ["60s", "60 seconds", "1 minute", "1 week", "24 hours", "100 secs", "0060 s"]) expect(DURATION_60S.test(ok)).toBe(true);
  for (const no of ["59s", "0 minutes", "0 w", "5 s", "1 fortnight", "1.5 hours", ""]) expect(DURATION_60S.test(no)).toBe(false);
});
