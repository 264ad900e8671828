// The deterministic, pre-signed bench corpus (v2): a realistic mix of Nostr events.
//
// Event i is a pure function of (CORPUS_SEED, i) — and of events 0..i-1, which are themselves such
// functions: replies, reactions and reposts point at earlier notes, replaceable events republish
// earlier versions. Signatures are deterministic too: BIP-340 with aux_rand32 = sha256(seed:aux:i),
// signed by libsecp256k1 through bun:ffi when it loads, else by @noble/curves (same bytes either
// way; see lib/sign.ts). So the corpus of n events is the first n events of any bigger corpus,
// and every machine builds the same file.
//
// Mix (shares of events; see README.md for details):
//   kind 1      55 %  notes: 20–600 chars, some unicode; 35 % replies (NIP-10 e root/reply + p tags),
//                     hashtags from 500 topics (Zipf), some p mentions
//   kind 7      25 %  reactions to an earlier note: e + p (+ k) tags, "+" or an emoji
//   kind 6       7 %  reposts: e + p tags, content = the reposted note's JSON (75 %) or empty
//   kind 0       4 %  profiles (replaceable): authors republish with a newer created_at
//   kind 3       6 %  follow lists (replaceable): 20–300 p tags (Zipf), each version edits the last
//   kind 30023   3 %  long-form articles (addressable, d tag), some edited under the same d
// Authors: 5,000 keys, activity Zipf (s = 1: author 0 writes ~11 % of the events); targets of
// replies/reactions/reposts are recent notes, and "hot" notes of the most active authors collect
// threads. created_at = BASE + ⌊i/3⌋ (ties everywhere), except that 3 % of republished replaceable
// / addressable events reuse the previous version's created_at, so the lowest-id rule decides.
//
// The signed corpus is cached in bench/out/corpus-v2-<n>.jsonl (+ .meta.json); a bigger cache is
// read as a prefix. Generation streams lines to the file; ~40 µs per event with libsecp256k1.
//
//   npx bun bench/corpus.ts [--events 200000] [--stats]     build (or check) the cache and print its path
import { createHash } from "node:crypto";
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { NostrEvent } from "../src/protocol/event.ts";
import { createSigner, nobleSigner, verifySignature, type Signer, type SigningKey } from "./lib/sign.ts";

/** Change CORPUS_VERSION whenever the generator changes: the events change with it, and old caches are not reused. */
export const CORPUS_VERSION = "v2";
export const CORPUS_SEED = `bunstr-bench-corpus-${CORPUS_VERSION}`;
/** Distinct authors (secret keys). */
export const AUTHORS = 5000;
/** Distinct hashtag (`t` tag) values. */
export const TOPICS = 500;
/** created_at of event 0; event i has BASE + ⌊i/3⌋ (except tied republications, see above). */
export const BASE_CREATED_AT = 1_700_000_000;
export const DEFAULT_EVENTS = 200_000;

export const OUT_DIR = join(import.meta.dir, "out");

export type BenchEvent = NostrEvent;

/** The corpus as JSON lines (one event each, as sent in ["EVENT", …]). Parsed events are not kept: see event(i). */
export interface Corpus {
  /** Number of events. */
  size: number;
  /** Event i as the JSON text of the cache file. */
  lines: string[];
  /** Event id -> index. */
  byId: Map<string, number>;
  /** The file the lines came from. */
  path: string;
  /** True when this call generated (signed) the events; false: read from a cache. */
  generated: boolean;
  /** Time spent generating or loading. */
  seconds: number;
  /** Event i, parsed (a new object on every call). */
  event(i: number): BenchEvent;
  /** The id of event i. */
  id(i: number): string;
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

// ---- word material ----

const WORDS = (
  "the a to of and in is it you that for on with this be are not have just was but so what like at " +
  "from they we my your all can if about out one get more will or there would some no people how when " +
  "time good day now think really know see still want new make today going love back first much need " +
  "right way work well great also thanks over because something even only life world year still never " +
  "better here thing feel free sure maybe nice after again keep last same open coffee morning night " +
  "weekend music book movie game photo walk dog cat garden rain sun winter summer city train bike code " +
  "build ship test bug fix release server relay client key note zap sats node wallet lightning bitcoin " +
  "nostr protocol network censorship freedom privacy signal message post thread reply follow feed " +
  "profile article draft idea question answer problem solution update version design simple fast " +
  "slow small big old young happy tired busy quiet loud early late long short hard easy cheap"
).split(" ");
const UNICODE_BITS = [
  "café",
  "naïve",
  "Grüße",
  "über",
  "señor",
  "façade",
  "ñandú",
  "½",
  "€",
  "…",
  "—",
  "→",
  "✓",
  "😀",
  "🚀",
  "🔥",
  "💜",
  "⚡",
  "🤙",
  "🫂",
  "🌍",
  "🧡",
  "🎉",
  "👀",
  "🙏",
  "☕",
  "你好",
  "世界",
  "日本語",
  "テスト",
  "привет",
  "мир",
  "مرحبا",
  "שלום",
  "γειά",
  "नमस्ते",
  "안녕하세요",
];
const REACTIONS = ["❤️", "🤙", "🔥", "😂", "👍", "🫂", "⚡", "💜", "🙏", "👀", "🚀", "😍", "🧡", "-"];
const TOPIC_BASE = (
  "nostr bitcoin lightning zaps photography art music books movies gaming coding rust typescript " +
  "linux privacy freedom news politics economics science space physics math ai design food cooking " +
  "coffee tea travel hiking running cycling fitness health meditation philosophy history memes " +
  "dogs cats nature garden weather climate energy cars football basketball tennis chess anime " +
  "comics poetry writing journalism education parenting family jobs startups finance crypto " +
  "self-hosting homelab opensource security hardware 3dprinting diy woodworking fashion " +
  "architecture cities nyc london berlin tokyo paris asknostr introductions grownostr plebchain " +
  "foodstr catstr dogstr bookstr musicstr artstr devstr gm gn zapathon nostrdesign relays"
).split(" ");

/** The TOPICS hashtag values: real-looking topics, then pairs of them, a few non-ASCII. */
export const TOPIC_NAMES: readonly string[] = (() => {
  const out: string[] = [];
  const seen = new Set<string>();
  const add = (t: string) => !seen.has(t) && (seen.add(t), out.push(t));
  for (const t of TOPIC_BASE) add(t);
  const b = TOPIC_BASE.length;
  for (let k = 0; out.length < TOPICS; k++)
    if (k % b !== Math.floor(k / b) % b) add(`${TOPIC_BASE[k % b]}${TOPIC_BASE[(Math.floor(k / b) * 7 + 3) % b]}`);
  out[137] = "日本";
  out[211] = "café";
  out[333] = "привет";
  return out;
})();

// ---- deterministic randomness ----

/** sfc32 seeded from 16 bytes of a hash. */
class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;
  constructor(h: Uint8Array) {
    const v = new DataView(h.buffer, h.byteOffset, 16);
    this.a = v.getUint32(0);
    this.b = v.getUint32(4);
    this.c = v.getUint32(8);
    this.d = v.getUint32(12);
    for (let k = 0; k < 8; k++) this.u32();
  }
  u32(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }
  /** [0, 1) */
  u(): number {
    return this.u32() / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.u() * n);
  }
  chance(p: number): boolean {
    return this.u() < p;
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)]!;
  }
}

/** Zipf over [0, n): P(k) ∝ 1/(k+1)^s, sampled by binary search over the CDF. */
class Zipf {
  private readonly cdf: Float64Array;
  constructor(n: number, s: number) {
    this.cdf = new Float64Array(n);
    let sum = 0;
    for (let k = 0; k < n; k++) this.cdf[k] = sum += 1 / Math.pow(k + 1, s);
    for (let k = 0; k < n; k++) this.cdf[k]! /= sum;
  }
  sample(rng: Rng): number {
    const u = rng.u();
    let lo = 0;
    let hi = this.cdf.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.cdf[mid]! > u) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }
}

// ---- the generator ----

/** Kind shares, cumulative. */
const KIND_CDF: [kind: number, upTo: number][] = [
  [1, 0.55],
  [7, 0.8],
  [6, 0.87],
  [0, 0.91],
  [3, 0.97],
  [30023, 1],
];
const RECENT = 4096;
const HOT = 256;
/** Share of republications that reuse the previous version's created_at (a tie the lowest id decides). */
const TIE_SHARE = 0.03;

interface NoteRef {
  id: string;
  pubkey: string;
  /** The note's JSON line (a repost's content). */
  json: string;
  /** The thread root, for replies. */
  root?: { id: string; pubkey: string };
}

interface Article {
  d: string;
  title: string;
  publishedAt: number;
  lastCreatedAt: number;
}

/** Produces the corpus event by event: next() returns event i's JSON line, i = 0, 1, 2, … */
export class CorpusGenerator {
  /** Index of the next event. */
  i = 0;
  readonly signer: Signer;
  private readonly keys: SigningKey[] = [];
  readonly pubkeys: string[] = [];
  private readonly activity = new Zipf(AUTHORS, 1.0);
  private readonly republishers = new Zipf(AUTHORS, 0.7);
  private readonly topics = new Zipf(TOPICS, 1.1);
  private readonly recent: NoteRef[] = [];
  private recentHead = 0;
  private readonly hot: NoteRef[] = [];
  private hotHead = 0;
  private readonly profileVersion = new Int32Array(AUTHORS);
  private readonly profileAt = new Float64Array(AUTHORS);
  private readonly follows: (number[] | undefined)[] = new Array(AUTHORS);
  private readonly followsAt = new Float64Array(AUTHORS);
  private readonly articles: Article[][] = Array.from({ length: AUTHORS }, () => []);

  constructor(signer: Signer = createSigner()) {
    this.signer = signer;
    for (let a = 0; a < AUTHORS; a++) {
      const key = signer.key(authorSecretKey(a));
      this.keys.push(key);
      this.pubkeys.push(key.publicKey.toHex());
    }
  }

  next(): string {
    const i = this.i++;
    const rng = new Rng(sha256(`${CORPUS_SEED}:event:${i}`));
    const now = BASE_CREATED_AT + Math.floor(i / 3);
    const r = rng.u();
    let kind = KIND_CDF.find(([, upTo]) => r < upTo)![0];
    if ((kind === 6 || kind === 7) && this.recent.length === 0) kind = 1;
    let author: number;
    let createdAt = now;
    let tags: string[][];
    let content: string;
    switch (kind) {
      case 0: {
        author = this.republishers.sample(rng);
        const v = ++this.profileVersion[author]!;
        if (v > 1 && rng.chance(TIE_SHARE)) createdAt = this.profileAt[author]!;
        this.profileAt[author] = createdAt;
        tags = [];
        content = this.profile(rng, author, v);
        break;
      }
      case 3: {
        author = this.republishers.sample(rng);
        const prev = this.follows[author];
        if (prev && rng.chance(TIE_SHARE)) createdAt = this.followsAt[author]!;
        this.followsAt[author] = createdAt;
        const list = this.followList(rng, author, prev);
        this.follows[author] = list;
        tags = list.map((f) => (rng.chance(0.1) ? ["p", this.pubkeys[f]!, `wss://relay${f % 7}.bench.example`] : ["p", this.pubkeys[f]!]));
        content =
          author % 5 === 0
            ? JSON.stringify({
                "wss://relay.bench.example": { read: true, write: true },
                [`wss://relay${author % 7}.bench.example`]: { read: true, write: false },
              })
            : "";
        break;
      }
      case 30023: {
        author = this.activity.sample(rng);
        const mine = this.articles[author]!;
        let art: Article;
        if (mine.length > 0 && rng.chance(0.35)) {
          art = rng.pick(mine);
          if (rng.chance(TIE_SHARE)) createdAt = art.lastCreatedAt;
        } else {
          const title = this.words(rng, 3 + rng.int(6), false);
          const d = `${title
            .toLowerCase()
            .replace(/[^a-z0-9]+/g, "-")
            .replace(/^-|-$/g, "")}-${mine.length}`;
          art = { d, title: title[0]!.toUpperCase() + title.slice(1), publishedAt: now, lastCreatedAt: now };
          mine.push(art);
        }
        art.lastCreatedAt = createdAt;
        tags = [
          ["d", art.d],
          ["title", art.title],
          ["summary", this.words(rng, 8 + rng.int(20), true)],
          ["published_at", String(art.publishedAt)],
        ];
        for (const t of this.pickTopics(rng, 1 + rng.int(4))) tags.push(["t", t]);
        content = this.article(rng, art.title, 500 + Math.floor(5500 * rng.u() ** 2));
        break;
      }
      case 7: {
        author = this.activity.sample(rng);
        const target = this.target(rng);
        tags = [
          ["e", target.id],
          ["p", target.pubkey],
          ["k", "1"],
        ];
        content = rng.chance(0.7) ? "+" : rng.pick(REACTIONS);
        break;
      }
      case 6: {
        author = this.activity.sample(rng);
        const target = this.target(rng);
        tags = [
          ["e", target.id, "wss://relay.bench.example"],
          ["p", target.pubkey],
        ];
        content = rng.chance(0.75) ? target.json : "";
        break;
      }
      default: {
        author = this.activity.sample(rng);
        tags = [];
        let root: NoteRef["root"];
        if (this.recent.length > 0 && rng.chance(0.35)) {
          const parent = this.target(rng);
          root = parent.root ?? { id: parent.id, pubkey: parent.pubkey };
          tags.push(["e", root.id, "", "root"]);
          if (parent.root) tags.push(["e", parent.id, "", "reply"]);
          tags.push(["p", root.pubkey]);
          if (parent.pubkey !== root.pubkey) tags.push(["p", parent.pubkey]);
        }
        if (rng.chance(0.08)) tags.push(["p", this.pubkeys[this.activity.sample(rng)]!]);
        const h = rng.u();
        const topics = this.pickTopics(rng, h < 0.55 ? 0 : h < 0.8 ? 1 : h < 0.92 ? 2 : 3);
        for (const t of topics) tags.push(["t", t]);
        content = this.note(rng, 20 + Math.floor(580 * rng.u() ** 2.5), topics);
        const line = this.sign(i, author, createdAt, kind, tags, content);
        const ref: NoteRef = { id: line.slice(7, 71), pubkey: this.pubkeys[author]!, json: line, root };
        this.recent[this.recentHead] = ref;
        this.recentHead = (this.recentHead + 1) % RECENT;
        if (!root && (author < 50 ? rng.chance(0.5) : rng.chance(0.02))) {
          this.hot[this.hotHead] = ref;
          this.hotHead = (this.hotHead + 1) % HOT;
        }
        return line;
      }
    }
    return this.sign(i, author, createdAt, kind, tags, content);
  }

  /** Id, signature, JSON line (id first: `{"id":"<64 hex>",…`). */
  private sign(i: number, author: number, created_at: number, kind: number, tags: string[][], content: string): string {
    const pubkey = this.pubkeys[author]!;
    const msg = sha256(JSON.stringify([0, pubkey, created_at, kind, tags, content]));
    const sig = this.keys[author]!.sign(msg, sha256(`${CORPUS_SEED}:aux:${i}`));
    return JSON.stringify({ id: msg.toString("hex"), pubkey, created_at, kind, tags, content, sig: sig.toHex() });
  }

  /** A note to reply to, react to or repost: a hot one (35 %) or a recent one, newer more likely. */
  private target(rng: Rng): NoteRef {
    if (this.hot.length > 0 && rng.chance(0.35)) return rng.pick(this.hot);
    const n = this.recent.length;
    const back = Math.floor(n * rng.u() ** 3);
    return this.recent[((this.recentHead - 1 - back + 2 * RECENT) % RECENT) % n]!;
  }

  private pickTopics(rng: Rng, k: number): string[] {
    const out: string[] = [];
    for (let tries = 0; out.length < k && tries < 20; tries++) {
      const t = TOPIC_NAMES[this.topics.sample(rng)]!;
      if (!out.includes(t)) out.push(t);
    }
    return out;
  }

  /** `n` words, with non-ASCII now and then when `unicode`. */
  private words(rng: Rng, n: number, unicode: boolean): string {
    const out: string[] = [];
    for (let w = 0; w < n; w++) out.push(unicode && rng.chance(0.08) ? rng.pick(UNICODE_BITS) : rng.pick(WORDS));
    return out.join(" ");
  }

  private note(rng: Rng, length: number, topics: string[]): string {
    const unicode = rng.chance(0.2);
    const lines = rng.chance(0.15);
    let s = "";
    while (s.length < length) {
      let sentence = this.words(rng, 3 + rng.int(12), unicode);
      sentence = sentence[0]!.toUpperCase() + sentence.slice(1) + rng.pick([".", ".", ".", "!", "?", "...", ""]);
      s += (s ? (lines && rng.chance(0.3) ? "\n\n" : " ") : "") + sentence;
    }
    if (rng.chance(0.1)) s += ` https://media.bench.example/${rng.u32().toString(16)}.jpg`;
    for (const t of topics) s += ` #${t}`;
    if (s.length > 600) {
      s = s.slice(0, 600);
      const cut = s.lastIndexOf(" ");
      s = s.slice(0, cut > 20 ? cut : 600);
      if (/[\ud800-\udbff]$/.test(s)) s = s.slice(0, -1); // never leave half a surrogate pair
    }
    return s;
  }

  private article(rng: Rng, title: string, length: number): string {
    let s = `# ${title}\n\n`;
    while (s.length < length) {
      if (rng.chance(0.15)) s += `## ${this.words(rng, 2 + rng.int(4), false)}\n\n`;
      const sentences: string[] = [];
      for (let k = 2 + rng.int(6); k > 0; k--) {
        const w = this.words(rng, 5 + rng.int(15), true);
        sentences.push(w[0]!.toUpperCase() + w.slice(1) + ".");
      }
      s += sentences.join(" ") + "\n\n";
    }
    return s.trimEnd();
  }

  private profile(rng: Rng, author: number, version: number): string {
    const name = `${rng.pick(WORDS)}${rng.pick(WORDS)}${author}`;
    return JSON.stringify({
      name,
      display_name: `${name[0]!.toUpperCase()}${name.slice(1)}${rng.chance(0.2) ? ` ${rng.pick(UNICODE_BITS)}` : ""}`,
      about: `${this.words(rng, 5 + rng.int(40), true)} (v${version})`,
      picture: `https://media.bench.example/avatar/${author}-${version}.png`,
      nip05: `${name}@bench.example`,
      lud16: `${name}@wallet.bench.example`,
      website: rng.chance(0.3) ? `https://${name}.bench.example` : undefined,
    });
  }

  /** First version: 20–300 followees (Zipf); later versions drop 0–3 and add 1–10. */
  private followList(rng: Rng, author: number, prev: number[] | undefined): number[] {
    let list: number[];
    let add: number;
    if (!prev) {
      list = [];
      add = 20 + Math.floor(280 * rng.u() ** 3);
    } else {
      list = prev.slice();
      for (let k = rng.int(4); k > 0 && list.length > 20; k--) list.splice(rng.int(list.length), 1);
      add = Math.min(1 + rng.int(10), 300 - list.length);
    }
    const have = new Set(list);
    for (let tries = 0; add > 0 && tries < 20_000; tries++) {
      const f = this.activity.sample(rng);
      if (f === author || have.has(f)) continue;
      have.add(f);
      list.push(f);
      add--;
    }
    return list;
  }
}

// ---- cache ----

const FILE_PREFIX = `corpus-${CORPUS_VERSION}-`;
export const corpusPath = (n: number): string => join(OUT_DIR, `${FILE_PREFIX}${n}.jsonl`);
const metaPath = (path: string) => `${path.slice(0, -".jsonl".length)}.meta.json`;

interface Meta {
  seed: string;
  events: number;
  bytes: number;
  lastId: string;
  signer: string;
}

/** The id of an event line written by the generator (`{"id":"<64 hex>",…`), else parsed. */
export function lineId(line: string): string {
  return line.startsWith('{"id":"') ? line.slice(7, 71) : (JSON.parse(line) as BenchEvent).id;
}

const HEAD = /^\{"id":"([0-9a-f]{64})","pubkey":"([0-9a-f]{64})","created_at":(\d+),"kind":(\d+),/;

/**
 * id, pubkey, created_at and kind of an event line as the generator writes it, read from its
 * first ~170 characters without parsing the rest (a follow list takes ~100 µs to parse); undefined
 * for a line in another shape.
 */
export function lineHead(line: string): { id: string; pubkey: string; created_at: number; kind: number } | undefined {
  const m = HEAD.exec(line.slice(0, 200));
  return m ? { id: m[1]!, pubkey: m[2]!, created_at: Number(m[3]), kind: Number(m[4]) } : undefined;
}

/** Lines 0..max-1 of a JSON-lines file, read in chunks (no whole-file string). */
export function* readLines(path: string, max = Infinity): Generator<string> {
  const fd = openSync(path, "r");
  try {
    const chunk = Buffer.allocUnsafe(8 << 20);
    const utf8 = new TextDecoder(); // several times faster than Buffer.toString per line
    let carry = Buffer.alloc(0);
    let count = 0;
    for (;;) {
      const got = readSync(fd, chunk, 0, chunk.length, null);
      if (got === 0) break;
      const buf = carry.length ? Buffer.concat([carry, chunk.subarray(0, got)]) : chunk.subarray(0, got);
      let start = 0;
      for (let nl = buf.indexOf(10, start); nl !== -1; nl = buf.indexOf(10, start)) {
        if (nl > start) {
          yield utf8.decode(buf.subarray(start, nl));
          if (++count >= max) return;
        }
        start = nl + 1;
      }
      carry = Buffer.from(buf.subarray(start));
    }
    if (carry.length && count < max) yield utf8.decode(carry);
  } finally {
    closeSync(fd);
  }
}

/** A cache file holding at least n events of this corpus version, with its meta; the smallest such. */
function findCache(n: number): string | undefined {
  if (!existsSync(OUT_DIR)) return undefined;
  const sizes = readdirSync(OUT_DIR)
    .map((f) => new RegExp(`^${FILE_PREFIX}(\\d+)\\.jsonl$`).exec(f))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .filter((m) => m >= n)
    .sort((a, b) => a - b);
  for (const m of sizes) {
    const path = corpusPath(m);
    try {
      const meta = JSON.parse(readFileSync(metaPath(path), "utf8")) as Meta;
      if (meta.seed === CORPUS_SEED && meta.events === m && statSync(path).size === meta.bytes) return path;
    } catch {
      // no meta (an interrupted run): not trusted
    }
  }
  return undefined;
}

/** Recomputes id and checks the signature with noble: throws on a bad event. */
function checkSignature(e: BenchEvent, where: string): void {
  const id = sha256(JSON.stringify([0, e.pubkey, e.created_at, e.kind, e.tags, e.content])).toString("hex");
  if (id !== e.id) throw new Error(`${where}: id ${e.id} does not match its content (${id})`);
  if (!verifySignature(Buffer.from(e.sig, "hex"), Buffer.from(e.id, "hex"), Buffer.from(e.pubkey, "hex")))
    throw new Error(`${where}: the signature of ${e.id} does not verify`);
}

/** Indexes of `count` spread samples out of n (always 0 and n-1). */
const samples = (n: number, count: number): number[] => [
  ...new Set(Array.from({ length: count }, (_, k) => Math.floor((k * (n - 1)) / Math.max(1, count - 1)))),
];

/**
 * Generates n events into `path` (streamed, via a temp file), returns the lines. Checks as it
 * goes: the native signer's output equals noble's on a few events, and noble verifies a sample.
 */
function generate(n: number, path: string, log: (msg: string) => void): string[] {
  const signer = createSigner();
  const gen = new CorpusGenerator(signer);
  const noble = signer.backend === "native" ? nobleSigner() : undefined;
  const compareAt = new Set([0, 1, 2, 3, 4, 5, 6, 7, ...samples(n, 8)]);
  const verifyAt = new Set(samples(n, Math.min(200, n)));
  log(`corpus: generating ${n} events with the ${signer.backend} signer (one time; cached in ${path}) …`);
  mkdirSync(OUT_DIR, { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  const fd = openSync(tmp, "w");
  const lines: string[] = new Array(n);
  let bytes = 0;
  try {
    let pending: string[] = [];
    let pendingChars = 0;
    const flush = () => {
      if (!pending.length) return;
      const buf = Buffer.from(pending.join("\n") + "\n", "utf8");
      writeSync(fd, buf);
      bytes += buf.length;
      pending = [];
      pendingChars = 0;
    };
    const t0 = performance.now();
    let lastLog = t0;
    for (let i = 0; i < n; i++) {
      const line = gen.next();
      lines[i] = line;
      pending.push(line);
      pendingChars += line.length;
      if (pendingChars > 4 << 20) flush();
      if (compareAt.has(i) || verifyAt.has(i)) {
        const e = JSON.parse(line) as BenchEvent;
        checkSignature(e, `corpus event ${i}`);
        if (noble && compareAt.has(i)) {
          const author = gen.pubkeys.indexOf(e.pubkey);
          const sig = noble.key(authorSecretKey(author)).sign(Buffer.from(e.id, "hex"), sha256(`${CORPUS_SEED}:aux:${i}`));
          if (sig.toHex() !== e.sig)
            throw new Error(`corpus event ${i}: libsecp256k1 and noble signatures differ (${e.sig} vs ${sig.toHex()})`);
        }
      }
      const now = performance.now();
      if (now - lastLog > 5000) {
        lastLog = now;
        const rate = (i + 1) / ((now - t0) / 1000);
        log(`corpus: ${i + 1}/${n} (${Math.round(rate)}/s, ~${Math.round((n - i - 1) / rate)}s left)`);
      }
    }
    flush();
  } catch (err) {
    closeSync(fd);
    rmSync(tmp, { force: true });
    throw err;
  }
  closeSync(fd);
  renameSync(tmp, path);
  const meta: Meta = { seed: CORPUS_SEED, events: n, bytes, lastId: lineId(lines[n - 1]!), signer: signer.backend };
  writeFileSync(metaPath(path), JSON.stringify(meta) + "\n");
  return lines;
}

/** Checks cached lines against the generator: the first events byte for byte, a sample by id and signature. Returns what is wrong. */
function checkCache(lines: string[]): string | undefined {
  const gen = new CorpusGenerator();
  const head = Math.min(lines.length, 64);
  for (let i = 0; i < head; i++)
    if (lines[i] !== gen.next())
      return `event ${i} differs from what the generator produces now (was CORPUS_VERSION not bumped after a change?)`;
  try {
    for (const i of samples(lines.length, Math.min(16, lines.length))) checkSignature(JSON.parse(lines[i]!) as BenchEvent, `event ${i}`);
  } catch (err) {
    return (err as Error).message;
  }
  return undefined;
}

/** The corpus of `n` events: from a cache in bench/out (this size or a bigger one), or generated now and cached. */
export function loadCorpus(n: number = DEFAULT_EVENTS, log: (msg: string) => void = () => {}): Corpus {
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`corpus size must be a positive integer, got ${n}`);
  const t0 = performance.now();
  let lines: string[] | undefined;
  let generated = false;
  let path: string | undefined;
  for (let cache = findCache(n); cache && !lines; cache = findCache(n)) {
    log(`corpus: reading ${n} events from ${cache}`);
    const read: string[] = new Array(n);
    let i = 0;
    for (const line of readLines(cache, n)) read[i++] = line;
    const wrong = i !== n ? `${i} lines, expected ${n}` : checkCache(read);
    if (wrong) {
      log(`corpus: the cache ${cache} is not usable (${wrong}); deleting it`);
      rmSync(cache, { force: true });
      rmSync(metaPath(cache), { force: true });
    } else (lines = read), (path = cache);
  }
  if (!lines || !path) {
    path = corpusPath(n);
    lines = generate(n, path, log);
    generated = true;
  }
  const all = lines;
  const byId = new Map<string, number>();
  for (let i = 0; i < n; i++) byId.set(lineId(all[i]!), i);
  if (byId.size !== n) throw new Error(`corpus ${path} has duplicate ids`);
  return {
    size: n,
    lines: all,
    byId,
    path,
    generated,
    seconds: (performance.now() - t0) / 1000,
    event: (i) => JSON.parse(all[i]!) as BenchEvent,
    id: (i) => lineId(all[i]!),
  };
}

/** Counts for `--stats` and the README. */
export function corpusStats(c: Corpus): Record<string, unknown> {
  const kinds = new Map<number, number>();
  const authors = new Set<string>();
  const topics = new Set<string>();
  let bytes = 0;
  let replies = 0;
  let unicode = 0;
  let maxTags = 0;
  const noteLengths: number[] = [];
  for (let i = 0; i < c.size; i++) {
    const e = c.event(i);
    bytes += Buffer.byteLength(c.lines[i]!);
    kinds.set(e.kind, (kinds.get(e.kind) ?? 0) + 1);
    authors.add(e.pubkey);
    maxTags = Math.max(maxTags, e.tags.length);
    for (const t of e.tags) if (t[0] === "t") topics.add(t[1]!);
    if (e.kind === 1) {
      noteLengths.push(e.content.length);
      if (e.tags.some((t) => t[0] === "e")) replies++;
      if (/[^\x00-\x7f]/.test(e.content)) unicode++;
    }
  }
  noteLengths.sort((a, b) => a - b);
  return {
    events: c.size,
    bytes,
    bytesPerEvent: Math.round(bytes / c.size),
    kinds: Object.fromEntries([...kinds].sort((a, b) => a[0] - b[0]).map(([k, v]) => [k, `${v} (${((v / c.size) * 100).toFixed(1)} %)`])),
    authors: authors.size,
    topics: topics.size,
    notes: { replies, nonAscii: unicode, lengthP50: noteLengths[noteLengths.length >> 1], lengthMax: noteLengths[noteLengths.length - 1] },
    maxTags,
  };
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: { events: { type: "string", default: String(DEFAULT_EVENTS) }, stats: { type: "boolean", default: false } },
    strict: true,
  });
  const c = loadCorpus(Number(values.events), (m) => console.error(m));
  console.log(`${c.path}: ${c.size} events, ${c.generated ? "generated" : "read from the cache"} in ${c.seconds.toFixed(1)}s`);
  if (values.stats) console.log(JSON.stringify(corpusStats(c), null, 2));
}
