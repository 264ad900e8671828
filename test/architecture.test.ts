// Dependencies point one way (docs/architecture.md): the protocol core and the per-NIP logic stay
// pure (no Bun APIs), only store/ touches SQL and only relay/ touches ServerWebSocket; every
// import of src/ (its unit tests' too) points down the folder order, and no files import each
// other in a circle.
import { expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const src = join(import.meta.dir, "..", "src");
const files = (dir: string): string[] =>
  readdirSync(join(src, dir), { recursive: true, encoding: "utf8" })
    .filter((f) => /\.(ts|js)$/.test(f) && !f.endsWith(".test.ts")) // the pages' browser scripts too; unit tests beside a module use bun:test
    .map((f) => join(src, dir, f));

test.each(["protocol", "nips", "policy", "config"])("src/%s imports nothing from Bun and no SQL", (dir) => {
  const offenders = files(dir).filter((f) => {
    const text = readFileSync(f, "utf8");
    const pure = dir !== "config"; // config/load.ts reads the file with Bun.file
    return /from\s+["']bun(:[a-z]+)?["']/.test(text) || (pure && /\bBun\./.test(text)) || /bun:sqlite/.test(text);
  });
  expect(offenders).toEqual([]);
});

/**
 * SQL a file runs: a string that starts with a statement, or a database client (bun:sqlite,
 * Bun's SQL for Postgres). Messages that name a statement in passing ("held by VACUUM") are not.
 */
const RUNS_SQL =
  /["'`]\s*(?:SELECT|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|PRAGMA|VACUUM|CREATE\s+(?:TABLE|INDEX|UNIQUE)|DROP|ALTER\s+TABLE|BEGIN|WITH\s+\w+\s+AS)\b|bun:sqlite|import\s+(?:type\s+)?\{[^}]*\bSQL\b[^}]*\}\s+from\s+["']bun["']/;

test("only src/relay touches ServerWebSocket; only src/store runs SQL", () => {
  const all = readdirSync(src, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts"));
  const uses = (re: RegExp) => all.filter((f) => re.test(readFileSync(join(src, f), "utf8"))).map((f) => f.split("/")[0]);
  expect(new Set(uses(/ServerWebSocket/))).toEqual(new Set(["relay"]));
  expect(new Set(uses(/bun:sqlite/))).toEqual(new Set(["store"]));
  expect(new Set(uses(RUNS_SQL))).toEqual(new Set(["store"]));
  // The pattern finds what it is for, and not a message that names a statement.
  for (const text of [
    'db.query("SELECT count(*) FROM events")',
    "sql`DELETE FROM events`",
    'import { SQL } from "bun";',
    "tx.unsafe(`WITH pick AS (`",
  ])
    expect(RUNS_SQL.test(text)).toBe(true);
  expect(RUNS_SQL.test("`compacted the file in 1 s (write lock held by VACUUM)`")).toBe(false);
});

/**
 * The folder order, lowest first: a file may import from its own folder and from folders
 * before it, never from one after it. Files at the root of src/ are named on their own.
 */
const ORDER = [
  "workers.ts", // worker script URLs (verify/ and store/ start workers)
  "version.ts",
  "log.ts", // log lines held to a few a minute (store/ and http/ use it)
  "protocol", // NIP-01 wire format: events, filters, messages, refusal prefixes
  "config", // the TOML schema, loading, reload diffs
  "nips", // per-NIP logic, pure
  "store", // the Store interface, SQLite and Postgres behind it
  "policy", // what is admitted and who may read what
  "verify", // signature verification: worker pool, native library
  "admin", // NIP-86 admin state
  "groups", // NIP-29 group state: built from committed events, judged by a policy
  "access", // who is admitted and why (issue 33): the registry and the admission engines
  "admit", // the one EVENT admission pipeline
  "http", // plain HTTP: NIP-11, status and admin pages, NIP-86 API, /metrics
  "observe", // the relay's counters and the status page's charts
  "ops", // bulk operations on a store: import, export, sync, stream, backup
  "relay", // the websocket relay: Bun.serve, connections, REQ, EVENT, fanout, mirrors (RELAY_ORDER)
  "cli", // the commands
  "main.ts", // the entry point
];

/**
 * Circles of files that import each other (type-only imports count: they tie the files just the
 * same), each inside one folder and of at most 3 files. Ideally none.
 */
const ALLOWED_CIRCLES: string[][] = [];

/** Every file of src/ (unit tests beside a module too; the admin page's browser modules included) -> the files of src/ it imports. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const all = readdirSync(src, { recursive: true, encoding: "utf8" }).filter((f) => /\.(tsx?|js)$/.test(f));
  // Static imports and re-exports (type-only too), and dynamic import("...") with a literal path.
  const spec =
    /(?:^|[\s;])(?:import|export)\s[^;'"]*?from\s*["']([^"']+)["']|\bimport\s*\(\s*["']([^"']+)["']\s*\)|^\s*import\s+["']([^"']+)["']/gm;
  for (const f of all) {
    const text = readFileSync(join(src, f), "utf8");
    const targets: string[] = [];
    for (const m of text.matchAll(spec)) {
      const s = m[1] ?? m[2] ?? m[3]!;
      if (!s.startsWith(".")) continue; // packages, node: and bun: modules
      const target = relative(src, resolve(dirname(join(src, f)), s));
      if (!target.startsWith("..")) targets.push(target);
    }
    graph.set(f, targets);
  }
  return graph;
}

/** A file's folder, or for one at the root of src/ its own name (its unit test's: the module's). */
const place = (file: string): string => (file.includes("/") ? file.split("/")[0]! : file.replace(/\.test\.ts$/, ".ts"));
const rank = (file: string): number => ORDER.indexOf(place(file));

test("every file of src/ has a place in the folder order", () => {
  const unplaced = [...importGraph().keys()].filter((f) => rank(f) < 0 && !place(f).startsWith("embed-"));
  expect(unplaced).toEqual([]);
});

test("no import points up the folder order", () => {
  const graph = importGraph();
  expect(graph.size).toBeGreaterThan(50); // the parse found the tree
  expect(graph.get("relay/wiring.ts")).toContain("store/queue.ts");
  expect(graph.get("http/status.test.ts")).toContain("http/status.ts"); // unit tests are read too
  const upward: string[] = [];
  for (const [from, targets] of graph) for (const to of targets) if (rank(to) > rank(from)) upward.push(`${from} -> ${to}`);
  expect(upward).toEqual([]);
});

/**
 * Inside relay/ the same rule, one level down: its folders, and the files at its root named on
 * their own, lowest first. A file of relay/ may import from its own folder and from those before.
 */
const RELAY_ORDER = [
  "fanout", // the live side both paths share: the ring of recent events, the live index, the broadcast
  "plugin", // the write-policy plugin process
  "answers", // what memory answers for some REQs
  "connection", // one connection: its state and frames, and the guards on connections
  "context.ts", // what the message handlers share
  "read", // REQ, COUNT, CLOSE, NEG-*: the stored events, catch-up, live subscriptions
  "write", // EVENT into admit/, and the mirrors
  "group-gates.ts", // NIP-29: the store's read gates kept equal to the group state
  "groups-purge.ts", // NIP-29: the deletions of 9005 and 9008, run again where one could be missed
  "groups.ts", // NIP-29: the relay's side of the group state (what it signs and deletes)
  "membership.ts", // NIP-43: the relay's side of its members (join, leave, invites, 13534) (issue 33)
  "wot-refresh.ts", // the web of trust's follow lists fetched from other relays (issue 33)
  "admission.ts", // issue 33: the admission registry and its engines, started
  "auth.ts", // NIP-42
  "wiring.ts", // the context built, the store's commit feed to live subscriptions
  "upgrade.ts", // who is let in: the websocket upgrade and its limits
  "dispatch.ts", // one message to the handler of its verb
  "shutdown.ts", // the graceful stop
  "server.ts", // Bun.serve wiring and lifecycle
];
/** A relay/ file's place in RELAY_ORDER (its unit test's: the module's); -1 outside relay/. */
const relayRank = (file: string): number => {
  const [top, sub] = file.split("/");
  if (top !== "relay" || sub === undefined) return -1;
  return RELAY_ORDER.indexOf(file.split("/").length > 2 ? sub : sub.replace(/\.test\.ts$/, ".ts"));
};

test("inside relay/, every file has a place and no import points up RELAY_ORDER", () => {
  const graph = importGraph();
  expect(graph.get("relay/dispatch.ts")).toContain("relay/read/req.ts"); // the parse found relay/
  const relayFiles = [...graph.keys()].filter((f) => f.startsWith("relay/"));
  expect(relayFiles.filter((f) => relayRank(f) < 0)).toEqual([]);
  const upward: string[] = [];
  for (const from of relayFiles)
    for (const to of graph.get(from)!) if (to.startsWith("relay/") && relayRank(to) > relayRank(from)) upward.push(`${from} -> ${to}`);
  expect(upward).toEqual([]);
});

test("ops/ reaches a database only through the store's interface (store/types.ts), on either backend", () => {
  const graph = importGraph();
  const reaches = [...graph].flatMap(([from, targets]) =>
    from.startsWith("ops/") ? targets.filter((t) => t.startsWith("store/") && t !== "store/types.ts").map((t) => `${from} -> ${t}`) : [],
  );
  expect(graph.get("ops/export.ts")).toContain("store/types.ts");
  expect(reaches).toEqual([]);
});

/** Strongly connected components of two files or more (Tarjan). */
function circles(graph: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let next = 0;
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const scc: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      scc.push(w);
    } while (w !== v);
    if (scc.length > 1) found.push(scc.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found.sort((a, b) => a[0]!.localeCompare(b[0]!));
}

test("circles finds a circle and nothing else", () => {
  const g = new Map([
    ["a", ["b"]],
    ["b", ["c"]],
    ["c", ["a"]],
    ["d", ["a"]],
  ]);
  expect(circles(g)).toEqual([["a", "b", "c"]]);
});

test("no import circle but the allowed ones: none crosses folders or holds more than 3 files", () => {
  for (const c of ALLOWED_CIRCLES) {
    expect(c.length).toBeLessThanOrEqual(3);
    expect(new Set(c.map(place)).size).toBe(1);
  }
  const allowed = new Set(ALLOWED_CIRCLES.map((c) => [...c].sort().join(" ")));
  const found = circles(importGraph()).map((c) => c.join(" "));
  expect(found.filter((c) => !allowed.has(c))).toEqual([]);
  // An allowed circle that is gone comes off the list.
  expect([...allowed].filter((c) => !found.includes(c))).toEqual([]);
});

test("every worker script the code starts exists and is an entrypoint of the binary (build.ts)", () => {
  const started = new Set<string>();
  for (const f of files("."))
    for (const m of readFileSync(f, "utf8").matchAll(/workerUrl\(\s*["']\.\/([^"']+)["']\s*\)/g)) started.add(m[1]!);
  expect(started.size).toBeGreaterThanOrEqual(2); // the verify workers and the reader workers
  const build = readFileSync(join(src, "..", "build.ts"), "utf8");
  const entrypoints = /const entrypoints = \[([^\]]*)\]/.exec(build)?.[1] ?? "";
  for (const path of started) {
    expect(existsSync(join(src, path))).toBe(true);
    expect(entrypoints).toContain(`"./src/${path}"`);
  }
});

/**
 * The functions of a file, with their length in lines: a declaration, method or arrow function
 * whose body opens at the end of its line, up to the first line that closes it at the same
 * indentation (the tree is formatted, so indentation tells the nesting).
 */
function functionLengths(text: string): { name: string; line: number; lines: number }[] {
  const start =
    /^(\s*)(?:export\s+)?(?:default\s+)?(?:async\s+)?(?:function\*?\s+(\w+)|(?:(?:private|public|protected|static|async|readonly|get|set)\s+)*\*?(\w+)\s*(?:<[^>]*>)?\(.*\)\s*(?::\s*[^{=]+)?\{\s*$|(?:const|let)\s+(\w+)\s*=\s*(?:async\s+)?(?:\([^)]*\)|\w+)\s*(?::\s*[^=]+)?=>\s*\{\s*$)/;
  const lines = text.split("\n");
  const found: { name: string; line: number; lines: number }[] = [];
  lines.forEach((l, i) => {
    const m = start.exec(l);
    const name = m?.[2] ?? m?.[3] ?? m?.[4];
    if (!m || !name || ["if", "for", "while", "switch", "catch", "return"].includes(name)) return;
    const indent = m[1]!;
    const end = lines.findIndex((t, j) => j > i && t.startsWith(`${indent}}`));
    if (end > i) found.push({ name, line: i + 1, lines: end - i + 1 });
  });
  return found;
}

test("no function in src/ is longer than 120 lines", () => {
  expect(functionLengths("function f() {\n  a();\n  if (x) {\n  }\n}\nconst g = async (y: number) => {\n  return y;\n};\n")).toEqual([
    { name: "f", line: 1, lines: 5 },
    { name: "g", line: 6, lines: 3 },
  ]);
  const long: string[] = [];
  let seen = 0;
  for (const f of files(".")) {
    for (const fn of functionLengths(readFileSync(f, "utf8"))) {
      seen++;
      if (fn.lines > 120) long.push(`${relative(src, f)}:${fn.line} ${fn.name} (${fn.lines} lines)`);
    }
  }
  expect(seen).toBeGreaterThan(500); // the scan finds the tree's functions
  expect(long).toEqual([]);
});
