import { describe, expect, test } from "bun:test";
import type { NostrEvent } from "../protocol/event.ts";
import type { FollowStore, WotSettings } from "./wot.ts";
import { defaults } from "../config/schema.ts";
import { buildTrustGraph, MAX_NEW_PER_FOLLOWER, WebOfTrust, wotSettings } from "./wot.ts";

const pk = (n: number): string => n.toString(16).padStart(64, "0");
let tick = 1_800_000_000;

/** A kind 3 of `author` following `follows` (unsigned: the builder reads only pubkey and tags). */
const follows = (author: string, list: readonly string[], extra: string[][] = []): NostrEvent => ({
  id: pk(++tick),
  pubkey: author,
  created_at: tick,
  kind: 3,
  tags: [...list.map((p) => ["p", p]), ...extra],
  content: "",
  sig: "",
});

/** The store as the builder reads it, over a list of events: kind and authors, newest first. */
function storeOf(events: NostrEvent[], reads: string[][] = []): FollowStore {
  return {
    lastSeq: () => events.length,
    async *query(job) {
      const f = job.filters[0]!;
      reads.push(f.authors ?? []);
      const rows = events
        .filter((e) => f.kinds!.includes(e.kind) && f.authors!.includes(e.pubkey))
        .sort((a, b) => b.created_at - a.created_at)
        .map((e) => JSON.stringify(e));
      yield rows;
    },
  };
}

const settings = (s: Partial<WotSettings>): WotSettings => ({ seeds: [pk(1)], depth: 1, min_followers: 1, max_pubkeys: 1000, ...s });

describe("buildTrustGraph", () => {
  test("depth 1: the seeds and whom they follow, by their newest follow list", async () => {
    const events = [
      follows(pk(1), [pk(10), pk(11)]),
      follows(pk(1), [pk(10), pk(12)]), // newer: 11 unfollowed
      follows(pk(10), [pk(20)]),
    ];
    const { graph, cut } = await buildTrustGraph(storeOf(events), settings({}));
    expect([pk(1), pk(10), pk(12)].map((k) => graph.has(k))).toEqual([true, true, true]);
    expect(graph.has(pk(11))).toBe(false);
    expect(graph.has(pk(20))).toBe(false);
    expect(graph.path(pk(12))).toEqual([pk(1), pk(12)]);
    expect(cut).toBe(0);
  });

  test("only p tags holding a pubkey count; the author following itself does not", async () => {
    const events = [follows(pk(1), [pk(10), pk(1), "A".repeat(64), "zz"], [["e", pk(30)], ["p"]])];
    const { graph } = await buildTrustGraph(storeOf(events), settings({}));
    expect(graph.size).toBe(2);
    expect(graph.followers(pk(1))).toBe(0);
  });

  test("depth 2 with min_followers: kept only when followed by that many depth-1 pubkeys", async () => {
    const events = [
      follows(pk(1), [pk(10), pk(11), pk(12)]),
      follows(pk(10), [pk(20), pk(21), pk(11)]),
      follows(pk(11), [pk(20), pk(21)]),
      follows(pk(12), [pk(20), pk(22)]),
    ];
    const two = await buildTrustGraph(storeOf(events), settings({ depth: 2, min_followers: 2 }));
    expect([20, 21, 22].map((n) => two.graph.has(pk(n)))).toEqual([true, true, false]);
    expect(two.graph.followers(pk(20))).toBe(3);
    expect(two.graph.followers(pk(11))).toBe(2); // the seed and 10
    expect(two.graph.depth(pk(20))).toBe(2);
    // Through whichever of its followers' lists was read first.
    expect([
      [pk(1), pk(10), pk(21)],
      [pk(1), pk(11), pk(21)],
    ]).toContainEqual(two.graph.path(pk(21))!);
    const one = await buildTrustGraph(storeOf(events), settings({ depth: 2, min_followers: 1 }));
    expect(one.graph.has(pk(22))).toBe(true);
    const depth1 = await buildTrustGraph(storeOf(events), settings({ depth: 1 }));
    expect(depth1.graph.has(pk(20))).toBe(false);
  });

  test("max_pubkeys: seeds, then depth 1, then the most followed of depth 2; the rest counted as cut", async () => {
    const events = [follows(pk(1), [pk(10), pk(11)]), follows(pk(10), [pk(20), pk(21)]), follows(pk(11), [pk(21), pk(22)])];
    const { graph, cut } = await buildTrustGraph(storeOf(events), settings({ depth: 2, max_pubkeys: 4 }));
    expect(graph.size).toBe(4);
    expect(graph.has(pk(21))).toBe(true); // two followers
    expect(graph.has(pk(20)) || graph.has(pk(22))).toBe(false);
    expect(cut).toBe(2);
    const small = await buildTrustGraph(storeOf(events), settings({ depth: 2, max_pubkeys: 2 }));
    expect(small.graph.size).toBe(2);
    expect(small.cut).toBe(1 + 2); // 11, then 20 and 21 (11's follows are not read)
  });

  test("depth 2: one depth-1 list brings in at most MAX_NEW_PER_FOLLOWER pubkeys no list before it named; others' follows still come in", async () => {
    const sybils = Array.from({ length: MAX_NEW_PER_FOLLOWER + 100 }, (_, i) => pk(1000 + i));
    const last = sybils.at(-1)!;
    // Newest first: 10's list of sybils is read before 11's.
    const events = [follows(pk(1), [pk(10), pk(11)]), follows(pk(11), [pk(20), last]), follows(pk(10), [...sybils, pk(20)])];
    const { graph } = await buildTrustGraph(storeOf(events), settings({ depth: 2, max_pubkeys: 5000 }));
    expect(graph.size).toBe(3 + MAX_NEW_PER_FOLLOWER + 2); // seed, 10, 11; 10's first ones; 20 and `last` through 11
    expect(graph.has(sybils[0]!)).toBe(true);
    expect(graph.has(sybils[MAX_NEW_PER_FOLLOWER]!)).toBe(false);
    expect(graph.path(last)).toEqual([pk(1), pk(11), last]);
    expect(graph.has(pk(20))).toBe(true);
  });

  test("follow lists are read 500 authors at a time", async () => {
    const many = Array.from({ length: 1200 }, (_, i) => pk(100 + i));
    const reads: string[][] = [];
    const { graph } = await buildTrustGraph(storeOf([follows(pk(1), many)], reads), settings({ depth: 2, max_pubkeys: 5000 }));
    expect(graph.size).toBe(1201);
    expect(reads.map((r) => r.length)).toEqual([1, 500, 500, 200]);
  });
});

test("wotSettings: the seeds, else [info] pubkey, else none", () => {
  const c = defaults();
  expect(wotSettings(c).seeds).toEqual([]);
  c.info.pubkey = pk(7);
  expect(wotSettings(c).seeds).toEqual([pk(7)]);
  c.web_of_trust.seeds = [pk(8), pk(9)];
  c.web_of_trust.depth = 2;
  expect(wotSettings(c)).toEqual({ seeds: [pk(8), pk(9)], depth: 2, min_followers: 1, max_pubkeys: 200_000 });
});

describe("WebOfTrust", () => {
  test("not ready until built; a seed's follow list rebuilds once after the debounce; others do not", async () => {
    const events = [follows(pk(1), [pk(10)])];
    let builds = 0;
    const wot = new WebOfTrust(storeOf(events), { settings: () => settings({}), debounceMs: 50, onBuilt: () => void builds++ });
    expect(wot.ready).toBe(false);
    expect(wot.has(pk(1))).toBe(false);
    await wot.rebuild();
    expect(wot.ready && wot.has(pk(10)) && !wot.has(pk(11))).toBe(true);
    expect(wot.size).toBe(2);
    expect(wot.path(pk(10))).toEqual({ path: [pk(1), pk(10)], depth: 1 });
    expect(wot.path(pk(11))).toBeUndefined();
    expect(wot.pubkeys(0, 10)).toEqual([pk(1), pk(10)]);
    expect(wot.pubkeys(1, 10)).toEqual([pk(10)]);
    expect(wot.pubkeys(0, 1)).toEqual([pk(1)]);
    events.push(follows(pk(1), [pk(10), pk(11)]));
    wot.committed(events.at(-1)!);
    wot.committed(events.at(-1)!); // a burst: one rebuild
    wot.committed(follows(pk(10), [pk(12)])); // depth 1 with depth = 1: does not shape the graph
    wot.committed({ ...follows(pk(1), []), kind: 1 });
    expect(wot.has(pk(11))).toBe(false);
    await Bun.sleep(200);
    expect(wot.has(pk(11))).toBe(true);
    expect(builds).toBe(2);
    wot.stop();
  });

  test("a rebuild asked for during a build runs after it and sees what committed meanwhile", async () => {
    const events = [follows(pk(1), [pk(10)])];
    const wot = new WebOfTrust(storeOf(events), { settings: () => settings({}) });
    const first = wot.rebuild();
    events.push(follows(pk(1), [pk(11)]));
    await wot.rebuild();
    await first;
    expect(wot.has(pk(11))).toBe(true);
    expect(wot.has(pk(10))).toBe(false);
    wot.stop();
  });

  test("rebuilds asked for by commits are ten build times apart (a follow list a second cannot keep it building)", async () => {
    const events = [follows(pk(1), [pk(10)])];
    // Each build spends ~40 ms on this thread (the settings read at its start spin): the next
    // one asked for by a commit waits ~400 ms after it.
    const spin = () => {
      const end = performance.now() + 40;
      while (performance.now() < end);
      return settings({});
    };
    const wot = new WebOfTrust(storeOf(events), { settings: spin, debounceMs: 10 });
    await wot.rebuild();
    expect(wot.buildSeconds).toBeGreaterThanOrEqual(0.035);
    events.push(follows(pk(1), [pk(11)]));
    const t0 = performance.now();
    wot.committed(events.at(-1)!);
    while (!wot.has(pk(11)) && performance.now() - t0 < 5000) await Bun.sleep(5);
    // At least ten times the 35+ ms spun (a loaded box only makes it later), not the 10 ms debounce.
    expect(performance.now() - t0).toBeGreaterThanOrEqual(350);
    expect(wot.has(pk(11))).toBe(true);
    wot.stop();
  });

  test("a failed build keeps the last graph and says so", async () => {
    const lines: string[] = [];
    let fail = false;
    const base = storeOf([follows(pk(1), [pk(10)])]);
    const store: FollowStore = {
      lastSeq: base.lastSeq,
      query: (job) => {
        if (fail) throw new Error("reader gone");
        return base.query(job);
      },
    };
    const wot = new WebOfTrust(store, { settings: () => settings({}), log: (l) => lines.push(l) });
    await wot.rebuild();
    fail = true;
    await wot.rebuild();
    expect(wot.has(pk(10))).toBe(true);
    expect(lines).toEqual(["wot: the graph could not be built (reader gone); trying again in 10 s"]);
    wot.stop();
  });
});
