import { expect, test } from "bun:test";
import { defaults } from "../config/schema.ts";
import type { Store } from "../store/types.ts";
import { eventsStored, formatUptime, policiesInForce } from "./status.ts";

test("uptime reads as days, hours, minutes, seconds", () => {
  expect(formatUptime(0)).toBe("0s");
  expect(formatUptime(61_000)).toBe("1m 1s");
  expect(formatUptime((86400 + 5) * 1000)).toBe("1d 0h 0m 5s");
});

test("sections added later show, paired rates read as one row, secrets never", () => {
  const config = defaults() as any;
  config.later = { things_per_minute: 10, things_burst: 3, api_token: "hunter2", on: true, names: ["a", "b"] };
  const rows = policiesInForce(config);
  const row = (label: string) => rows.find((r) => r.label === label);
  expect(row("later: things")?.value).toBe("10 per minute, bursts up to 3");
  expect(row("later.on")?.value).toBe("on");
  expect(row("later.names")).toEqual({ label: "later.names", value: "2", items: ["a", "b"] });
  expect(JSON.stringify(rows)).not.toContain("hunter2");
});

test("the stored-events count is asked once per ~10 s, and not cached when it fails", async () => {
  let asked = 0;
  let fail = true;
  const store = {
    lastSeq: () => 7,
    count: async (job: any) => {
      asked++;
      expect(job).toEqual({ filters: [{}], maxSeq: 7, now: 0 });
      if (fail) throw new Error("closing");
      return { count: 42 };
    },
  } as unknown as Store;
  expect(await eventsStored(store)).toBeUndefined();
  fail = false;
  expect(await eventsStored(store)).toBe(42);
  expect(await eventsStored(store)).toBe(42);
  expect(asked).toBe(2);
});
