import { describe, expect, test } from "bun:test";
import { parse } from "smol-toml";
import { ConfigEditError, editAdmins, listAdmins } from "./edit-admins.ts";
import { renderDefaultConfig } from "./render.ts";

const A = "a".repeat(64);
const B = "b".repeat(64);
const C = "c".repeat(64);

describe("editAdmins: [admin] pubkeys edited in the file's text, the rest kept", () => {
  test("a fresh `config init` file: the key goes under the commented default, nothing else changes", () => {
    const text = renderDefaultConfig();
    const { text: next, before, after } = editAdmins(text, "add", A);
    expect([before, after]).toEqual([[], [A]]);
    expect(next.replace(`#pubkeys = []\npubkeys = ["${A}"]`, "#pubkeys = []")).toBe(text);
    expect(listAdmins(next)).toEqual([A]);
  });

  test("one-line, multi-line (comments kept) and empty lists; a file without [admin]; adding twice changes nothing", () => {
    expect(editAdmins(`[admin]\npubkeys = [] # none yet\n`, "add", A).text).toBe(`[admin]\npubkeys = ["${A}"] # none yet\n`);
    expect(editAdmins(`[admin]\npubkeys = ["${B}"]\n`, "add", A).text).toBe(`[admin]\npubkeys = ["${B}", "${A}"]\n`);
    const multi = `[admin]\npubkeys = [\n  "${B}", # bob\n  "${C}" # carol\n]\n[limits]\n`;
    expect(editAdmins(multi, "add", A).text).toBe(`[admin]\npubkeys = [\n  "${B}", # bob\n  "${C}", # carol\n  "${A}",\n]\n[limits]\n`);
    expect(editAdmins(multi, "remove", B).text).toBe(`[admin]\npubkeys = [\n  "${C}" # carol\n]\n[limits]\n`);
    expect(editAdmins(`# mine\n[info]\nname = "x"\n`, "add", A).text).toBe(`# mine\n[info]\nname = "x"\n\n[admin]\npubkeys = ["${A}"]\n`);
    expect(editAdmins(`[admin]\nban_deletes_events = false\n`, "add", A).text).toBe(
      `[admin]\npubkeys = ["${A}"]\nban_deletes_events = false\n`,
    );
    expect(editAdmins(`[admin]\npubkeys = ["${A}"]\n`, "add", A).text).toBe(`[admin]\npubkeys = ["${A}"]\n`);
    expect(editAdmins(`[admin]\npubkeys = ["${B}", "${A}"]\n`, "remove", B).text).toBe(`[admin]\npubkeys = ["${A}"]\n`);
    expect(editAdmins(`[admin]\npubkeys = ["${A}"]\n`, "remove", A).text).toBe(`[admin]\npubkeys = []\n`);
    // A "]" in a comment or string does not end the list early.
    const tricky = `[admin]\npubkeys = [ # the ] team\n  "${B}",\n]\n[info]\nname = "a ] b"\n`;
    expect(parse(editAdmins(tricky, "add", A).text)).toEqual({ admin: { pubkeys: [B, A] }, info: { name: "a ] b" } });
  });

  test("refused, the reason said, when the list is not one it can edit safely", () => {
    const refused = (text: string) => {
      try {
        editAdmins(text, "add", A);
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigEditError);
        return (err as Error).message;
      }
      throw new Error("not refused");
    };
    expect(refused(`admin.pubkeys = ["${B}"]\n`)).toContain("without an [admin] table");
    expect(refused(`admin = { pubkeys = ["${B}"] }\n`)).toContain("without an [admin] table");
    expect(refused(`[admin]\npubkeys = "${B}"\n`)).toContain("not a list of strings");
    expect(refused(`[admin\npubkeys = []\n`)).toContain("is not valid TOML");
  });
});
