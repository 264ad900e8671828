// The write cost of an event (issue 36): ordinary events cost 1, heavy ones what they cost the writer.
import { describe, expect, test } from "bun:test";
import type { NostrEvent } from "../protocol/event.ts";
import { writeCost } from "./write-cost.ts";

const hex = (i: number) => i.toString(16).padStart(64, "0");
const ev = (kind: number, tags: string[][], content = ""): NostrEvent => ({
  id: hex(0),
  pubkey: hex(1),
  created_at: 0,
  kind,
  tags,
  content,
  sig: "0".repeat(128),
});

describe("writeCost", () => {
  test("ordinary events cost exactly 1: a note with a few tags, a reply, a short deletion, a 4 KB article", () => {
    expect(writeCost(ev(1, [], "hello"))).toBe(1);
    expect(
      writeCost(
        ev(
          1,
          [
            ["e", hex(2)],
            ["p", hex(3)],
            ["t", "nostr"],
          ],
          "a reply",
        ),
      ),
    ).toBe(1);
    expect(
      writeCost(
        ev(5, [
          ["e", hex(2)],
          ["e", hex(3)],
        ]),
      ),
    ).toBe(1);
    expect(
      writeCost(
        ev(
          30023,
          [
            ["d", "x"],
            ["title", "t"],
          ],
          "y".repeat(4000),
        ),
      ),
    ).toBe(1);
  });

  test("heavy events cost what they cost the writer: their indexed tags, deletion targets and bytes", () => {
    const tags1800 = ev(
      1,
      Array.from({ length: 1800 }, (_, k) => ["t", `topic-${k}`]),
    );
    expect(writeCost(tags1800)).toBeGreaterThan(100);
    // Deletion targets weigh more than indexed tags, an `a` target (a coordinate's versions) most.
    const e1700 = ev(
      5,
      Array.from({ length: 1700 }, (_, k) => ["e", hex(k)]),
    );
    const a1350 = ev(
      5,
      Array.from({ length: 1350 }, (_, k) => ["a", `30023:${hex(1)}:${k}`]),
    );
    expect(writeCost(e1700)).toBeGreaterThan(400);
    expect(writeCost(a1350)).toBeGreaterThan(600);
    // The same `e` tags outside a deletion are only indexed.
    expect(writeCost(ev(1, e1700.tags))).toBeLessThan(writeCost(e1700) / 3);
    // Tags that are not indexed (multi-letter names) cost only their bytes (18 KB here).
    expect(
      writeCost(
        ev(
          1,
          Array.from({ length: 1800 }, () => ["alt", "x"]),
        ),
      ),
    ).toBeLessThan(3);
    // 64 KiB of content: 8 units.
    expect(writeCost(ev(1, [], "z".repeat(64 * 1024)))).toBeCloseTo(8, 0);
  });
});
