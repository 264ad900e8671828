// The kept tag answers alone: the bound in bytes and which answers it keeps. Their answers against
// a real store are in test/tag-answer.test.ts.
import { expect, test } from "bun:test";
import { serializeEvent, type NostrEvent } from "../../protocol/event.ts";
import { compileFilter } from "../../protocol/filter.ts";
import { TagAnswers } from "./tag.ts";

const NONE = new Set<number>();
let next = 0;
const hex = (n: number) => n.toString(16).padStart(64, "0");
const note = (tag: string, content: string, created_at: number): NostrEvent => ({
  id: hex(++next),
  pubkey: hex(1),
  created_at,
  kind: 1,
  tags: [["t", tag]],
  content,
  sig: "0".repeat(128),
});
const filter = (tag: string) => compileFilter({ "#t": [tag], limit: 50 }, { maxValues: 100 });

test("bounded in bytes: the least recently answered go first", () => {
  const answers = new TagAnswers();
  const body = "x".repeat(2000);
  for (let i = 0; i < 300; i++) {
    const tag = `t${i}`;
    answers.fill(
      filter(tag),
      50,
      Array.from({ length: 50 }, (_, k) => serializeEvent(note(tag, body, 1_700_000_000 - k))),
      NONE,
    );
    if (i === 5) expect(answers.answer(filter("t0"), 50, 0, NONE)).toHaveLength(50); // t0 used again
    expect(answers.size).toBeLessThanOrEqual(4 * 1024 * 1024);
  }
  const kept = Array.from({ length: 300 }, (_, i) => i).filter((i) => answers.answer(filter(`t${i}`), 50, 0, NONE) !== undefined);
  expect(kept.length).toBeGreaterThan(12);
  expect(kept.at(-1)).toBe(299);
  expect(kept).not.toContain(0);
  // Events fanned out into kept answers count too.
  for (let k = 0; k < 200; k++) {
    const e = note("t299", body, 1_700_000_001 + k);
    answers.stored(e, serializeEvent(e), Number.NaN, false);
    expect(answers.size).toBeLessThanOrEqual(4 * 1024 * 1024);
  }
  expect(answers.answer(filter("t299"), 50, 0, NONE)).toHaveLength(50);
});

test("an answer too big is not kept, nor one of a restricted kind", () => {
  const answers = new TagAnswers();
  const big = "y".repeat(30_000);
  answers.fill(
    filter("big"),
    50,
    Array.from({ length: 40 }, (_, k) => serializeEvent(note("big", big, 1_700_000_000 - k))),
    NONE,
  );
  expect(answers.answer(filter("big"), 50, 0, NONE)).toBeUndefined();
  const dm = { ...note("dm", "", 1_700_000_000), kind: 4 };
  answers.fill(filter("dm"), 50, [serializeEvent(dm)], new Set([4]));
  expect(answers.answer(filter("dm"), 50, 0, NONE)).toBeUndefined();
});
