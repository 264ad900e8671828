// Issue 15's query mix drawn from a corpus file, for the in-process engine benches
// (engine-mix.ts, reader-cache.ts): feed 35%, thread 20%, profile 20%, hashtag 15%, ids 10%.
// Authors and tag values are drawn by picking events, so by activity (roughly the bench's Zipf).
import { readFileSync } from "node:fs";
import type { Filter } from "../../src/protocol/filter.ts";
import { prng } from "./stats.ts";

export interface EngineReq {
  shape: "feed" | "thread" | "profile" | "hashtag" | "ids";
  filters: Filter[];
  limits: number[];
}

type Ev = { id: string; pubkey: string; tags: string[][] };

/** `count` REQs of the mix over the events of `corpusPath`, the same for the same seed. */
export function engineReqs(corpusPath: string, count: number, seed = 7): EngineReq[] {
  const events = readFileSync(corpusPath, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Ev);
  // mulberry32. The LCG here before (seed * 1103515245 in doubles) lost bits past 2^53 and fell
  // into a cycle of ~10k draws: 20,000 REQs were 505 distinct ones, so every cache was warm.
  const rand = prng(seed);
  const any = (): Ev => events[Math.floor(rand() * events.length)]!;
  const tag = (name: string): string => {
    for (;;) {
      const v = any().tags.find((t) => t[0] === name)?.[1];
      if (v) return v;
    }
  };
  const reqs: EngineReq[] = [];
  for (let i = 0; i < count; i++) {
    const u = rand();
    if (u < 0.35) {
      const authors = new Set<string>();
      while (authors.size < 50) authors.add(any().pubkey);
      reqs.push({ shape: "feed", filters: [{ authors: [...authors], kinds: [1, 6] }], limits: [50] });
    } else if (u < 0.55) reqs.push({ shape: "thread", filters: [{ "#e": [tag("e")] }], limits: [200] });
    else if (u < 0.75) reqs.push({ shape: "profile", filters: [{ kinds: [0], authors: [any().pubkey] }], limits: [500] });
    else if (u < 0.9) reqs.push({ shape: "hashtag", filters: [{ "#t": [tag("t")] }], limits: [100] });
    else {
      const ids = new Set<string>();
      while (ids.size < 10) ids.add(any().id);
      ids.add("f".repeat(64));
      reqs.push({ shape: "ids", filters: [{ ids: [...ids] }], limits: [11] });
    }
  }
  return reqs;
}
