// Answers to one tag value (a thread, a hashtag) kept in memory after the store gave them
// (relay/answers/tag.ts), through a real relay on its SQLite store: each answer is compared with
// the store's own answer to the same filter, read through the store after it, and the relay's
// counters say where it came from. The fanout's ring answers nothing by itself here (an event
// another process stored far ahead: test/memory-answers.ts).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { nowSeconds, type NostrEvent } from "../src/protocol/event.ts";
import type { Filter } from "../src/protocol/filter.ts";
import { accepted, Client, failOnRelayErrors, now, signer, type Signer, type TestRelay } from "./helpers.ts";
import {
  expectAnswer as expectFrom,
  once,
  duringNextRead,
  relayWithoutRingAnswers,
  settled,
  storedElsewhere,
  storeIds,
} from "./memory-answers.ts";

failOnRelayErrors();

let relay: TestRelay;
let c: Client;

beforeAll(async () => {
  ({ relay, c } = await relayWithoutRingAnswers({ authorization: { restricted_read_kinds: [4, 1059] } }));
});
afterAll(async () => {
  c?.close();
  await relay?.stop();
});

const expectAnswer = (filter: Filter, fromMemory: boolean) => expectFrom(relay, c, filter, fromMemory ? "tag" : "store");

/**
 * A filter asked three times: the store's answer twice (the second is kept: relay/answers/keep.ts
 * SecondAsk), then the same from memory.
 */
async function kept(filter: Filter): Promise<string[]> {
  const first = await expectAnswer(filter, false);
  expect(await expectAnswer(filter, false)).toEqual(first);
  expect(await expectAnswer(filter, true)).toEqual(first);
  return first;
}

const topic = () => `topic${Math.random().toString(36).slice(2)}`;
const reply = (s: Signer, root: string, created_at = now(), more: string[][] = []) =>
  s.sign({ kind: 1, content: "a reply", created_at, tags: [["e", root, "", "root"], ...more] });
const tagged = (s: Signer, tag: string, created_at: number, kind = 1) =>
  s.sign({ kind, content: `#${tag}`, created_at, tags: [["t", tag]] });

describe("kept and kept true", () => {
  test("a thread: replies that come later are in the next answer, in order", async () => {
    const [a, b] = [signer(), signer()];
    const root = a.sign({ kind: 1, content: "root", created_at: now() - 10 });
    await accepted(c, root);
    for (const e of [reply(b, root.id, now() - 5), reply(a, root.id, now() - 3)]) await accepted(c, e);
    const thread = { "#e": [root.id], limit: 200 };
    expect(await kept(thread)).toHaveLength(2);
    // Newer, older than the newest, and in the same second as one (ties by id).
    for (const e of [reply(b, root.id, now()), reply(b, root.id, now() - 4), reply(a, root.id, now() - 5)]) await accepted(c, e);
    expect(await expectAnswer(thread, true)).toHaveLength(5);
    // Another limit is another answer.
    expect(await kept({ "#e": [root.id], limit: 2 })).toHaveLength(2);
  });

  test("a full answer: a newer event pushes the oldest out, an older one stays out", async () => {
    const a = signer();
    const tag = topic();
    const t = now() - 100;
    for (let i = 0; i < 5; i++) await accepted(c, tagged(a, tag, t + i));
    const filter = { "#t": [tag], limit: 3 };
    await kept(filter);
    await accepted(c, tagged(a, tag, t + 10));
    await accepted(c, tagged(a, tag, t - 10));
    expect(await expectAnswer(filter, true)).toHaveLength(3);
    // An event with many tags, the value among them.
    const many = a.sign({
      kind: 1,
      content: "many",
      created_at: t + 11,
      tags: [...Array.from({ length: 300 }, () => ["p", signer().pubkey]), ["t", tag]],
    });
    await accepted(c, many);
    expect((await expectAnswer(filter, true))[0]).toBe(many.id);
    // The value twice in one event: once in the answer.
    const twice = a.sign({
      kind: 1,
      content: "twice",
      created_at: t + 12,
      tags: [
        ["t", tag],
        ["t", tag, "again"],
      ],
    });
    await accepted(c, twice);
    expect(await expectAnswer(filter, true)).toEqual([twice.id, many.id, expect.any(String)]);
  });

  test("a lone surrogate: the store does not tell it from U+FFFD, nor does memory", async () => {
    const a = signer();
    const t = now();
    const lone = a.sign({ kind: 1, content: "lone", created_at: t - 1, tags: [["t", "\ud800"]] });
    await accepted(c, lone);
    await kept({ "#t": ["\uFFFD"], limit: 10 });
    const fffd = a.sign({ kind: 1, content: "fffd", created_at: t, tags: [["t", "\uFFFD"]] });
    await accepted(c, fffd);
    expect(await expectAnswer({ "#t": ["\uFFFD"], limit: 10 }, true)).toEqual([fffd.id, lone.id]);
    // The same key as U+FFFD's: kept already.
    expect(await expectAnswer({ "#t": ["\ud800"], limit: 10 }, true)).toEqual([fffd.id, lone.id]);
  });
});

describe("what drops a kept answer", () => {
  test("NIP-09: a deleted event, also one deleted by the batch that stored it", async () => {
    const a = signer();
    const tag = topic();
    const [x, y] = [tagged(a, tag, now() - 2), tagged(a, tag, now() - 1)];
    for (const e of [x, y]) await accepted(c, e);
    const filter = { "#t": [tag], limit: 10 };
    await kept(filter);
    await accepted(c, a.sign({ kind: 5, tags: [["e", x.id]] }));
    expect(await kept(filter)).toEqual([y.id]);
    // Sent at once: notes with the tag and their deletions share write batches.
    const gone = Array.from({ length: 6 }, (_, i) => a.sign({ kind: 1, content: `gone ${i}`, created_at: now() - i, tags: [["t", tag]] }));
    const oks = await Promise.all(gone.flatMap((e) => [c.publish(e), c.publish(a.sign({ kind: 5, tags: [["e", e.id]] }))]));
    expect(oks.filter((ok) => ok[2] !== true)).toEqual([]);
    expect(await expectAnswer(filter, true)).toEqual([y.id]);
  });

  test("a short answer leaves an expired event out; a full one goes to the store", async () => {
    const a = signer();
    const [short, full] = [topic(), topic()];
    const t = now();
    const soon = (tag: string) =>
      a.sign({
        kind: 1,
        content: "brief",
        created_at: t,
        tags: [
          ["t", tag],
          ["expiration", String(t + 2)],
        ],
      });
    for (const e of [tagged(a, short, t - 1), soon(short), tagged(a, full, t - 2), tagged(a, full, t - 1), soon(full)])
      await accepted(c, e);
    await kept({ "#t": [short], limit: 10 });
    await kept({ "#t": [full], limit: 2 });
    while (nowSeconds() < t + 2) await Bun.sleep(100);
    expect(await expectAnswer({ "#t": [short], limit: 10 }, true)).toHaveLength(1);
    expect(await expectAnswer({ "#t": [full], limit: 2 }, false)).toHaveLength(2);
  });

  test("another process stores an event with the tag: the store's answer", async () => {
    const a = signer();
    const tag = topic();
    await accepted(c, tagged(a, tag, now() - 5));
    const filter = { "#t": [tag], limit: 10 };
    await kept(filter);
    await storedElsewhere(relay, c, tagged(a, tag, now() - 4));
    expect(await kept(filter)).toHaveLength(2);
  });

  test("a REQ read while our writer committed keeps nothing", async () => {
    const a = signer();
    const tag = topic();
    await accepted(c, tagged(a, tag, now() - 5));
    const late = tagged(a, tag, now() - 6);
    const filter = { "#t": [tag], limit: 10 };
    await settled(relay);
    await once(c, filter); // asked once (relay/answers/keep.ts SecondAsk)
    duringNextRead(relay, () => accepted(c, late));
    await settled(relay);
    expect((await once(c, filter)).events).toHaveLength(2);
    expect(await kept(filter)).toHaveLength(2);
  });
});

describe("what memory does not answer", () => {
  test("restricted kinds: kept answers are anonymous readers'; an authenticated one reads the store", async () => {
    const [a, b] = [signer(), signer()];
    const root = a.sign({ kind: 1, content: "root", created_at: now() - 10 });
    await accepted(c, root);
    await accepted(c, reply(b, root.id, now() - 5));
    const thread = { "#e": [root.id], limit: 50 };
    await kept(thread);
    // A DM in the thread: not for anonymous readers, so the kept answer does not change.
    const dm = b.sign({
      kind: 4,
      content: "secret",
      created_at: now() - 1,
      tags: [
        ["p", a.pubkey],
        ["e", root.id],
      ],
    });
    await accepted(c, dm);
    expect(await expectAnswer(thread, true)).not.toContain(dm.id);
    const authed = await Client.connect(relay.url);
    try {
      expect((await authed.auth(a, relay.url))[2]).toBe(true);
      for (let i = 0; i < 2; i++) {
        const before = { ...relay.ctx.metrics.memoryAnswers };
        const got = (await once(authed, thread)).events.map((e: NostrEvent) => e.id);
        expect(got).toEqual(await storeIds(relay, thread, [a.pubkey]));
        expect(got).toContain(dm.id);
        expect(relay.ctx.metrics.memoryAnswers).toEqual(before);
      }
    } finally {
      authed.close();
    }
  });

  test("other shapes: two values, kinds, authors, time bounds, two filters", async () => {
    const a = signer();
    const tag = topic();
    await accepted(c, tagged(a, tag, now() - 3));
    for (const filter of [
      { "#t": [tag, "other"], limit: 10 },
      { "#t": [tag], kinds: [1], limit: 10 },
      { "#t": [tag], authors: [a.pubkey], limit: 10 },
      { "#t": [tag], since: now() - 60, limit: 10 },
    ]) {
      await expectAnswer(filter, false);
      await expectAnswer(filter, false);
    }
    const before = { ...relay.ctx.metrics.memoryAnswers };
    await once(c, { "#t": [tag], limit: 10 }, { "#t": [tag], limit: 5 });
    await once(c, { "#t": [tag], limit: 10 }, { "#t": [tag], limit: 5 });
    expect(relay.ctx.metrics.memoryAnswers).toEqual(before);
  });
});
