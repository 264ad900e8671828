// The web of trust over the wire (issue 33): who may publish when only the
// owner's follows may, joining by being followed, depth 2 with min_followers, unfollowing, and
// follow lists fetched from another relay named in [web_of_trust] relays.
import { afterAll, beforeAll, describe, expect, spyOn, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { WebOfTrust } from "../src/access/wot.ts";
import type { Signer, TestRelay } from "./helpers.ts";
import { startFakeRelay, type FakeRelay } from "./fakes/nostr-relay.ts";
import {
  accepted,
  adminCall,
  Client,
  failOnRelayErrors,
  now,
  openTestStore,
  refusedWith,
  signer,
  startTestRelay,
  storeEvents,
} from "./helpers.ts";

failOnRelayErrors();

const DEPTH1_TEXT = "restricted: only the owner's web of trust (follows, depth 1) may publish here";
const DEPTH2_TEXT = "restricted: only the owner's web of trust (follows, depth 2) may publish here";

const note = (s: Signer, content = "hello") => s.sign({ kind: 1, content: `${content} ${Math.random()}` });
/** A kind 3 following `pubkeys`; created_at rises with each call, so the newest list wins. */
let listTime = now() - 1000;
const followList = (s: Signer, pubkeys: string[]) => s.sign({ kind: 3, tags: pubkeys.map((p) => ["p", p]), created_at: ++listTime });

/** Publishes until OK true (the graph is rebuilt ~1 s after a follow list): the ms it took. */
async function acceptedWithin(c: Client, s: Signer, ms: number): Promise<number> {
  const t0 = Date.now();
  for (;;) {
    const e = note(s);
    const ok = await c.publish(e);
    if (ok[2]) return Date.now() - t0;
    if (Date.now() - t0 > ms) throw new Error(`still refused after ${ms} ms: ${ok[3]}`);
    await Bun.sleep(100);
  }
}

/** Publishes until OK false with `text` (the graph is rebuilt ~1 s after a follow list). */
async function refusedWithin(c: Client, s: Signer, text: string, ms: number): Promise<void> {
  const t0 = Date.now();
  for (;;) {
    const ok = await c.publish(note(s));
    if (!ok[2]) return void expect(ok[3]).toBe(text);
    if (Date.now() - t0 > ms) throw new Error(`still accepted after ${ms} ms`);
    await Bun.sleep(100);
  }
}

describe("depth 1", () => {
  const seed = signer();
  const friend = signer();
  let relay: TestRelay;
  let c: Client;
  let dir: string;

  beforeAll(async () => {
    // The seed's follow list is in the store before the relay starts: the first graph has it.
    dir = mkdtempSync(join(tmpdir(), "bunstr-wot-"));
    const store = await openTestStore(dir);
    await store.ready();
    await storeEvents(store, [followList(seed, [friend.pubkey])]);
    await store.close();
    relay = await startTestRelay({ web_of_trust: { enabled: true, seeds: [seed.pubkey] } }, { dir });
    c = await Client.connect(relay.url);
  });
  afterAll(async () => {
    c.close();
    await relay.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("the seed writes", async () => {
    await acceptedWithin(c, seed, 5000); // the first graph may still be building
    await accepted(c, note(seed));
  });

  test("whom the seed follows writes", async () => {
    await accepted(c, note(friend));
  });

  test("a stranger is refused with the web of trust's text", async () => {
    const ok = await c.publish(note(signer()));
    expect(ok.slice(2)).toEqual([false, DEPTH1_TEXT]);
  });

  test("joining by being followed: within ~2 s of the seed's new follow list", async () => {
    const newcomer = signer();
    await refusedWith(c, note(newcomer), DEPTH1_TEXT);
    await accepted(c, followList(seed, [friend.pubkey, newcomer.pubkey]));
    const ms = await acceptedWithin(c, newcomer, 2500);
    console.log(`wot: a newly followed pubkey wrote ${ms} ms after the seed's follow list`);
    expect(ms).toBeLessThan(2500);
  });

  test("unfollowed: refused again once the graph is rebuilt", async () => {
    const leaving = signer();
    await accepted(c, followList(seed, [friend.pubkey, leaving.pubkey]));
    await acceptedWithin(c, leaving, 2500);
    await accepted(c, followList(seed, [friend.pubkey]));
    await refusedWithin(c, leaving, DEPTH1_TEXT, 2500);
    await accepted(c, note(friend));
  });

  test("a stranger's follow list changes nothing", async () => {
    const stranger = signer();
    const followed = signer();
    await refusedWith(c, followList(stranger, [followed.pubkey]), DEPTH1_TEXT);
    // A graph built after the refusal (what the ~1 s rebuild a stored list asks for would read).
    await (relay.ctx.access!.engines.wot as WebOfTrust).rebuild();
    await refusedWith(c, note(followed), DEPTH1_TEXT);
  });
});

describe("depth 2 with min_followers", () => {
  const admin = signer();
  const seed = signer();
  const [a, b] = [signer(), signer()];
  const [both, one] = [signer(), signer()];
  let relay: TestRelay;
  let c: Client;

  beforeAll(async () => {
    relay = await startTestRelay({
      web_of_trust: { enabled: true, seeds: [seed.pubkey], depth: 2, min_followers: 2 },
      admin: { pubkeys: [admin.pubkey] },
    });
    c = await Client.connect(relay.url);
    await acceptedWithin(c, seed, 5000);
  });
  afterAll(async () => {
    c.close();
    await relay.stop();
  });

  test("followed by two depth-1 pubkeys: in; by one: out", async () => {
    await accepted(c, followList(seed, [a.pubkey, b.pubkey]));
    await acceptedWithin(c, a, 2500);
    await accepted(c, followList(a, [both.pubkey, one.pubkey]));
    await accepted(c, followList(b, [both.pubkey]));
    await acceptedWithin(c, both, 2500);
    await refusedWith(c, note(one), DEPTH2_TEXT);
    // A second depth-1 follower brings it in.
    await accepted(c, followList(b, [both.pubkey, one.pubkey]));
    await acceptedWithin(c, one, 2500);
  });

  test("operators see it: NIP-86 listadmissions trusted with the follow path, /metrics the graph", async () => {
    const { result } = (await adminCall(relay.url, admin, "listadmissions", ["trusted"])).body;
    const byKey = new Map<string, any>(result.map((r: any) => [r.pubkey, r.bases[0]]));
    expect(byKey.size).toBe(5); // seed, a, b, both, one
    expect(byKey.get(seed.pubkey).evidence).toEqual({ path: [seed.pubkey], depth: 0 });
    expect(byKey.get(a.pubkey).evidence).toEqual({ path: [seed.pubkey, a.pubkey], depth: 1 });
    const { path, depth } = byKey.get(both.pubkey).evidence;
    expect(depth).toBe(2);
    expect([a.pubkey, b.pubkey]).toContain(path[1]);
    expect([path[0], path[2]]).toEqual([seed.pubkey, both.pubkey]);
    expect((await adminCall(relay.url, admin, "revokeadmission", [a.pubkey, "trusted", "no"])).body.error).toContain("ban it instead");
    const metrics = await (await fetch(`${relay.url.replace(/^ws/, "http")}/metrics`)).text();
    expect(metrics).toContain("bunstr_wot_graph_pubkeys 5\n");
    expect(metrics).toContain(`bunstr_wot_graph_bytes ${5 * 39}\n`);
    expect(metrics).toMatch(/bunstr_wot_build_seconds 0\.\d+/);
  });
});

describe("refresh from a relay named in [web_of_trust] relays", () => {
  const seed = signer();
  const remoteFriend = signer();
  let other: TestRelay;
  let relay: TestRelay;
  let c: Client;

  beforeAll(async () => {
    other = await startTestRelay();
    const o = await Client.connect(other.url);
    // The other relay holds the seed's follow list (and something that was not asked for).
    await accepted(o, followList(seed, [remoteFriend.pubkey]));
    await accepted(o, followList(signer(), [signer().pubkey]));
    o.close();
    relay = await startTestRelay({ web_of_trust: { enabled: true, seeds: [seed.pubkey], relays: [other.url] } });
    c = await Client.connect(relay.url);
  });
  afterAll(async () => {
    c.close();
    await relay.stop();
    await other.stop();
  });

  test("the seed's follow list is fetched and stored; whom it follows writes", async () => {
    await acceptedWithin(c, remoteFriend, 10_000);
    const { events } = await c.req("lists", { kinds: [3] });
    expect(events.map((e) => e.pubkey)).toEqual([seed.pubkey]);
  });
});

describe("refresh at depth 2 from a relay that sends more than it is asked", () => {
  const seed = signer();
  const [friend, theirFriend] = [signer(), signer()];
  const [stranger, strangersFriend] = [signer(), signer()];
  let fake: FakeRelay;
  let relay: TestRelay;
  let c: Client;

  beforeAll(async () => {
    fake = startFakeRelay([
      followList(seed, [friend.pubkey]),
      followList(friend, [theirFriend.pubkey]),
      // Not asked for: a stranger's follow list and a note of the seed.
      followList(stranger, [strangersFriend.pubkey]),
      note(seed, "not asked for"),
    ]);
    relay = await startTestRelay({ web_of_trust: { enabled: true, seeds: [seed.pubkey], depth: 2, relays: [fake.url] } });
    c = await Client.connect(relay.url);
  });
  afterAll(async () => {
    c.close();
    await relay.stop();
    fake.close();
  });

  test("the seeds' lists, then the depth-1 pubkeys'; only the kind 3s asked for are stored", async () => {
    await acceptedWithin(c, theirFriend, 10_000);
    expect(fake.filters.slice(0, 2)).toEqual([
      { kinds: [3], authors: [seed.pubkey], limit: 1 },
      { kinds: [3], authors: [friend.pubkey], limit: 1 },
    ]);
    await refusedWith(c, note(strangersFriend), DEPTH2_TEXT);
    const { events } = await c.req("stored", { kinds: [1, 3], authors: [seed.pubkey, friend.pubkey, stranger.pubkey] });
    expect(events.map((e) => `${e.kind}:${e.pubkey}`).sort()).toEqual([`3:${friend.pubkey}`, `3:${seed.pubkey}`].sort());
  });
});

describe("refresh from a relay that never stops sending", () => {
  test("past 2,000 events for one REQ the connection is dropped, and the log says why", async () => {
    const seed = signer();
    // 2,001 events before its EOSE: the idle timeout, re-armed by each, would never end the REQ.
    const fake = startFakeRelay(Array(2001).fill(note(seed)));
    const log = spyOn(console, "log");
    const relay = await startTestRelay({ web_of_trust: { enabled: true, seeds: [seed.pubkey], relays: [fake.url] } });
    try {
      const said = () => log.mock.calls.map((args) => String(args[0])).find((l) => l.startsWith(`wot: ${fake.url}`));
      for (let t0 = Date.now(); !said() && Date.now() - t0 < 10_000; ) await Bun.sleep(50);
      expect(said()).toBe(`wot: ${fake.url}: more than 2000 events for one REQ: dropped`);
    } finally {
      log.mockRestore();
      await relay.stop();
      fake.close();
    }
  });
});
