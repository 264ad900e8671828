import { expect, test } from "bun:test";
import { compileFilter } from "../../protocol/filter.ts";
import { Fanout } from "./fanout.ts";

// A subscription id's groups are told apart by their filters' canonical text, made only once the
// id has a second group (fanout.ts find): sharing and parting must not depend on when it was made.
test("a group per subscription id and filter set, whichever order they join and leave in", () => {
  const fanout = new Fanout({ publish: () => 0, restricted: () => false, canRead: () => true });
  const member = () => ({
    data: { closed: false, authed: new Set<string>(), deflate: false },
    subscribe() {},
    unsubscribe() {},
    send() {},
  });
  const f = (raw: object) => [compileFilter(raw, { maxValues: 100 })];
  const [a, b, c, d] = [member(), member(), member(), member()];
  const feed = fanout.join(a, "s", f({ kinds: [1, 6], authors: ["b".repeat(64), "a".repeat(64)] }));
  // The same filters in another order (and limit, which only shapes the stored read): the same group.
  expect(fanout.join(b, "s", f({ authors: ["a".repeat(64), "b".repeat(64)], kinds: [6, 1], limit: 5 }))).toBe(feed);
  const other = fanout.join(c, "s", f({ kinds: [1] }));
  expect(other).not.toBe(feed);
  expect(fanout.join(d, "s", f({ kinds: [1] }))).toBe(other);
  expect(fanout.join(d, "t", f({ kinds: [1] }))).not.toBe(other);
  expect(fanout.groupCount).toBe(3);
  for (const [ws, g] of [
    [a, feed],
    [b, feed],
    [c, other],
  ] as const)
    fanout.leave(ws, g);
  expect(fanout.groupCount).toBe(2);
  expect(fanout.join(a, "s", f({ kinds: [1] }))).toBe(other);
  const again = fanout.join(b, "s", f({ kinds: [6, 1], authors: ["a".repeat(64), "b".repeat(64)] }));
  expect(again).not.toBe(feed); // a new group: the old one closed with its last member
  expect(fanout.join(c, "s", f({ kinds: [1, 6], authors: ["b".repeat(64), "a".repeat(64)] }))).toBe(again);
  expect(fanout.groupCount).toBe(3);
});
