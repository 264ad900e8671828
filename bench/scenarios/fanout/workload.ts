// The fanout workloads: signed events and the subscriptions that receive them, made
// deterministically from a seed (the same run gives the same events, byte for byte).
import { createHash } from "node:crypto";
import type { NostrEvent } from "../../../src/protocol/event.ts";
import { createSigner, type Signer } from "../../lib/sign.ts";
import type { RawFilter } from "../../lib/match.ts";
import { prng } from "../../lib/stats.ts";

export type ScenarioName = "mixed" | "shared";

export const sha256 = (s: string): Buffer => createHash("sha256").update(s, "utf8").digest();

/** No auxiliary randomness: the signatures, like the rest of the workload, depend on the seed only. */
const ZERO_AUX = new Uint8Array(32);

interface EventKey {
  pubkey: string;
  sign(msg32: Uint8Array): Uint8Array;
}

const eventKey = (signer: Signer, secretKey: Uint8Array): EventKey => {
  const key = signer.key(secretKey);
  return { pubkey: key.publicKey.toHex(), sign: (msg32) => key.sign(msg32, ZERO_AUX) };
};

function buildEvent(key: EventKey, created_at: number, kind: number, tags: string[][], content: string): NostrEvent {
  // Content is plain ASCII without control characters, so JSON.stringify is NIP-01's serialization.
  const id = sha256(JSON.stringify([0, key.pubkey, created_at, kind, tags, content]));
  return { id: id.toString("hex"), pubkey: key.pubkey, created_at, kind, tags, content, sig: Buffer.from(key.sign(id)).toString("hex") };
}

/** The event as a relay should put it on the wire: the seven fields in NIP-01 order. */
export const wireJson = (e: NostrEvent): string =>
  JSON.stringify({ id: e.id, pubkey: e.pubkey, created_at: e.created_at, kind: e.kind, tags: e.tags, content: e.content, sig: e.sig });

/** The same event with its keys in alphabetical order: how strfry sends events (it re-serializes them). */
export const sortedKeysJson = (e: NostrEvent): string =>
  JSON.stringify({ content: e.content, created_at: e.created_at, id: e.id, kind: e.kind, pubkey: e.pubkey, sig: e.sig, tags: e.tags });

export interface Sub {
  /** Row in the (subscription x event) matrices. */
  slot: number;
  conn: number;
  /** The subscription id is "s<num>". */
  num: number;
  filters: RawFilter[];
  /** What kind of subscription it is (for the record). */
  label: string;
}

export interface Workload {
  events: NostrEvent[];
  subs: Sub[];
  conns: number;
}

const BASE_TIME = 1_700_000_000;
const WORDS =
  "the a relay note bun fast nostr event filter kind tag zap reply thread sats garden coffee morning build ship test code open source signal noise fanout topic".split(
    " ",
  );

/** Index in [0, n) skewed towards 0 (popular authors, topics, threads). */
const skewed = (n: number, r: number): number => Math.min(n - 1, Math.floor(n * r * r));

function distinct(count: number, pick: () => number): number[] {
  const s = new Set<number>();
  for (let guard = 0; s.size < count && guard < count * 20; guard++) s.add(pick());
  return [...s];
}

/**
 * The mixed workload: 200 authors, 64 hashtags, 100 threads; events of kinds 1 (notes), 7
 * (reactions), 6/16 (reposts), 1111 (comments), 20001 (ephemeral), with t, p and e tags; the
 * subscriptions are what clients ask for: global feeds by kind, follow feeds (authors lists),
 * profiles, hashtags, notifications (#p), threads (#e), and REQs with several filters.
 */
export function mixedWorkload(signer: Signer, nEvents: number, nSubs: number, nConns: number, seed: number): Workload {
  const AUTHORS = 200;
  const TOPICS = 64;
  const THREADS = 100;
  const keys = Array.from({ length: AUTHORS }, (_, i) => eventKey(signer, sha256(`bunstr-bench-fanout-v1:key:${i}`)));
  const pubkeys = keys.map((k) => k.pubkey);
  const topic = (i: number) => `topic${i}`;
  const roots = Array.from({ length: THREADS }, (_, i) => sha256(`bunstr-bench-fanout-v1:root:${i}`).toString("hex"));
  const rootAuthor = (j: number) => pubkeys[(j * 37) % AUTHORS]!;

  let r = prng(seed);
  const events: NostrEvent[] = [];
  for (let i = 0; i < nEvents; i++) {
    const author = skewed(AUTHORS, r());
    const created = BASE_TIME + i; // distinct, so no two events are identical (reactions "+" by one author)
    const x = r();
    const thread = skewed(THREADS, r());
    const mention = () => pubkeys[skewed(AUTHORS, r())]!;
    let kind: number;
    let tags: string[][] = [];
    let content = "";
    if (x < 0.55) {
      kind = 1;
      if (r() < 0.3) tags.push(["e", roots[thread]!, "", "root"], ["p", rootAuthor(thread)]);
      for (const t of distinct(r() < 0.3 ? 0 : 1 + Math.floor(r() * 3), () => skewed(TOPICS, r()))) tags.push(["t", topic(t)]);
      for (let m = Math.floor(r() * 3); m > 0; m--) tags.push(["p", mention()]);
      const words = 6 + Math.floor(r() * 40);
      content = Array.from({ length: words }, () => WORDS[Math.floor(r() * WORDS.length)]).join(" ") + ` #${i}`;
    } else if (x < 0.78) {
      kind = 7;
      tags = [
        ["e", roots[thread]!],
        ["p", rootAuthor(thread)],
        ["k", "1"],
      ];
      content = r() < 0.8 ? "+" : "\u{1F525}";
    } else if (x < 0.86 || x < 0.9) {
      kind = x < 0.86 ? 6 : 16;
      tags = [
        ["e", roots[thread]!, ""],
        ["p", rootAuthor(thread)],
      ];
      if (kind === 16) tags.push(["k", "1"]);
    } else if (x < 0.95) {
      kind = 1111;
      tags = [
        ["E", roots[thread]!, "", rootAuthor(thread)],
        ["K", "1"],
        ["e", roots[thread]!, "", rootAuthor(thread)],
        ["k", "1"],
        ["p", rootAuthor(thread)],
      ];
      content = `comment ${i} on thread ${thread}`;
    } else {
      kind = 20001;
      tags = [["t", topic(skewed(TOPICS, r()))]];
      content = `ephemeral ${i}`;
    }
    events.push(buildEvent(keys[author]!, created, kind, tags, content));
  }

  // Subscriptions from their own stream, so they do not depend on the number of events.
  r = prng(seed + 1_000_003);
  const authorsList = (min: number, max: number) =>
    distinct(min + Math.floor(r() * (max - min + 1)), () => skewed(AUTHORS, r())).map((a) => pubkeys[a]!);
  const topicsList = (n: number) => distinct(n, () => skewed(TOPICS, r())).map(topic);
  const subs: Sub[] = [];
  for (let s = 0; s < nSubs; s++) {
    const x = r();
    const me = pubkeys[skewed(AUTHORS, r())]!;
    const root = roots[skewed(THREADS, r())]!;
    let label: string;
    let filters: RawFilter[];
    if (x < 0.04) {
      const kinds = [[1], [7], [6, 16], [1, 1111], [20001]][Math.floor(r() * 5)]!;
      (label = "kinds"), (filters = [{ kinds }]);
    } else if (x < 0.22) (label = "authors+kinds"), (filters = [{ authors: authorsList(5, 40), kinds: [1, 6, 16] }]);
    else if (x < 0.27) (label = "authors"), (filters = [{ authors: authorsList(1, 1) }]);
    else if (x < 0.36) (label = "#t"), (filters = [{ "#t": topicsList(1 + Math.floor(r() * 3)) }]);
    else if (x < 0.45) (label = "kinds+#t"), (filters = [{ kinds: [1], "#t": topicsList(1 + Math.floor(r() * 3)) }]);
    else if (x < 0.51) (label = "#p"), (filters = [{ "#p": [me] }]);
    else if (x < 0.58) (label = "kinds+#p"), (filters = [{ kinds: [1, 6, 7, 16], "#p": [me] }]);
    else if (x < 0.63) (label = "#e"), (filters = [{ "#e": [root] }]);
    else if (x < 0.68) (label = "kinds+#e"), (filters = [{ kinds: [1, 7, 1111], "#e": [root] }]);
    else if (x < 0.7) (label = "authors+#t"), (filters = [{ authors: authorsList(10, 30), "#t": topicsList(2) }]);
    else if (x < 0.78) (label = "kinds+authors"), (filters = [{ kinds: [7], authors: authorsList(5, 30) }]);
    else if (x < 0.88)
      (label = "multi:home"),
        (filters = [
          { authors: authorsList(5, 40), kinds: [1, 6] },
          { kinds: [1, 7], "#p": [me] },
        ]);
    else if (x < 0.95)
      (label = "multi:topic+thread"), (filters = [{ "#t": topicsList(1) }, { "#e": [root] }, { kinds: [1111], "#E": [root] }]);
    else (label = "multi:profile"), (filters = [{ kinds: [7], "#p": [me] }, { authors: [me] }]);
    for (const f of filters) f.limit = 0; // live only: the database is empty anyway
    subs.push({ slot: s, conn: Math.floor((s * nConns) / nSubs), num: s, filters, label });
  }
  return { events, subs, conns: nConns };
}

/** The shared workload: every connection holds ["REQ","s0",{"kinds":[1],"#t":["fanout"]}]; every event matches. */
export function sharedWorkload(signer: Signer, nEvents: number, nConns: number, seed: number): Workload {
  const keys = Array.from({ length: 50 }, (_, i) => eventKey(signer, sha256(`bunstr-bench-fanout-v1:shared-key:${i}`)));
  const r = prng(seed);
  const events: NostrEvent[] = [];
  for (let i = 0; i < nEvents; i++) {
    const words = 10 + Math.floor(r() * 40);
    const content = Array.from({ length: words }, () => WORDS[Math.floor(r() * WORDS.length)]).join(" ") + ` #${i}`;
    const tags = [
      ["t", "fanout"],
      ["p", keys[Math.floor(r() * 50)]!.pubkey],
    ];
    events.push(buildEvent(keys[i % 50]!, BASE_TIME + i, 1, tags, content));
  }
  const filters: RawFilter[] = [{ kinds: [1], "#t": ["fanout"], limit: 0 }];
  const subs = Array.from({ length: nConns }, (_, k): Sub => ({ slot: k, conn: k, num: 0, filters, label: "shared" }));
  return { events, subs, conns: nConns };
}

/** The events and subscriptions of a scenario, as the run makes them (for tools and micro-benchmarks). */
export function makeWorkload(scenario: ScenarioName, events: number, subs: number, conns: number, seed = 1): Workload {
  const signer = createSigner();
  return scenario === "mixed" ? mixedWorkload(signer, events, subs, conns, seed) : sharedWorkload(signer, events, subs, seed);
}
