// Dependencies point one way: the protocol core and the per-NIP logic stay pure (no Bun APIs),
// only store/ touches SQL and only relay/ touches ServerWebSocket.
import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const src = join(import.meta.dir, "..", "src");
const files = (dir: string): string[] =>
  readdirSync(join(src, dir), { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts")) // unit tests beside a module use bun:test
    .map((f) => join(src, dir, f));

test.each(["protocol", "nips", "policy", "config"])("src/%s imports nothing from Bun and no SQL", (dir) => {
  const offenders = files(dir).filter((f) => {
    const text = readFileSync(f, "utf8");
    const pure = dir !== "config"; // config/load.ts reads the file with Bun.file
    return /from\s+["']bun(:[a-z]+)?["']/.test(text) || (pure && /\bBun\./.test(text)) || /bun:sqlite/.test(text);
  });
  expect(offenders).toEqual([]);
});

test("only src/relay touches ServerWebSocket; only src/store touches bun:sqlite", () => {
  const all = readdirSync(src, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts"));
  const uses = (re: RegExp) => all.filter((f) => re.test(readFileSync(join(src, f), "utf8"))).map((f) => f.split("/")[0]);
  expect(new Set(uses(/ServerWebSocket/))).toEqual(new Set(["relay"]));
  expect(new Set(uses(/bun:sqlite/))).toEqual(new Set(["store"]));
});

test("the store backends share store/ and import neither each other; store/'s shared files import neither backend", () => {
  const store = join(src, "store");
  const importsOf = (f: string): string[] =>
    [...readFileSync(f, "utf8").matchAll(/(?:from\s+|import\s*\(\s*)["'](\.[^"']+)["']/g)].map((m) => relative(store, resolve(dirname(f), m[1]!)));
  const wrong: string[] = [];
  for (const f of files("store")) {
    const at = relative(store, f);
    const backend = at.includes("/") ? at.split("/")[0] : undefined;
    for (const to of importsOf(f)) {
      const target = to.includes("/") && !to.startsWith("..") ? to.split("/")[0] : undefined;
      // A backend may import its own files, store/'s shared ones and anything outside store/.
      if (target !== undefined && target !== backend) wrong.push(`${at} -> ${to}`);
    }
  }
  expect(wrong).toEqual([]);
  // The check sees the imports it is about (not vacuous): both backends use the shared types.
  expect(importsOf(join(store, "sqlite", "store.ts"))).toContain("types.ts");
  expect(importsOf(join(store, "postgres", "store.ts"))).toContain("types.ts");
});

test("the storage decisions both writers share (store/semantics.ts) are pure: no Bun, no SQL", () => {
  const text = readFileSync(join(src, "store", "semantics.ts"), "utf8");
  expect(text).not.toMatch(/from\s+["']bun(:[a-z]+)?["']|\bBun\.|\bSELECT\b|\bINSERT\b|\bDELETE FROM\b/);
  for (const writer of ["sqlite/write.ts", "postgres/write.ts"]) expect(readFileSync(join(src, "store", writer), "utf8")).toContain('from "../semantics.ts"');
});
