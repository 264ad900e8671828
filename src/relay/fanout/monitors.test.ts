import { expect, test } from "bun:test";
import { compileSearch } from "../../nips/nip50.ts";
import type { NostrEvent } from "../../protocol/event.ts";
import { compileFilter, matchFilter, type CompiledFilter } from "../../protocol/filter.ts";
import { LiveIndex } from "./monitors.ts";

// A key holds its one entry without a Set until a second comes (monitors.ts put/drop): checked
// against every live filter matched by hand, through adds and removes that share keys.
test("the live index finds exactly the groups a brute-force match finds, and empties", () => {
  let seed = 42;
  // 32-bit arithmetic, high bits: in doubles the product lost its low bits and rand(4) gave 0 almost always.
  const rand = (n: number) => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 16) % n;
  const hex = (i: number) => i.toString(16).padStart(64, "0");
  const pick = <T>(xs: T[]) => xs[rand(xs.length)]!;
  const someOf = (n: number, f: (i: number) => unknown) => [...new Set(Array.from({ length: 1 + rand(3) }, () => f(rand(n))))];
  const filter = (): CompiledFilter => {
    const shape = pick(["ids", "authors", "tag", "kinds", "others", "search"]);
    const raw: Record<string, unknown> = {};
    if (shape === "ids") raw.ids = someOf(6, hex);
    if (shape === "authors") raw.authors = someOf(6, hex);
    if (shape === "tag") raw["#t"] = someOf(4, (i) => `t${i}`);
    if (shape === "kinds" || rand(3) === 0) raw.kinds = someOf(3, (i) => i);
    // Searches under any shape; "x:y" alone has no term (an extension, ignored), so matches all.
    if (shape === "search" || rand(4) === 0) raw.search = pick(["w0", "W1 w2", "w3 x:y", "x:y", "w10 w0", "w2 w1 w4"]);
    return compileFilter(raw, { maxValues: 100, compileSearch: (q) => compileSearch(q, restricted) });
  };
  const event = (): NostrEvent => ({
    id: hex(rand(6)),
    pubkey: hex(rand(6)),
    created_at: 1,
    kind: rand(3),
    tags: rand(2) ? [["t", `t${rand(4)}`]] : [],
    content: Array.from({ length: rand(4) }, () => `w${rand(5)}`).join(" "),
    sig: "",
  });

  const index = new LiveIndex<number>();
  const restricted = new Set([2]); // a kind search never matches (policy/visibility.ts)
  const live = new Map<number, { filters: CompiledFilter[]; entries: ReturnType<LiveIndex<number>["add"]> }>();
  let checks = 0;
  let searchHits = 0; // events a search filed under a word found
  for (let step = 0; step < 3000; step++) {
    if (live.size < 12 && rand(2) === 0) {
      const filters = Array.from({ length: 1 + rand(3) }, filter);
      live.set(step, { filters, entries: index.add(step, filters) });
    } else if (live.size > 0) {
      const group = pick([...live.keys()]);
      index.remove(live.get(group)!.entries);
      live.delete(group);
    }
    const e = event();
    const hits: number[] = [];
    index.match(e, (g) => hits.push(g));
    const want = [...live].filter(([, l]) => l.filters.some((f) => matchFilter(f, e))).map(([g]) => g);
    expect(hits.sort((a, b) => a - b)).toEqual(want.sort((a, b) => a - b));
    checks++;
    if ([...live].some(([, l]) => l.filters.some((f) => f.search?.indexTerm !== undefined && matchFilter(f, e)))) searchHits++;
  }
  for (const l of live.values()) index.remove(l.entries);
  // Nothing left behind: no key with an empty Set, no entry of a removed group.
  const maps = index as unknown as Record<"ids" | "authors" | "tags" | "words" | "kinds" | "others", { size: number }>;
  expect([maps.ids.size, maps.authors.size, maps.tags.size, maps.words.size, maps.kinds.size, maps.others.size]).toEqual([
    0, 0, 0, 0, 0, 0,
  ]);
  expect((index as unknown as { wordSkips: Map<string, unknown> }).wordSkips.size).toBe(0);
  expect(checks).toBe(3000);
  expect(searchHits).toBeGreaterThan(100);
});

// Issue 36: with a live search, every fanned-out event was tokenized, DMs (restricted kinds, which
// a search never matches) included. Its text is not read now: the content getter counts reads.
test("an event of a kind every live search skips is not tokenized", () => {
  const restricted = new Set([4, 1059]);
  const limits = { maxValues: 100, compileSearch: (q: string) => compileSearch(q, restricted) };
  const index = new LiveIndex<string>();
  const searches = index.add("s", [compileFilter({ search: "hello" }, limits)]);
  let reads = 0;
  const event = (kind: number): NostrEvent => {
    const e = { id: "0".repeat(64), pubkey: "1".repeat(64), created_at: 1, kind, tags: [], sig: "" } as unknown as NostrEvent;
    Object.defineProperty(e, "content", { get: () => (reads++, "hello world"), enumerable: true });
    return e;
  };
  const hits: string[] = [];
  index.match(event(4), (g) => hits.push(g));
  index.match(event(1059), (g) => hits.push(g));
  expect([hits, reads]).toEqual([[], 0]);
  // Other kinds are read, and found.
  index.match(event(1), (g) => hits.push(g));
  expect(hits).toEqual(["s"]);
  expect(reads).toBeGreaterThan(0);
  // A search compiled without restricted kinds (another configuration) reads them again.
  const open = index.add("o", [compileFilter({ search: "hello" }, { maxValues: 100, compileSearch: (q) => compileSearch(q, new Set()) })]);
  reads = 0;
  index.match(event(4), (g) => hits.push(g));
  expect([hits, reads > 0]).toEqual([["s", "o"], true]);
  index.remove(open);
  index.remove(searches);
  expect((index as unknown as { wordSkips: Map<string, unknown> }).wordSkips.size).toBe(0);
});
