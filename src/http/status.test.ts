import { expect, test } from "bun:test";
import { defaults } from "../config/schema.ts";
import type { Store } from "../store/types.ts";
import { statusJsonPath } from "./routes.ts";
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
  expect(row("things per minute (later)")?.value).toBe("10 (bursts of 3)");
  expect(row("later.on")?.value).toBe("on");
  expect(row("later.names")).toEqual({ label: "later.names", value: "2 entries", items: ["a", "b"] });
  expect(JSON.stringify(rows)).not.toContain("hunter2");
});

test("labels read as plain words: list sizes are counts, rate limits are sentences", () => {
  const config = defaults();
  config.authorization.restricted_read_kinds = [4, 1059, 1060];
  config.authorization.pubkey_denylist = ["a".repeat(64)];
  config.rate_limits.events_per_minute = 600;
  config.rate_limits.events_burst = 200;
  config.rate_limits.pubkey_reqs_per_minute = 0;
  const rows = policiesInForce(config);
  const value = (label: string) => rows.find((r) => r.label === label)?.value;
  // Was "3": read as kind 3.
  expect(value("Kinds readable only by author and recipients")).toBe("3 kinds: 4, 1059, 1060");
  expect(value("Pubkeys denied")).toBe("1 pubkey");
  expect(value("Kinds denied")).toBe("none");
  expect(value("EVENTs per minute from one IP")).toBe("600 (bursts of 200)");
  expect(value("New connections per minute from one IP")).toMatch(/^\d+ \(bursts of \d+\)$/);
  expect(value("REQs per minute from one authenticated pubkey")).toBe("unlimited");
  expect(value("Loopback and local-network addresses exempt from the per-IP rate limits")).toBe("on");
  // No raw key names left for the built-in sections.
  for (const r of rows) expect(r.label.replace("created_at", "the event time")).not.toMatch(/[a-z]_[a-z]|\.[a-z]/);
});

test("NIP-29 groups: one row while off; on, who may create them and their limits, in words", () => {
  const config = defaults();
  const value = (label: string) => policiesInForce(config).find((r) => r.label === label)?.value;
  expect(value("Relay-based groups (NIP-29)")).toBe("off");
  expect(value("Most groups")).toBeUndefined();
  config.groups.enabled = true;
  expect(value("Relay-based groups (NIP-29)")).toBe("on");
  expect(value("Who may create a group")).toBe("1 rule");
  expect(value("Kinds a group accepts unless it lists its own")).toBe("all");
  expect(value("Oldest group event accepted")).toBe("3600 s");
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

test("the status JSON lives under the relay path, never on it", () => {
  expect(statusJsonPath("/")).toBe("/status.json");
  expect(statusJsonPath("/nostr")).toBe("/nostr/status.json");
  expect(statusJsonPath("/nostr/")).toBe("/nostr/status.json");
});
