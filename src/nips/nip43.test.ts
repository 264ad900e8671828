import { describe, expect, test } from "bun:test";
import { freshRelayKey, signEvent, verifySchnorr } from "../protocol/schnorr.ts";
import { isProtected } from "./nip70.ts";
import {
  ADD,
  claimOf,
  INVITE,
  inviteTemplate,
  isFresh,
  isRelayRequest,
  JOIN,
  LEAVE,
  MEMBER_LIST,
  memberChangeTemplate,
  memberListTemplate,
  membersOf,
  REMOVE,
} from "./nip43.ts";

const A = "a".repeat(64);
const B = "b".repeat(64);

describe("NIP-43 kinds and templates", () => {
  test("the kinds of the NIP", () => {
    expect([MEMBER_LIST, ADD, REMOVE, JOIN, INVITE, LEAVE]).toEqual([13534, 8000, 8001, 28934, 28935, 28936]);
  });

  test("the member list carries - and one member tag per pubkey, in order", () => {
    const t = memberListTemplate([B, A]);
    expect(t).toEqual({ kind: 13534, content: "", tags: [["-"], ["member", B], ["member", A]] });
    expect(isProtected(t)).toBe(true);
    expect(memberListTemplate([]).tags).toEqual([["-"]]);
  });

  test("8000 and 8001 name the member in a p tag, protected", () => {
    expect(memberChangeTemplate(ADD, A)).toEqual({ kind: 8000, content: "", tags: [["-"], ["p", A]] });
    expect(memberChangeTemplate(REMOVE, B)).toEqual({ kind: 8001, content: "", tags: [["-"], ["p", B]] });
  });

  test("an invite carries its code as claim, and claimOf reads it back from the signed event", () => {
    const key = freshRelayKey();
    const e = signEvent({ ...inviteTemplate("abc123"), created_at: 1_700_000_000 }, key);
    expect(e.pubkey).toBe(key.pubkey);
    expect(e.tags).toEqual([["-"], ["claim", "abc123"]]);
    expect(verifySchnorr({ id: e.id, pubkey: e.pubkey, sig: e.sig })).toBe(true);
    expect(claimOf(e)).toBe("abc123");
  });
});

describe("claimOf", () => {
  test("the first claim, trimmed; none when missing or empty", () => {
    expect(claimOf({ tags: [["-"], ["claim", " code1 "], ["claim", "code2"]] })).toBe("code1");
    expect(claimOf({ tags: [["-"]] })).toBeUndefined();
    expect(claimOf({ tags: [["claim"]] })).toBeUndefined();
    expect(claimOf({ tags: [["claim", "   "]] })).toBeUndefined();
  });
});

describe("requests and lists", () => {
  test("only joins and leaves are the relay's to answer", () => {
    expect(isRelayRequest(28934)).toBe(true);
    expect(isRelayRequest(28936)).toBe(true);
    expect(isRelayRequest(28935)).toBe(false);
    expect(isRelayRequest(8000)).toBe(false);
  });

  test("membersOf keeps 64-hex member tags only", () => {
    expect(membersOf({ tags: [["-"], ["member", A], ["member", "nothex"], ["p", B], ["member", B]] })).toEqual([A, B]);
  });

  test("isFresh: within the window either side of now", () => {
    expect(isFresh(1000, 1000, 600)).toBe(true);
    expect(isFresh(400, 1000, 600)).toBe(true);
    expect(isFresh(1600, 1000, 600)).toBe(true);
    expect(isFresh(399, 1000, 600)).toBe(false);
    expect(isFresh(1601, 1000, 600)).toBe(false);
  });
});
