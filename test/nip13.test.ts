// NIP-13 over a real websocket: with min_pow_difficulty set, events need that many leading zero
// bits in their id, and a committed target (nonce tag) that is not lower; events are mined here.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { finalizeEvent, getEventHash } from "nostr-tools/pure";
import type { NostrEvent } from "../src/protocol/event.ts";
import { Client, now, signer, startTestRelay, type Signer, type TestRelay, relayInfo } from "./helpers.ts";

const MIN = 12;

let relay: TestRelay; // min_pow_difficulty = 12
let plain: TestRelay; // default (0)
const clients: Client[] = [];

beforeAll(async () => {
  [relay, plain] = await Promise.all([startTestRelay({ options: { min_pow_difficulty: MIN } }), startTestRelay()]);
});
afterAll(async () => {
  for (const c of clients) c.close();
  await Promise.all([relay, plain].filter(Boolean).map((r) => r.stop()));
});

async function connect(r: TestRelay): Promise<Client> {
  const c = await Client.connect(r.url);
  clients.push(c);
  return c;
}

/** The NIP-13 reference JavaScript, verbatim in substance. */
function countLeadingZeroes(hex: string): number {
  let count = 0;
  for (let i = 0; i < hex.length; i++) {
    const nibble = parseInt(hex[i]!, 16);
    if (nibble === 0) {
      count += 4;
    } else {
      count += Math.clz32(nibble) - 28;
      break;
    }
  }
  return count;
}

/** Mines a kind 1 until its id has at least `bits` leading zero bits, committing to `target`. */
function mine(s: Signer, bits: number, target: number, content = "It's just me mining my own business"): NostrEvent {
  const created_at = now();
  for (let nonce = 0; ; nonce++) {
    const t = { kind: 1, content, created_at, tags: [["nonce", String(nonce), String(target)]], pubkey: s.pubkey };
    if (countLeadingZeroes(getEventHash(t)) >= bits) {
      const e = JSON.parse(JSON.stringify(finalizeEvent({ kind: t.kind, content, created_at, tags: t.tags }, s.sk))) as NostrEvent;
      expect(countLeadingZeroes(e.id)).toBeGreaterThanOrEqual(bits);
      return e;
    }
  }
}

/** A signed event whose id has fewer than MIN leading zero bits (re-signed in the rare lucky case). */
function unmined(s: Signer, tags: string[][] = []): NostrEvent {
  for (let i = 0; ; i++) {
    const e = s.sign({ kind: 1, content: `unmined ${i}`, tags });
    if (countLeadingZeroes(e.id) < MIN) return e;
  }
}

const info = (r: TestRelay) => relayInfo(r.url);

describe("min_pow_difficulty = 12", () => {
  test("the reference difficulty function agrees with the NIP's examples", () => {
    expect(countLeadingZeroes("000000000e9d97a1ab09fc381030b346cdd7a142ad57e6df0b46dc9bef6c7e2d")).toBe(36);
    expect(countLeadingZeroes("002f" + "f".repeat(60))).toBe(10);
  });

  test("a mined event is accepted and served", async () => {
    const c = await connect(relay);
    const s = signer();
    const e = mine(s, MIN, MIN);
    expect(await c.publish(e)).toEqual(["OK", e.id, true, ""]);
    expect((await c.req("r", { ids: [e.id] })).events).toEqual([e]);
    // A higher committed target than required is fine.
    const higher = mine(s, MIN, 20, "aiming high");
    expect(await c.publish(higher)).toEqual(["OK", higher.id, true, ""]);
  });

  test("an unmined event is refused with pow: difficulty <bits><12", async () => {
    const c = await connect(relay);
    const s = signer();
    for (const e of [unmined(s), unmined(s, [["nonce", "0", String(MIN)]])]) {
      expect(await c.publish(e)).toEqual(["OK", e.id, false, `pow: difficulty ${countLeadingZeroes(e.id)}<${MIN}`]);
    }
    expect((await c.req("r", { authors: [s.pubkey] })).events).toEqual([]);
  });

  test("an event with enough bits but a committed target of 8 is refused with pow: committed target 8<12", async () => {
    const c = await connect(relay);
    const s = signer();
    const e = mine(s, MIN, 8);
    expect(countLeadingZeroes(e.id)).toBeGreaterThanOrEqual(MIN);
    expect(await c.publish(e)).toEqual(["OK", e.id, false, `pow: committed target 8<${MIN}`]);
    expect((await c.req("r", { ids: [e.id] })).events).toEqual([]);
  });

  test("NIP-11 limitation.min_pow_difficulty is 12", async () => {
    expect((await info(relay)).limitation.min_pow_difficulty).toBe(MIN);
  });
});

describe("default (0)", () => {
  test("any event is accepted, and NIP-11 says 0", async () => {
    const c = await connect(plain);
    const s = signer();
    const events = [unmined(s), s.sign({ kind: 1, content: "low target", tags: [["nonce", "1", "8"]] }), mine(s, 4, 2)];
    for (const e of events) expect(await c.publish(e)).toEqual(["OK", e.id, true, ""]);
    expect((await info(plain)).limitation.min_pow_difficulty).toBe(0);
  });
});
