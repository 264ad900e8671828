// Events for the operations tests and measurements, made fast: a correct id and a dummy
// signature (for --no-verify), or really signed (@noble/curves, ~1 ms each) for the verified path.
// A mix like a relay's: mostly notes with e/p/t tags, reactions, reposts, profiles and follow
// lists (replaceable, several versions each), long-form articles (addressable).
//
//   bun test/ops-gen.ts 1000000 /tmp/events.jsonl           # unsigned, ~10 s
//   bun test/ops-gen.ts 20000 /tmp/signed.jsonl --signed     # signed
import { schnorr } from "@noble/curves/secp256k1.js";
import { createHash, randomBytes } from "node:crypto";
import type { NostrEvent } from "../src/protocol/event.ts";
import { prng } from "../bench/lib/stats.ts";

const DUMMY_SIG = "0".repeat(128);
const YEAR = 365 * 86400;
const WORDS =
  "the relay nostr event bitcoin coffee morning build ship test note zap lightning key sign verify sqlite bun fast slow city river music book garden".split(
    " ",
  );

const sha256 = (s: string) => createHash("sha256").update(s, "utf8").digest("hex");

export interface GenOptions {
  /** Sign for real (slow) instead of a dummy signature. */
  signed?: boolean;
  /** Distinct authors. */
  authors?: number;
  seed?: number;
  /** created_at of the newest event; events spread over the year before it, in roughly rising order (as an export lists them). */
  now?: number;
}

export function* generateEvents(n: number, opts: GenOptions = {}): Generator<NostrEvent> {
  const rand = prng(opts.seed ?? 1);
  const pick = <T>(a: readonly T[]): T => a[Math.floor(rand() * a.length)]!;
  const nAuthors = opts.authors ?? Math.max(10, Math.min(20_000, Math.floor(n / 50)));
  const keys = Array.from({ length: nAuthors }, () => {
    const sk = opts.signed ? schnorr.utils.randomSecretKey() : undefined;
    return { sk, pubkey: sk ? Buffer.from(schnorr.getPublicKey(sk)).toString("hex") : randomBytes(32).toString("hex") };
  });
  const now = opts.now ?? Math.floor(Date.now() / 1000) - 60;
  const recent: string[] = [];
  for (let i = 0; i < n; i++) {
    const author = keys[Math.floor(rand() * keys.length)]!;
    const created_at = Math.min(now, now - YEAR + Math.floor((i / n) * YEAR) + Math.floor((rand() - 0.5) * 7200));
    const r = rand();
    let kind = 1;
    let tags: string[][] = [];
    let content = Array.from({ length: 5 + Math.floor(rand() * 25) }, () => pick(WORDS)).join(" ") + ` #${i}`;
    if (r < 0.7) {
      if (recent.length > 0 && rand() < 0.5) tags.push(["e", pick(recent)], ["p", pick(keys).pubkey]);
      if (rand() < 0.3) tags.push(["t", pick(WORDS)]);
    } else if (r < 0.85) {
      kind = 7;
      content = "+";
      tags =
        recent.length > 0
          ? [
              ["e", pick(recent)],
              ["p", pick(keys).pubkey],
            ]
          : [];
    } else if (r < 0.9) {
      kind = 6;
      tags = recent.length > 0 ? [["e", pick(recent)]] : [];
    } else if (r < 0.95) {
      kind = rand() < 0.5 ? 0 : 3;
      content = kind === 0 ? JSON.stringify({ name: `user ${i}`, about: content }) : "";
      if (kind === 3) tags = Array.from({ length: 1 + Math.floor(rand() * 20) }, () => ["p", pick(keys).pubkey]);
    } else {
      kind = 30023;
      tags = [
        ["d", `article-${Math.floor(rand() * 5)}`],
        ["title", `Article ${i}`],
      ];
      content = content.repeat(4);
    }
    const id = sha256(JSON.stringify([0, author.pubkey, created_at, kind, tags, content]));
    const sig = author.sk ? Buffer.from(schnorr.sign(Buffer.from(id, "hex"), author.sk)).toString("hex") : DUMMY_SIG;
    if (recent.length < 1000) recent.push(id);
    else recent[i % 1000] = id;
    yield { id, pubkey: author.pubkey, created_at, kind, tags, content, sig };
  }
}

/** Writes `n` events as JSON lines; returns the file's size. */
export async function writeEventsFile(path: string, n: number, opts: GenOptions = {}): Promise<number> {
  const sink = Bun.file(path).writer();
  let size = 0;
  let buf = "";
  for (const e of generateEvents(n, opts)) {
    buf += `${JSON.stringify(e)}\n`;
    if (buf.length > 1 << 20) {
      size += await sink.write(buf);
      buf = "";
    }
  }
  size += await sink.write(buf);
  await sink.end();
  return size;
}

if (import.meta.main) {
  const [n, out, flag] = Bun.argv.slice(2);
  if (!n || !out) {
    console.error("usage: bun test/ops-gen.ts N OUT.jsonl [--signed]");
    process.exit(2);
  }
  const t0 = performance.now();
  const size = await writeEventsFile(out, Number(n), { signed: flag === "--signed" });
  console.error(`${n} events, ${(size / 1e6).toFixed(1)} MB in ${((performance.now() - t0) / 1000).toFixed(1)} s -> ${out}`);
}
