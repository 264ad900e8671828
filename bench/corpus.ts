// A deterministic, pre-signed corpus of kind-1 events for the load check.
//
// Everything but the signatures is a pure function of (CORPUS_SEED, index): secret keys are
// sha256(seed + author index), and each event's author, tags, content and created_at come from
// sha256(seed + event index). Schnorr signing uses random aux data (nostr-tools does not let us
// pass it), so signatures differ between generations — which is why the corpus is signed once and
// cached as JSON lines in bench/out/corpus-N.jsonl. A cached file is reused when its size and its
// first and last ids match what this generator would produce.
//
//   npx bun bench/corpus.ts [--events 20000]     generate (or check) the cache and print its path
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { finalizeEvent, getPublicKey } from "nostr-tools/pure";
import type { NostrEvent } from "../src/protocol/event.ts";

/** Change this when the generator changes: the ids change with it, so old caches are rebuilt. */
export const CORPUS_SEED = "bunstr-bench-corpus-v1";
/** Distinct authors (secret keys); each event picks one. */
export const AUTHORS = 500;
/** Distinct `t` tag values ("bench-topic-0" … ); each event has one or two. */
export const TOPICS = 64;
/** created_at of event 0; every third event advances it by one second, so ties are common. */
export const BASE_CREATED_AT = 1_700_000_000;

export const OUT_DIR = join(import.meta.dir, "out");

export type BenchEvent = NostrEvent;

export interface Corpus {
  /** The events, in generation order. */
  events: BenchEvent[];
  /** The same events as the JSON text of the cache file, ready to wrap in ["EVENT", …]. */
  lines: string[];
  /** Event id -> index into `events`. */
  byId: Map<string, number>;
  path: string;
  /** True when this call signed the events (false: read from the cache). */
  generated: boolean;
  /** Time spent generating or loading. */
  seconds: number;
}

const sha256 = (s: string): Buffer => createHash("sha256").update(s, "utf8").digest();

/** secp256k1 group order: a secret key must be in [1, n-1]. */
const CURVE_ORDER = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

/** The secret key of author `a`: sha256(seed:key:a), re-hashed in the (astronomically rare) case it is out of range. */
export function authorSecretKey(a: number): Uint8Array {
  let h = sha256(`${CORPUS_SEED}:key:${a}`);
  for (;;) {
    const k = BigInt(`0x${h.toString("hex")}`);
    if (k > 0n && k < CURVE_ORDER) return new Uint8Array(h);
    h = sha256(h.toString("hex"));
  }
}

const WORDS = ["nostr", "relay", "bun", "sqlite", "event", "note", "signal", "zap", "bench", "load", "tag", "key", "lorem", "ipsum", "hello", "world"];

interface Template {
  author: number;
  created_at: number;
  tags: string[][];
  content: string;
}

/** Event `i` without its signature; `pubkeys` holds every author's pubkey and `ids` the ids of events before i. */
function template(i: number, pubkeys: readonly string[], ids: readonly string[]): Template {
  const h = sha256(`${CORPUS_SEED}:event:${i}`);
  const u16 = (k: number) => h.readUInt16BE(k * 2);
  const author = u16(0) % pubkeys.length;
  const tags: string[][] = [["t", `bench-topic-${u16(1) % TOPICS}`]];
  if (u16(2) % 4 === 0) tags.push(["t", `bench-topic-${u16(3) % TOPICS}`]);
  tags.push(["p", pubkeys[u16(4) % pubkeys.length]!]);
  if (i > 0 && u16(5) % 3 === 0) tags.push(["e", ids[u16(6) % i]!]);
  const words: string[] = [];
  const n = 6 + (u16(7) % 50);
  for (let w = 0; w < n; w++) words.push(WORDS[h[(16 + w) % 32]! % WORDS.length]!);
  return { author, created_at: BASE_CREATED_AT + Math.floor(i / 3), tags, content: `bench note ${i}: ${words.join(" ")}` };
}

/** The id event `i` will have (signing is not needed for the id). Used to validate a cache. */
function expectedIds(n: number, pubkeys: readonly string[]): string[] {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const t = template(i, pubkeys, ids);
    const ser = JSON.stringify([0, pubkeys[t.author], t.created_at, 1, t.tags, t.content]);
    ids.push(sha256(ser).toString("hex"));
  }
  return ids;
}

export function generateEvents(n: number, onProgress?: (done: number) => void): BenchEvent[] {
  const keys = Array.from({ length: AUTHORS }, (_, a) => authorSecretKey(a));
  const pubkeys = keys.map(getPublicKey);
  const ids: string[] = [];
  const events: BenchEvent[] = [];
  for (let i = 0; i < n; i++) {
    const t = template(i, pubkeys, ids);
    const e = finalizeEvent({ kind: 1, created_at: t.created_at, tags: t.tags, content: t.content }, keys[t.author]!);
    const plain: BenchEvent = { id: e.id, pubkey: e.pubkey, created_at: e.created_at, kind: e.kind, tags: e.tags, content: e.content, sig: e.sig };
    ids.push(plain.id);
    events.push(plain);
    if (onProgress && (i + 1) % 2000 === 0) onProgress(i + 1);
  }
  return events;
}

export const corpusPath = (n: number): string => join(OUT_DIR, `corpus-${n}.jsonl`);

/** Reads the cache if it matches this generator; undefined otherwise. */
function readCache(path: string, n: number): { events: BenchEvent[]; lines: string[] } | undefined {
  if (!existsSync(path)) return undefined;
  const lines = readFileSync(path, "utf8").split("\n").filter((l) => l.length > 0);
  if (lines.length !== n) return undefined;
  const events = lines.map((l) => JSON.parse(l) as BenchEvent);
  const pubkeys = Array.from({ length: AUTHORS }, (_, a) => getPublicKey(authorSecretKey(a)));
  const ids = expectedIds(n, pubkeys);
  for (let i = 0; i < n; i++) if (events[i]!.id !== ids[i]) return undefined;
  return { events, lines };
}

/** The corpus of `n` events: from bench/out/corpus-n.jsonl, or signed now and cached there. */
export function loadCorpus(n: number, log: (msg: string) => void = () => {}): Corpus {
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`corpus size must be a positive integer, got ${n}`);
  const path = corpusPath(n);
  const t0 = performance.now();
  let cached = readCache(path, n);
  let generated = false;
  if (!cached) {
    log(`corpus: signing ${n} events (one time; cached in ${path}) …`);
    const events = generateEvents(n, (done) => log(`corpus: ${done}/${n}`));
    const lines = events.map((e) => JSON.stringify(e));
    mkdirSync(OUT_DIR, { recursive: true });
    const tmp = `${path}.${process.pid}.tmp`;
    writeFileSync(tmp, lines.join("\n") + "\n");
    renameSync(tmp, path);
    cached = { events, lines };
    generated = true;
  }
  const byId = new Map<string, number>();
  cached.events.forEach((e, i) => byId.set(e.id, i));
  if (byId.size !== n) throw new Error(`corpus ${path} has duplicate ids`);
  return { ...cached, byId, path, generated, seconds: (performance.now() - t0) / 1000 };
}

if (import.meta.main) {
  const { values } = parseArgs({ args: process.argv.slice(2), options: { events: { type: "string", default: "20000" } }, strict: true });
  const c = loadCorpus(Number(values.events), (m) => console.error(m));
  console.log(`${c.path}: ${c.events.length} events, ${c.generated ? "generated" : "cached"} in ${c.seconds.toFixed(1)}s`);
}
