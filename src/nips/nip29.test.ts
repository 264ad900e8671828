import { describe, expect, test } from "bun:test";
import type { NostrEvent } from "../protocol/event.ts";
import {
  applyEdit,
  emptyMetadata,
  groupOf,
  hTags,
  isGroupId,
  parseAction,
  previousRefs,
  renderTags,
  type GroupSnapshot,
  type MetadataEdit,
} from "./nip29.ts";

const A = "a".repeat(64);
const B = "b".repeat(64);
const RELAY = "f".repeat(64);
const ev = (kind: number, tags: string[][], pubkey = A): NostrEvent => ({
  id: "1".repeat(64),
  pubkey,
  created_at: 1,
  kind,
  tags,
  content: "",
  sig: "0".repeat(128),
});
const edit = (tags: string[][]): MetadataEdit => {
  const a = parseAction(ev(9002, [["h", "g"], ...tags]));
  if (typeof a === "string" || a.kind !== 9002) throw new Error(String(a));
  return a.edit;
};

describe("NIP-29 pure parts", () => {
  test("group ids, h tags, previous refs, groupOf", () => {
    expect(isGroupId("abc_DEF-09")).toBe(true);
    for (const bad of ["", "a b", "é", "x".repeat(65), "a/b"]) expect(isGroupId(bad)).toBe(false);
    expect(hTags(ev(9, [["h", "x"], ["h", "y"], ["h"]]))).toEqual(["x", "y"]);
    expect(
      previousRefs(
        ev(9, [
          ["previous", "a1b2c3d4", "00000000"],
          ["previous", "12345678"],
        ]),
      ),
    ).toEqual(["a1b2c3d4", "00000000", "12345678"]);
    expect(groupOf(ev(9, [["h", "x"]]), RELAY)).toEqual({ id: "x", metadata: false });
    expect(groupOf(ev(39000, [["d", "x"]], RELAY), RELAY)).toEqual({ id: "x", metadata: true });
    expect(groupOf(ev(39000, [["d", "x"]]), RELAY)).toBeUndefined(); // someone else's 39000 is no group's metadata
    expect(groupOf(ev(1, []), RELAY)).toBeUndefined();
  });

  test("each malformed moderation event says why", () => {
    const why = (kind: number, tags: string[][]) => parseAction(ev(kind, [["h", "g"], ...tags]));
    expect(why(9000, [])).toBe("9000 needs a p tag with a 64-hex pubkey");
    expect(why(9000, [["p", "xyz"]])).toBe("9000 needs a p tag with a 64-hex pubkey");
    expect(why(9000, [["p", B, "boss"]])).toBe('unknown role "boss" (roles: admin, moderator)');
    expect(
      why(
        9000,
        Array.from({ length: 101 }, () => ["p", B]),
      ),
    ).toBe("too many p tags (max 100)");
    expect(why(9001, [["p", "B"]])).toBe("9001 needs a p tag with a 64-hex pubkey");
    expect(why(9005, [])).toBe("9005 needs 1-100 e tags of 64-hex ids");
    expect(why(9005, [["e", "12"]])).toBe("9005 needs 1-100 e tags of 64-hex ids");
    expect(why(9009, [])).toBe("9009 needs a code tag (1-128 characters)");
    expect(why(9009, [["code", ""]])).toBe("9009 needs a code tag (1-128 characters)");
    expect(why(9010, [["a", "nope"]])).toBe("9010 pins must be e tags of 64-hex ids or a tags of kind:pubkey:d");
    expect(
      why(9002, [
        ["parent", "p"],
        ["parent", "q"],
      ]),
    ).toBe("a group has at most one parent tag");
    expect(why(9002, [["parent", "p q"]])).toBe("parent: group id must be 1-64 characters of a-z, A-Z, 0-9, - and _");
    expect(why(9002, [["child", ""]])).toBe("child: group id must be 1-64 characters of a-z, A-Z, 0-9, - and _");
    expect(why(9002, [["supported_kinds", "9", "x"]])).toBe("supported_kinds values must be kind numbers");
    expect(why(9003, [])).toBe("kind 9003 is not a group action this relay knows");
  });

  test("well-formed actions; one role kept, the strongest", () => {
    const p = (kind: number, tags: string[][]) => parseAction(ev(kind, [["h", "g"], ...tags]));
    expect(p(9000, [["p", B, "moderator", "admin"]])).toEqual({ kind: 9000, targets: [{ pubkey: B, roles: ["admin"] }] });
    expect(p(9000, [["p", B, ""]])).toEqual({ kind: 9000, targets: [{ pubkey: B, roles: [] }] });
    expect(
      p(9001, [
        ["p", B],
        ["e", A],
      ]),
    ).toEqual({ kind: 9001, targets: [B], afterLeave: A });
    const answer = ev(9000, [
      ["h", "g"],
      ["p", B],
      ["e", A],
    ]);
    expect(parseAction(answer)).toEqual({ kind: 9000, targets: [{ pubkey: B, roles: [] }], afterJoin: A });
    expect(p(9005, [["e", B]])).toEqual({ kind: 9005, ids: [B] });
    expect(p(9009, [["code", "x1"]])).toEqual({ kind: 9009, code: "x1" });
    expect(
      p(9010, [
        ["e", B],
        ["a", `30023:${A}:post`],
      ]),
    ).toEqual({
      kind: 9010,
      pins: [
        ["e", B],
        ["a", `30023:${A}:post`],
      ],
    });
    expect(p(9010, [])).toEqual({ kind: 9010, pins: [] });
    expect(p(9021, [["code", "x1"]])).toEqual({ kind: 9021, code: "x1" });
    expect(p(9021, [])).toEqual({ kind: 9021 });
    for (const k of [9007, 9008, 9022]) expect(p(k, [])).toEqual({ kind: k } as never);
  });

  test("9002: fields replace, a full flag set replaces, a partial edit keeps the flags, off spellings turn off", () => {
    const m = applyEdit(emptyMetadata(), edit([["name", "N"], ["about", "A"], ["private"], ["closed"], ["supported_kinds", "9", "11"]]));
    expect(m).toMatchObject({ name: "N", about: "A", private: true, closed: true, restricted: false, supportedKinds: [9, 11] });
    const partial = applyEdit(m, edit([["name", "M"]])); // NDK's setMetadata
    expect(partial).toMatchObject({ name: "M", about: "A", private: true, closed: true, supportedKinds: [9, 11] });
    const full = applyEdit(m, edit([["restricted"]])); // nostr-tools: absent flags turn off
    expect(full).toMatchObject({ name: "N", private: false, closed: false, restricted: true });
    expect(full.supportedKinds).toBeUndefined();
    const ndk = applyEdit(
      m,
      edit([
        ["public", ""],
        ["open", ""],
      ]),
    );
    expect(ndk).toMatchObject({ private: false, closed: false, supportedKinds: [9, 11] });
    expect(applyEdit(m, edit([["private", ""]]))).toMatchObject({ private: true, closed: false }); // read by name
    expect(applyEdit(m, edit([["supported_kinds"]])).supportedKinds).toEqual([]); // no kinds at all
  });

  test("renderTags: d first, one role per admin, role holders then the newest members, pins in order", () => {
    const g: GroupSnapshot = {
      id: "g",
      meta: { ...emptyMetadata(), name: "N", private: true, supportedKinds: [9] },
      members: new Map([
        ["m1", []],
        ["mod", ["moderator"]],
        ["m2", []],
        ["adm", ["admin"]],
        ["m3", []],
      ]),
      pins: [
        ["e", B],
        ["a", `1:${A}:x`],
      ],
    };
    expect(renderTags(39000, g)).toEqual([["d", "g"], ["name", "N"], ["private"], ["supported_kinds", "9"]]);
    expect(renderTags(39001, g)).toEqual([
      ["d", "g"],
      ["p", "adm", "admin"],
      ["p", "mod", "moderator"],
    ]);
    expect(renderTags(39002, g)).toEqual([
      ["d", "g"],
      ["p", "adm"],
      ["p", "mod"],
      ["p", "m3"],
      ["p", "m2"],
      ["p", "m1"],
    ]);
    expect(renderTags(39002, g, 3)).toEqual([
      ["d", "g"],
      ["p", "adm"],
      ["p", "mod"],
      ["p", "m3"],
    ]);
    expect(renderTags(39003, g).map((t) => t.slice(0, 2))).toEqual([
      ["d", "g"],
      ["role", "admin"],
      ["role", "moderator"],
    ]);
    expect(renderTags(39005, g)).toEqual([
      ["d", "g"],
      ["e", B],
      ["a", `1:${A}:x`],
    ]);
  });

  test("subgroups: parent and children replace when present; a full flag set detaches, a partial edit keeps", () => {
    const m = applyEdit(emptyMetadata(), edit([["parent", "tech"], ["child", "a", "1"], ["child", "b"], ["closed-children"]]));
    expect(m).toMatchObject({ parent: { id: "tech", by: A }, children: [["a", "1"], ["b"]], closedChildren: true });
    expect(renderTags(39000, { id: "g", meta: m, members: new Map(), pins: [] })).toEqual([
      ["d", "g"],
      ["parent", "tech", A],
      ["child", "a", "1"],
      ["child", "b"],
      ["closed-children"],
    ]);
    expect(applyEdit(m, edit([["name", "x"]]))).toMatchObject({ parent: { id: "tech" }, children: [["a", "1"], ["b"]] });
    const detached = applyEdit(m, edit([["private"]]));
    expect(detached.parent).toBeUndefined();
    expect(detached.children).toBeUndefined();
    expect(detached.closedChildren).toBe(false);
    expect(applyEdit(m, edit([["parent", ""]])).parent).toBeUndefined(); // promoted to a root
    expect(applyEdit(m, edit([["parent"]])).children).toEqual([["a", "1"], ["b"]]);
  });
});
