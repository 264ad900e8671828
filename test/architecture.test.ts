// Dependencies point one way: the protocol core and the per-NIP logic stay pure (no Bun APIs),
// only store/ touches SQL and only relay/ touches ServerWebSocket.
import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

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
