// The fuzzers' shared part: knobs, the seeded generator and the frame mutator (test/fuzz/*.test.ts).
// Frames start from well-formed seeds (a pool of signed events of every sort) and go through
// structural and textual mutations; every case has its own generator, derived from (seed, stage,
// case number), so one failing case can be regenerated alone.
//
// Stages: unit.test.ts (parser, filter compiler, validator; no relay), wire.test.ts (a live relay).
// Both:              npx bun test --timeout 30000 test/fuzz/
// Longer, locally:   FUZZ_SECONDS=300 npx bun test test/fuzz/      (each stage runs that long)
//                    FUZZ_CASES=200000 FUZZ_WIRE_FRAMES=50000 npx bun test test/fuzz/
// Reproduce:         FUZZ_SEED=<seed printed> (a failure names the stage, case number and frame);
//                    CI runs a fixed seed, a local run a fresh one.
import { createHash } from "node:crypto";
import { nip77 } from "nostr-tools";
import { finalizeEvent, getPublicKey } from "nostr-tools/pure";
import type { NostrEvent } from "../../src/protocol/event.ts";
import { inCI } from "../ci.ts";

// ---------------------------------------------------------------------------------------------
// Knobs

const envInt = (name: string): number | undefined => {
  const v = process.env[name];
  if (v === undefined || v === "") return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a non-negative number, got ${v}`);
  return Math.floor(n);
};
/** The seed CI runs with: a failure there replays exactly. */
const CI_SEED = 0x5eed2026;
/**
 * FUZZ_SEED if given; in CI (CI set) the fixed CI_SEED; locally a fresh one each run, so runs
 * cover new cases. Each stage prints it: FUZZ_SEED=<it> replays a failure.
 */
export const SEED = envInt("FUZZ_SEED") ?? (inCI ? CI_SEED : crypto.getRandomValues(new Uint32Array(1))[0]!);
export const SECONDS = envInt("FUZZ_SECONDS");
/** Unit-level cases; with FUZZ_SECONDS the stage runs that long instead (unless this is set too). */
export const UNIT_CASES = envInt("FUZZ_CASES") ?? (SECONDS ? Infinity : 25_000);
/** Wire frames over all connections (same rule). */
export const WIRE_FRAMES = envInt("FUZZ_WIRE_FRAMES") ?? (SECONDS ? Infinity : 20_000);
export const WIRE_CONNECTIONS = 4;
export const BATCH = 40;
/** A single parser / compiler / validator call slower than this is a hang. */
export const CALL_BUDGET_MS = 1500;
/** Every answer to a batch must be in within this. */
export const ANSWER_TIMEOUT_MS = 10_000;
/** Generous: about 0.5 ms per unit case and per wire frame is typical. */
export const testTimeout = (seconds: number | undefined, count: number) =>
  60_000 + (seconds !== undefined && count === Infinity ? seconds * 2000 : count * 3);

// Wire relay limits. 10,000-deep arrays (20 kB) are under max_message_bytes, so they get parsed.
export const MAX_MESSAGE = 32 * 1024;
export const MAX_SUBID = 64;
/**
 * server.ts: frames above max(4 x max_message_bytes, 1 MiB) are closed by Bun with 1009 (the README
 * says 4x; with max_message_bytes under 256 KiB the 1 MiB floor wins, and frames in between are
 * answered). The oracle expects the close only above this, and sends nothing in between.
 */
export const HARD_LIMIT = Math.min(Math.max(4 * MAX_MESSAGE, 1024 * 1024), 256 * 1024 * 1024);

// ---------------------------------------------------------------------------------------------
// Seeded randomness: every case has its own generator, derived from (seed, stage, case number),
// so one failing case can be regenerated alone.

export class Rng {
  private a: number;
  constructor(seed: number) {
    this.a = seed >>> 0;
  }
  next(): number {
    this.a = (this.a + 0x6d2b79f5) >>> 0;
    let t = this.a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  range(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)]!;
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
}
export const caseRng = (stage: number, i: number) =>
  new Rng(Math.imul(SEED ^ (stage * 0x9e3779b9), 0x85ebca6b) ^ Math.imul(i + 1, 0xc2b2ae35));

// ---------------------------------------------------------------------------------------------
// Frame trees: plain JSON values plus two markers serialized verbatim (number literals JSON.stringify
// cannot write, invalid escapes, raw control characters) and deep nesting without recursion.

class Raw {
  constructor(readonly text: string) {}
}
class Deep {
  constructor(
    readonly depth: number,
    readonly inner: unknown,
    readonly object = false,
  ) {}
}

class TooBig extends Error {}

/** JSON text of a frame tree; throws TooBig past `max` characters (mutations compound). */
export function serialize(v: unknown, max = Infinity): string {
  const out: string[] = [];
  let size = 0;
  const push = (...xs: string[]) => {
    for (const x of xs) size += x.length;
    if (size > max) throw new TooBig();
    out.push(...xs);
  };
  const walk = (x: unknown): void => {
    if (x instanceof Raw) push(x.text);
    else if (x instanceof Deep) {
      push((x.object ? '{"a":' : "[").repeat(x.depth));
      walk(x.inner);
      push((x.object ? "}" : "]").repeat(x.depth));
    } else if (Array.isArray(x)) {
      push("[");
      x.forEach((y, i) => {
        if (i) push(",");
        walk(y);
      });
      push("]");
    } else if (x !== null && typeof x === "object") {
      push("{");
      Object.entries(x).forEach(([k, y], i) => {
        if (i) push(",");
        push(JSON.stringify(k), ":");
        walk(y);
      });
      push("}");
    } else if (x === undefined) push("null");
    else push(JSON.stringify(x));
  };
  walk(v);
  return out.join("");
}

// ---------------------------------------------------------------------------------------------
// Edge values

const HEX = "0123456789abcdef";
const hexOf = (rng: Rng, n: number) =>
  n === 64
    ? rng
        .int(2 ** 32)
        .toString(16)
        .padStart(8, "0")
        .repeat(8)
    : Array.from({ length: n }, () => HEX[rng.int(16)]).join("");
const NUMBER_LITERALS = [
  "-1",
  "0",
  "-0",
  "1",
  "9007199254740991",
  "9007199254740992",
  "9007199254740993",
  "-9007199254740993",
  "1e308",
  "-1e308",
  "1e-7",
  "5e-324",
  "0.5",
  "1.0",
  "-0.0",
  "1e3",
  "1E3",
  "1e+3",
  "-1e3",
  "1e400",
  "-1e400",
  "123456789012345678901234567890",
  "65535",
  "65536",
  "4294967296",
  "18446744073709551616",
  "1.7976931348623157e308",
  "0.1e1",
  "2e0",
  // not JSON: must be refused as unparseable
  "NaN",
  "Infinity",
  "-Infinity",
  "0x10",
  ".5",
  "+1",
  "01",
  "1.",
  "1e",
  "--1",
  "1_000",
];
const NUMBERS = [
  -1,
  0,
  -0,
  1,
  2 ** 53,
  2 ** 53 + 2,
  -(2 ** 53),
  1e308,
  1e-7,
  0.5,
  1e3,
  65535,
  65536,
  2 ** 31,
  2 ** 32,
  1.5,
  Number.MAX_VALUE,
];
const STRINGS = [
  "",
  " ",
  "\u0000",
  "a\u0000b",
  "\ud800",
  "\udfff",
  "\udc00\ud800",
  "🎉",
  "👩‍👩‍👧‍👦",
  "\u202e",
  "\u200f",
  "\u200b",
  "\ufeff",
  "\\",
  "\\u",
  "\\u00",
  "\\uZZZZ",
  "\\ud800",
  '"',
  "'",
  "\n",
  "\r\n",
  "\t",
  "\u0001\u001f",
  "\u007f",
  "\u0085",
  "\u2028",
  "\u2029",
  "日本語",
  "é",
  "NaN",
  "Infinity",
  "-Infinity",
  "null",
  "true",
  "1e3",
  "-0",
  "123456789012345678901234567890",
  "#e",
  "#",
  "##",
  "#ee",
  "__proto__",
  "constructor",
  "toString",
  "hasOwnProperty",
  "REQ",
  "EVENT",
  "a".repeat(63),
  "a".repeat(64),
  "a".repeat(65),
  "a".repeat(257),
  "0".repeat(64),
  "f".repeat(64),
  "F".repeat(64),
  "0".repeat(63),
  "0".repeat(65),
  "g".repeat(64),
  "0".repeat(128),
  "x".repeat(2000),
  "ALL_RELAYS",
  "30023:",
  ":::",
  "1:2:3",
  "-",
  "nonce",
  "expiration",
  "delegation",
  '"; DROP TABLE events; --',
  "' OR 1=1 --",
  "NEAR(a b)",
  "a OR b",
  "*",
  "^",
  '"quoted"',
  "key:value",
  "%",
  "_",
  "😀".repeat(100),
];
/** Verbatim string tokens: invalid escapes and raw control characters make invalid JSON. */
const RAW_STRINGS = [
  '"\\uZZZZ"',
  '"\\ud800"',
  '"\\udc00\\ud800"',
  '"\\u0000"',
  '"\\x41"',
  '"\\"',
  '"\\u12"',
  '"a\u0001b"',
  '"\t"',
  '"\n"',
  '"\\/"',
  '"\\u00e9"',
  '"\\uD83C\\uDF89"',
  '"\\u0022"',
  '"\\\\"',
  '"\\u005c"',
  '"abc',
  "'single'",
  '"\u0000"',
  '"\\uDFFF\\uD800"',
];
const KEYS = [
  "ids",
  "authors",
  "kinds",
  "since",
  "until",
  "limit",
  "search",
  "#e",
  "#p",
  "#t",
  "#d",
  "#a",
  "#E",
  "#ee",
  "#",
  "",
  "__proto__",
  "constructor",
  "id",
  "pubkey",
  "created_at",
  "kind",
  "tags",
  "content",
  "sig",
  "count",
  "hll",
  "extra",
];

function edgeValue(rng: Rng, depth = 0): unknown {
  switch (rng.int(14)) {
    case 0:
    case 1:
      return new Raw(rng.pick(NUMBER_LITERALS));
    case 2:
      return rng.pick(NUMBERS);
    case 3:
    case 4:
    case 5:
      return rng.pick(STRINGS);
    case 6:
      return new Raw(rng.pick(RAW_STRINGS));
    case 7:
      return rng.pick([null, true, false, {}, [], [[]], [{}], { "": null }]);
    case 8:
      return hexOf(rng, rng.pick([64, 64, 63, 65, 128, 2, 0]));
    case 9:
      return new Deep(rng.pick([2, 50, 1000, 10_000]), rng.pick([null, 1, "x", []]), rng.chance(0.3));
    case 10:
      return depth > 2 ? null : Array.from({ length: rng.int(4) }, () => edgeValue(rng, depth + 1));
    case 11:
      return depth > 2 ? null : Object.fromEntries(Array.from({ length: rng.int(3) }, () => [rng.pick(KEYS), edgeValue(rng, depth + 1)]));
    case 12:
      return String.fromCodePoint(
        ...Array.from({ length: rng.range(1, 12) }, () =>
          rng.pick([rng.int(0x80), rng.int(0x800), 0xd800 + rng.int(0x800), rng.int(0x110000)]),
        ),
      );
    default:
      return rng.int(1000) - 10;
  }
}

// ---------------------------------------------------------------------------------------------
// Seeds: well-formed frames built from a pool of signed events

export interface Pool {
  /** Signed events of every sort, by the "special" keys (deletions, vanish, DMs, expirations, ...). */
  events: NostrEvent[];
  /** Plain kind-1 events of one key that nothing deletes: every acknowledged one must stay readable. */
  plain: NostrEvent[];
  plainPubkey: string;
  pubkeys: string[];
  auth: NostrEvent[];
  negInitial: string[];
}

export function buildPool(): Pool {
  const key = (i: number) => createHash("sha256").update(`bunstr-fuzz-${SEED}-${i}`).digest();
  const sks = [key(0), key(1), key(2)];
  const pubkeys = sks.map((sk) => getPublicKey(sk));
  const now = Math.floor(Date.now() / 1000);
  const sign = (sk: Uint8Array, kind: number, content: string, tags: string[][] = [], created_at = now): NostrEvent =>
    JSON.parse(JSON.stringify(finalizeEvent({ kind, content, tags, created_at }, sk))) as NostrEvent;

  const contents = [
    "",
    "hello fuzz",
    "\u0000",
    "a\u0001b\u001fc\u007f",
    "\ud800 lone",
    "🎉 日本語 é",
    "\u202e rtl",
    "a\\u0000b",
    'line\nquote"back\\',
    "x".repeat(5000),
    'NEAR(a b) OR "x" *',
  ];
  const plain = contents.map((c, i) =>
    sign(sks[0]!, 1, c, i % 2 ? [["t", "fuzz"], ["t", "\ud800"], ["x", ""], [""], ["e", pubkeys[1]!.repeat(1)]] : [], now - i),
  );
  const s = sks[1]!;
  const s2 = sks[2]!;
  const target = sign(s, 1, "to be deleted");
  const events = [
    target,
    sign(s, 5, "", [
      ["e", target.id],
      ["e", "0".repeat(64)],
      ["e", "zz"],
      ["a", `30023:${pubkeys[1]}:`],
      ["a", ":::"],
      ["a", "abc"],
      ["a", "1:2"],
      ["a", `30023:${"0".repeat(64)}:x`],
      ["k", "1"],
    ]),
    sign(s, 0, '{"name":"fuzz","about":"\\u0000"}'),
    sign(s, 3, "", [["p", pubkeys[0]!]]),
    sign(s, 10002, "", [["r", "wss://x"]]),
    sign(s, 30023, "addressable", [["d", ""]]),
    sign(s, 30023, "addressable", [
      ["d", "\ud800"],
      ["title", "\u0000"],
    ]),
    sign(s, 30023, "no d tag"),
    sign(s, 20001, "ephemeral"),
    sign(s, 22242, "", [
      ["relay", "ws://x"],
      ["challenge", "c"],
    ]),
    sign(s, 4, "dm?", [["p", pubkeys[0]!]]),
    sign(s, 1059, "wrap", [["p", pubkeys[0]!]]),
    sign(s, 1, "expires", [["expiration", "abc"]]),
    sign(s, 1, "expires", [["expiration", "1e3"]]),
    sign(s, 1, "expires", [["expiration", "-1"]]),
    sign(s, 1, "expires", [["expiration", "99999999999999999999"]]),
    sign(s, 1, "expired", [["expiration", String(now - 10)]]),
    sign(s, 1, "pow", [["nonce", "1", "abc"]]),
    sign(s, 1, "pow", [["nonce", "1", "300"]]),
    sign(s, 1, "protected", [["-"]]),
    sign(s, 6, JSON.stringify({ ...target, tags: [["-"]] }), [["e", target.id]]),
    sign(s, 1, "future", [], now + 100_000),
    sign(s, 1, "epoch", [], 0),
    sign(s, 65535, "max kind"),
    sign(s, 7, "+", [
      ["e", "not hex"],
      ["p", ""],
    ]),
    sign(
      s,
      1,
      "many tags",
      Array.from({ length: 150 }, (_, i) => ["t", `t${i}`]),
    ),
    sign(s, 1, "search me", [
      ["title", "search me"],
      ["subject", '"); DROP'],
    ]),
    sign(s2, 62, "vanish", [["relay", "ALL_RELAYS"]]),
    sign(s2, 62, "vanish", [["relay", "not a url"]]),
    sign(s2, 1, "after vanish"),
  ];
  const auth = [
    sign(s, 22242, "", [
      ["relay", "ws://127.0.0.1/"],
      ["challenge", "not the challenge"],
    ]),
    sign(s, 22242, "", []),
    sign(s, 1, "not auth"),
  ];
  const items = [...plain, ...events].map((e) => ({ created_at: e.created_at, id: e.id }));
  const storage = (xs: typeof items) => {
    const st = new nip77.NegentropyStorageVector();
    for (const it of xs) st.insert(it.created_at, it.id);
    st.seal();
    return st;
  };
  const negInitial = [
    new nip77.Negentropy(storage([])).initiate(),
    new nip77.Negentropy(storage(items)).initiate(),
    new nip77.Negentropy(storage(items.slice(0, 5)), 4096).initiate(),
  ];
  return { events, plain, plainPubkey: pubkeys[0]!, pubkeys, auth, negInitial };
}

export interface GenState {
  /** Fresh subscription ids. */
  nextId: () => string;
  /** Negentropy sessions known to be open (for NEG-MSG / NEG-CLOSE seeds). */
  openNeg: string[];
  /** Subscription ids that were answered (for CLOSE seeds). */
  doneSubs: string[];
}

function randomFilter(rng: Rng, pool: Pool): Record<string, unknown> {
  const f: Record<string, unknown> = {};
  const all = [...pool.plain, ...pool.events];
  const now = Math.floor(Date.now() / 1000);
  if (rng.chance(0.3)) f.ids = Array.from({ length: rng.range(1, 3) }, () => rng.pick(all).id);
  if (rng.chance(0.4)) f.authors = Array.from({ length: rng.range(1, 2) }, () => rng.pick(pool.pubkeys));
  if (rng.chance(0.5))
    f.kinds = Array.from({ length: rng.range(1, 3) }, () => rng.pick([0, 1, 3, 5, 6, 7, 62, 1059, 4, 30023, 10002, 20001, 65535]));
  if (rng.chance(0.2)) f.since = now - rng.int(100_000);
  if (rng.chance(0.2)) f.until = now + rng.int(1000) - 500;
  if (rng.chance(0.5)) f.limit = rng.pick([0, 1, 10, 100, 5000, 100_000]);
  if (rng.chance(0.2)) f["#t"] = [rng.pick(["fuzz", "t1", "\ud800", ""])];
  if (rng.chance(0.15)) f["#e"] = [rng.pick(all).id];
  if (rng.chance(0.1)) f["#d"] = [rng.pick(["", "\ud800", "x"])];
  if (rng.chance(0.15))
    f.search = rng.pick([
      "hello",
      "fuzz",
      "日本語",
      '"quoted"',
      "a OR b",
      "NEAR(a b)",
      "*",
      "key:value hello",
      "-",
      "^",
      "",
      "search me",
      "\ud800",
    ]);
  return f;
}

function seedFrame(rng: Rng, pool: Pool, st: GenState): unknown[] {
  const filters = () => Array.from({ length: rng.pick([1, 1, 1, 2, 3]) }, () => randomFilter(rng, pool));
  switch (rng.int(12)) {
    case 0:
    case 1:
      return ["EVENT", rng.chance(0.3) ? rng.pick(pool.plain) : rng.pick(pool.events)];
    case 2:
    case 3:
      return ["REQ", st.nextId(), ...filters()];
    case 4:
      return ["COUNT", st.nextId(), ...filters()];
    case 5:
      return ["CLOSE", st.doneSubs.length && rng.chance(0.5) ? rng.pick(st.doneSubs) : st.nextId()];
    case 6:
      return ["AUTH", rng.pick(pool.auth)];
    case 7:
    case 8:
      return ["NEG-OPEN", st.nextId(), randomFilter(rng, pool), rng.pick(pool.negInitial)];
    case 9:
      return [
        "NEG-MSG",
        st.openNeg.length && rng.chance(0.7) ? rng.pick(st.openNeg) : st.nextId(),
        rng.pick([
          ...pool.negInitial,
          "61",
          "",
          "6",
          "60",
          "62",
          hexOf(rng, 2 * rng.range(1, 40)),
          "61" + hexOf(rng, 2 * rng.range(1, 40)),
        ]),
      ];
    case 10:
      return ["NEG-CLOSE", st.openNeg.length && rng.chance(0.7) ? rng.pick(st.openNeg) : st.nextId()];
    default:
      return rng.pick<unknown[]>([
        [],
        ["EVENT"],
        ["FOO", 1],
        ["event", {}],
        ["REQ"],
        ["COUNT", st.nextId()],
        [null],
        [1, 2],
        ["EOSE", "x"],
        ["OK", "x", true, ""],
        ["NOTICE", "x"],
        ["CLOSED", "x", ""],
      ]);
  }
}

// ---------------------------------------------------------------------------------------------
// Mutations

interface Slot {
  parent: any;
  key: string | number;
}

function slots(root: any[]): Slot[] {
  const out: Slot[] = [];
  const walk = (parent: any, key: string | number, depth: number) => {
    if (out.length > 300) return;
    out.push({ parent, key });
    const v = parent[key];
    if (depth > 5 || v instanceof Raw || v instanceof Deep || v === null || typeof v !== "object") return;
    if (Array.isArray(v)) v.forEach((_, i) => walk(v, i, depth + 1));
    else for (const k of Object.keys(v)) walk(v, k, depth + 1);
  };
  walk(root, 0, 0);
  return out;
}

/** Sizes a string can be blown up to: empty, around max_message_bytes, a few times over it. */
const INFLATE = [0, 1, 100, 5_000, MAX_MESSAGE - 300, MAX_MESSAGE + 10, 2 * MAX_MESSAGE, 3 * MAX_MESSAGE + 100];

function mutateTree(rng: Rng, root: any[], unit: boolean): void {
  const all = slots(root);
  // The subscription id (and verb) of the top-level frame are picked more often than the rest.
  const top = all.filter((s) => s.parent === root[0]);
  // The whole frame (slot 0) is replaced now and then, not a third of the time for short frames.
  const inner = all.length > 1 && rng.chance(0.95) ? all.slice(1) : all;
  const { parent, key } = top.length && rng.chance(0.2) ? rng.pick(top.slice(0, 2)) : rng.pick(inner);
  const v = parent[key];
  switch (rng.int(11)) {
    case 0:
    case 1:
    case 2:
      parent[key] = edgeValue(rng);
      break;
    case 3: // delete
      if (Array.isArray(parent)) parent.splice(Number(key), 1);
      else delete parent[key];
      break;
    case 4: // insert
      if (Array.isArray(v)) v.splice(rng.int(v.length + 1), 0, edgeValue(rng));
      else if (v && typeof v === "object" && !(v instanceof Raw) && !(v instanceof Deep)) v[rng.pick(KEYS)] = edgeValue(rng);
      else parent[key] = [v, edgeValue(rng)];
      break;
    case 5: // array <-> object, wrap
      if (Array.isArray(v)) parent[key] = rng.chance(0.5) ? Object.fromEntries(v.map((x, i) => [String(i), x])) : [v];
      else if (v && typeof v === "object" && !(v instanceof Raw) && !(v instanceof Deep))
        parent[key] = rng.chance(0.5) ? Object.values(v) : [v];
      else parent[key] = rng.chance(0.5) ? [v] : { [rng.pick(KEYS)]: v };
      break;
    case 6: // change type
      if (typeof v === "number") parent[key] = rng.chance(0.5) ? String(v) : new Raw(rng.pick(NUMBER_LITERALS));
      else if (typeof v === "string")
        parent[key] = rng.chance(0.5) && v !== "" && !Number.isNaN(Number(v)) ? Number(v) : rng.pick([null, 0, [v], { v }]);
      else parent[key] = rng.pick([null, "", 0, -0, true]);
      break;
    case 7: // inflate a string
      parent[key] = (typeof v === "string" && v.length ? v : "x").padEnd(
        unit && rng.chance(0.02) ? 2_000_000 : rng.pick(INFLATE),
        rng.pick(["x", "é", "\u0000", "🎉", "\\"]),
      );
      break;
    case 8: // grow a list past max_filters / max_filter_values
      if (Array.isArray(v) && v.length) {
        const n = rng.pick([21, 101, 1001, 5001]);
        parent[key] = Array.from({ length: n }, (_, i) =>
          typeof v[0] === "string" && v[0].length === 64 ? hexOf(rng, 64) : typeof v[0] === "number" ? i : v[i % v.length],
        );
      } else parent[key] = Array.from({ length: rng.pick([21, 1001]) }, () => (typeof v === "string" ? v : rng.int(65536)));
      break;
    case 9: // nest deep
      parent[key] = new Deep(
        unit && rng.chance(0.05) ? 100_000 : rng.pick([10, 1000, 10_000]),
        v instanceof Deep ? null : v,
        rng.chance(0.25),
      );
      break;
    default: // duplicate / swap
      if (Array.isArray(parent) && parent.length > 1) {
        const j = rng.int(parent.length);
        [parent[key as number], parent[j]] = [parent[j], parent[key as number]];
      } else if (Array.isArray(parent)) parent.push(v);
  }
}

const JUNK = [
  ",",
  "]",
  "[",
  "{",
  "}",
  '"',
  "\\",
  "\\u",
  "\\uD800",
  "\\u0000",
  "\u0000",
  "\ud800",
  "null",
  ":",
  " ",
  "\t",
  "\ufeff",
  "\u00a0",
  "1e400",
  "-0",
  ",]",
  "[,",
  '"":',
  "\udc00",
];

function mutateText(rng: Rng, s: string): string {
  const at = rng.int(s.length + 1);
  switch (rng.int(9)) {
    case 0: // truncate
      return s.slice(0, at);
    case 1: // delete a span
      return s.slice(0, at) + s.slice(at + rng.range(1, 20));
    case 2:
    case 3: // insert junk
      return s.slice(0, at) + rng.pick(JUNK) + s.slice(at);
    case 4: {
      // replace a number literal
      const m = [...s.matchAll(/-?\d+(\.\d+)?([eE][+-]?\d+)?/g)];
      if (!m.length) return s + rng.pick(NUMBER_LITERALS);
      const x = rng.pick(m);
      return s.slice(0, x.index) + rng.pick(NUMBER_LITERALS) + s.slice(x.index! + x[0].length);
    }
    case 5: // wrap
      return rng.pick([`[${s}]`, `{"a":${s}}`, ` \n\t${s}\r\n `, `${s}${s}`, `${s},`, `\ufeff${s}`, `[${s}`]);
    case 6: // flip a character
      return s.slice(0, at) + String.fromCharCode(rng.int(0x80)) + s.slice(at + 1);
    case 7: // duplicate a span
      return s.slice(0, at) + s.slice(at, at + rng.range(1, 30)) + s.slice(at);
    default: // an escape sequence inside the first string after the position
      return s.replace(
        /"([^"\\]*)"/,
        (_m, inner: string) => `"${inner}${rng.pick(["\\uZZZZ", "\\ud800", "\\u0000", "\\x", "\u0001", "\\u12", "\\"])}"`,
      );
  }
}

function randomBytes(rng: Rng): Uint8Array {
  return Uint8Array.from({ length: rng.pick([0, 1, 2, 16, 100, 1000]) }, () => rng.int(256));
}

/** One fuzzed frame: a seed, some structural mutations, some textual ones; sometimes just bytes. */
export function genFrame(rng: Rng, pool: Pool, st: GenState, unit: boolean): string | Uint8Array {
  const r = rng.next();
  if (r < 0.02) return randomBytes(rng);
  if (r < 0.04) return Buffer.from(randomBytes(rng)).toString(rng.chance(0.5) ? "latin1" : "utf8");
  if (r < 0.05)
    return rng.pick([
      "",
      " ",
      "[]",
      "{}",
      "null",
      '["REQ"]',
      '"EVENT"',
      '["EVENT",]',
      "[".repeat(10_000) + "]".repeat(10_000),
      "[".repeat(30_000),
      "]",
    ]);
  const seed = seedFrame(rng, pool, st);
  const root = [structuredClone(seed)];
  const structural = rng.pick([0, 0, 0, 1, 1, 1, 1, 2, 3]);
  // Mutations compound (a blown-up string copied 5,000 times): past the cap, the seed goes as is.
  const cap = unit ? 3_000_000 : 4 * MAX_MESSAGE;
  let text: string;
  try {
    for (let i = 0; i < structural; i++) mutateTree(rng, root, unit);
    text = serialize(root[0], cap);
  } catch (err) {
    if (!(err instanceof TooBig)) throw err;
    text = serialize(seed);
  }
  const textual = rng.pick([0, 0, 0, 0, 0, 0, 0, 0, 1, 2]);
  for (let i = 0; i < textual; i++) text = mutateText(rng, text);
  return text;
}

export const show = (f: string | Uint8Array): string =>
  typeof f === "string"
    ? `${JSON.stringify(f.slice(0, 300))}${f.length > 300 ? ` ... (${f.length} chars)` : ""}`
    : `<binary ${f.length} bytes>`;
