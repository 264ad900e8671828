// Every ```toml block of README.md and docs/*.md, and every indented code block opening with a
// [section] line, loads as `bunstr config check` would load it (issue 34: the docs must work when
// followed literally). A block may be a fragment (only the keys it is about: the rest are
// defaults) and may hold placeholders the reader fills in, `"<your hex pubkey>"`: those stand for
// a 64-hex value here. A key shown commented out (`# rune_path = "…"`, for the reader to switch
// on) must load too, in its section, on its own.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { ConfigError, loadConfigText } from "../src/config/load.ts";
import { configErrors } from "../src/config/warnings.ts";

const root = resolve(import.meta.dir, "..");
const docs = [
  "README.md",
  ...readdirSync(join(root, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => `docs/${f}`),
];
/** A placeholder's stand-in: a valid pubkey, which also passes where any string does. */
const HEX = "3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d";

interface Block {
  where: string;
  text: string;
}

/**
 * The ```toml blocks of `file` (indented ones in lists too), and its indented code blocks that
 * open with a `[section]` line (Markdown's other code block), each with its file:line.
 */
function tomlBlocks(file: string): Block[] {
  const text = readFileSync(join(root, file), "utf8");
  const lineOf = (index: number) => text.slice(0, index).split("\n").length;
  const fenced = [...text.matchAll(/^( *)```toml\n([\s\S]*?)^ *```$/gm)].map((m) => ({
    where: `${file}:${lineOf(m.index) + 1}`,
    text: m[2]!
      .split("\n")
      .map((l) => l.slice(m[1]!.length))
      .join("\n"),
  }));
  const indented = [...text.matchAll(/\n\n((?: {4}\[[a-z_]+\]\n)(?: {4}.*\n)*)/g)].map((m) => ({
    where: `${file}:${lineOf(m.index) + 2}`,
    text: m[1]!.replace(/^ {4}/gm, ""),
  }));
  return [...fenced, ...indented];
}

const fill = (text: string) => text.replace(/"<[^">]*>"/g, `"${HEX}"`);

/** Loads like `config check`: the file's own problems, then the ones between keys. */
function check(text: string, where: string): string[] {
  try {
    const { config, ignored } = loadConfigText(text, where);
    return [...ignored.map((k) => `${where}: ${k} is not used by bunstr`), ...configErrors(config)];
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
}

/** `# key = value` lines under a `[section]` header, each as a one-key file of its own. */
function commentedKeys(text: string): { line: string; toml: string }[] {
  let section = "";
  const out: { line: string; toml: string }[] = [];
  for (const line of text.split("\n")) {
    const header = /^\[([a-z_0-9.]+)\]/.exec(line);
    if (header) section = header[1]!;
    const key = /^#\s*([a-z_0-9]+\s*=.*)$/.exec(line);
    if (key && section) out.push({ line, toml: `[${section}]\n${key[1]}\n` });
  }
  return out;
}

const all = docs.flatMap(tomlBlocks);

describe("the docs' TOML blocks pass the config validator", () => {
  test("there are blocks to check (the extraction still finds them)", () => {
    expect(all.length).toBeGreaterThanOrEqual(10);
    expect(all.some((b) => b.where.startsWith("README.md:"))).toBe(true);
    expect(all.some((b) => b.where.startsWith("docs/operations.md:"))).toBe(true);
    expect(all.some((b) => b.text.startsWith("[mirror]\n"))).toBe(true); // an indented one
  });

  for (const block of all)
    test(block.where, () => {
      expect(check(fill(block.text), block.where)).toEqual([]);
      for (const c of commentedKeys(fill(block.text)))
        expect({ line: c.line, problems: check(c.toml, block.where) }).toEqual({ line: c.line, problems: [] });
    });

  test("a misspelt key in a block would be caught", () => {
    expect(check('[admin]\nban_retension = "30 days"\n', "probe")).toEqual([
      'probe:2: [admin] unknown key "ban_retension"; did you mean "ban_retention"?',
      "probe: unknown keys are refused; correct them, or pass --lenient to ignore them",
    ]);
    expect(commentedKeys('[pay_to_relay]\n# rune_pth = "/x"\n').map((c) => check(c.toml, "probe")[0])).toEqual([
      'probe:2: [pay_to_relay] unknown key "rune_pth"; did you mean "rune_path"?',
    ]);
  });
});
