// The storage decisions both writers call (store/semantics.ts), on hand-made facts; that the
// two writers agree end to end is test/postgres/write-parity.pgtest.ts.
import { describe, expect, test } from "bun:test";
import type { Address } from "../nips/nip09.ts";
import type { NostrEvent } from "../protocol/event.ts";
import {
  addressOf,
  deletionOf,
  GIFT_WRAP,
  giftWrapRecipients,
  newestFirst,
  replacement,
  tombstoneRefusal,
  type Tombstones,
} from "./semantics.ts";
import { refusalText, type Refusal } from "../protocol/reasons.ts";

const text = (r: Refusal | undefined) => (r === undefined ? undefined : refusalText(r));

const A = "a".repeat(64);
const B = "b".repeat(64);
const C = "c".repeat(64);
const ID = "1".repeat(64);
const ev = (over: Partial<NostrEvent>): NostrEvent => ({
  id: ID,
  pubkey: A,
  created_at: 100,
  kind: 1,
  tags: [],
  content: "",
  sig: "0".repeat(128),
  ...over,
});

/** Tombstones from plain data; every lookup is recorded. */
function stones(t: { vanished?: Record<string, number>; deletedBy?: string[]; address?: number }): Tombstones & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    vanishedUntil: (p) => (asked.push(`vanished ${p}`), t.vanished?.[p]),
    deleted: (id, p) => (asked.push(`deleted ${id === ID ? "" : `${id} `}${p}`), t.deletedBy?.includes(p) ?? false),
    addressDeletedUntil: (a: Address) => (asked.push(`address ${a.kind}:${a.pubkey}:${a.d}`), t.address),
  };
}

test("newestFirst: newest first, then the lowest id", () => {
  const xs = [
    { created_at: 1, id: "b" },
    { created_at: 2, id: "b" },
    { created_at: 2, id: "a" },
    { created_at: 3, id: "c" },
  ];
  expect(xs.sort(newestFirst)).toEqual([
    { created_at: 3, id: "c" },
    { created_at: 2, id: "a" },
    { created_at: 2, id: "b" },
    { created_at: 1, id: "b" },
  ]);
});

describe("replacement", () => {
  const e = { created_at: 10, id: "m" };
  test("no stored version: it replaces (nothing)", () => expect(replacement(e, [])).toBe("replaces"));
  test("the same event stored: a duplicate", () => expect(replacement(e, [{ created_at: 10, id: "m" }])).toBe("duplicate"));
  test("an older stored version, or a tie with a higher id: it replaces", () => {
    expect(replacement(e, [{ created_at: 9, id: "a" }])).toBe("replaces");
    expect(replacement(e, [{ created_at: 10, id: "z" }])).toBe("replaces");
  });
  test("a newer stored version, or a tie with a lower id: outdated", () => {
    expect(replacement(e, [{ created_at: 11, id: "z" }])).toBe("outdated");
    expect(replacement(e, [{ created_at: 10, id: "a" }])).toBe("outdated");
    expect(
      replacement(e, [
        { created_at: 1, id: "a" },
        { created_at: 11, id: "z" },
      ]),
    ).toBe("outdated");
  });
});

test("addressOf: addressable kinds by d, replaceable ones with an empty d, others none", () => {
  expect(addressOf(ev({ kind: 30023, tags: [["d", "x"]] }))).toEqual({ kind: 30023, pubkey: A, d: "x" });
  expect(addressOf(ev({ kind: 30023 }))).toEqual({ kind: 30023, pubkey: A, d: "" });
  expect(addressOf(ev({ kind: 10002, tags: [["d", "x"]] }))).toEqual({ kind: 10002, pubkey: A, d: "" });
  expect(addressOf(ev({ kind: 1 }))).toBeNull();
});

test("giftWrapRecipients: the p tags of a gift wrap that hold a pubkey", () => {
  const wrap = ev({
    kind: GIFT_WRAP,
    tags: [
      ["p", B],
      ["p", "nope"],
      ["e", C],
      ["p", C, "wss://r"],
    ],
  });
  expect(giftWrapRecipients(wrap)).toEqual([B, C]);
  expect(giftWrapRecipients(ev({ kind: 1, tags: [["p", B]] }))).toEqual([]);
});

describe("tombstoneRefusal", () => {
  test("nothing recorded: no refusal, having asked only about the author (and the address)", () => {
    const t = stones({});
    expect(tombstoneRefusal(ev({}), t)).toBeUndefined();
    expect(t.asked).toEqual([`vanished ${A}`, `deleted ${A}`]);
    const r = stones({});
    expect(tombstoneRefusal(ev({ kind: 30000, tags: [["d", "q"]] }), r)).toBeUndefined();
    expect(r.asked).toEqual([`vanished ${A}`, `deleted ${A}`, `address 30000:${A}:q`]);
  });
  test("the author vanished at or after it: blocked; before it: not", () => {
    expect(text(tombstoneRefusal(ev({}), stones({ vanished: { [A]: 100 } })))).toBe("blocked: this pubkey asked to vanish from this relay");
    expect(tombstoneRefusal(ev({}), stones({ vanished: { [A]: 99 } }))).toBeUndefined();
  });
  test("a gift wrap's recipient vanished at or after it: blocked", () => {
    const wrap = ev({ kind: GIFT_WRAP, tags: [["p", B]] });
    expect(text(tombstoneRefusal(wrap, stones({ vanished: { [B]: 100 } })))).toBe("blocked: the recipient asked to vanish from this relay");
    expect(tombstoneRefusal(wrap, stones({ vanished: { [B]: 99 } }))).toBeUndefined();
    // A p tag of another kind is no recipient.
    expect(tombstoneRefusal(ev({ tags: [["p", B]] }), stones({ vanished: { [B]: 100 } }))).toBeUndefined();
  });
  test("deleted by its author; a gift wrap also by its recipient, the author's reason first", () => {
    expect(text(tombstoneRefusal(ev({}), stones({ deletedBy: [A] })))).toBe("blocked: this event was deleted by its author");
    expect(tombstoneRefusal(ev({}), stones({ deletedBy: [B] }))).toBeUndefined();
    const wrap = ev({ kind: GIFT_WRAP, tags: [["p", B]] });
    expect(text(tombstoneRefusal(wrap, stones({ deletedBy: [B] })))).toBe("blocked: this gift wrap was deleted by its recipient");
    expect(text(tombstoneRefusal(wrap, stones({ deletedBy: [A, B] })))).toBe("blocked: this event was deleted by its author");
  });
  test("vanishing comes before deletion", () => {
    expect(text(tombstoneRefusal(ev({}), stones({ vanished: { [A]: 100 }, deletedBy: [A] })))).toBe(
      "blocked: this pubkey asked to vanish from this relay",
    );
  });
  test("its address deleted at or after it: blocked; before it: not", () => {
    const e = ev({ kind: 30023, tags: [["d", "x"]] });
    expect(text(tombstoneRefusal(e, stones({ address: 100 })))).toBe("blocked: this address was deleted by its author");
    expect(tombstoneRefusal(e, stones({ address: 99 }))).toBeUndefined();
  });
  test("deletions and requests to vanish cannot be deleted, but their authors can vanish", () => {
    for (const kind of [5, 62]) {
      const t = stones({ deletedBy: [A] });
      expect(tombstoneRefusal(ev({ kind }), t)).toBeUndefined();
      expect(t.asked).toEqual([`vanished ${A}`]);
      expect(text(tombstoneRefusal(ev({ kind }), stones({ vanished: { [A]: 100 } })))).toBe(
        "blocked: this pubkey asked to vanish from this relay",
      );
    }
  });
});

describe("deletionOf", () => {
  const req = ev({ kind: 5, pubkey: A });
  test("an id not stored: only the tombstone", () => expect(deletionOf(req, null)).toEqual({ remove: false, tombstone: true }));
  test("the requester's own event: removed and tombstoned", () =>
    expect(deletionOf(req, { kind: 1, pubkey: A, tagsRequester: false, inGroup: false })).toEqual({ remove: true, tombstone: true }));
  test("another's event: kept, the id tombstoned for the requester only", () =>
    expect(deletionOf(req, { kind: 1, pubkey: B, tagsRequester: true, inGroup: false })).toEqual({ remove: false, tombstone: true }));
  test("a gift wrap addressed to the requester: removed; to someone else: kept", () => {
    expect(deletionOf(req, { kind: GIFT_WRAP, pubkey: B, tagsRequester: true, inGroup: false })).toEqual({ remove: true, tombstone: true });
    expect(deletionOf(req, { kind: GIFT_WRAP, pubkey: B, tagsRequester: false, inGroup: false })).toEqual({
      remove: false,
      tombstone: true,
    });
  });
  test("a deletion or request to vanish, even the requester's own: left alone", () => {
    for (const kind of [5, 62])
      expect(deletionOf(req, { kind, pubkey: A, tagsRequester: false, inGroup: false })).toEqual({ remove: false, tombstone: false });
  });
  test("a group's moderation record (9000-9022 with an h tag), the requester's own: left alone; without h, or a post: removed", () => {
    for (const kind of [9000, 9001, 9002, 9007, 9021, 9022])
      expect(deletionOf(req, { kind, pubkey: A, tagsRequester: false, inGroup: true })).toEqual({ remove: false, tombstone: false });
    expect(deletionOf(req, { kind: 9007, pubkey: A, tagsRequester: false, inGroup: false })).toEqual({ remove: true, tombstone: true });
    expect(deletionOf(req, { kind: 9, pubkey: A, tagsRequester: false, inGroup: true })).toEqual({ remove: true, tombstone: true });
  });
});
