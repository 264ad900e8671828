// Interop with real client libraries: nostr-tools (Relay, SimplePool) and NDK, each talking
// to real relays (Bun.serve on port 0, temp SQLite) over real websockets.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import NDK, { NDKEvent, NDKPrivateKeySigner, NDKRelayAuthPolicies } from "@nostr-dev-kit/ndk";
import { SimplePool } from "nostr-tools/pool";
import { finalizeEvent, generateSecretKey, getPublicKey, type Event, type EventTemplate, type VerifiedEvent } from "nostr-tools/pure";
import { Relay } from "nostr-tools/relay";
import { now, startTestRelay, type TestRelay } from "./helpers.ts";

// Generous per-test budget; the waits below are bounded by their own, shorter timeouts.
const T = 20000;
// Long enough that a client-side EOSE timeout can never stand in for the relay's EOSE.
const NO_FAKE_EOSE = 60000;

let A: TestRelay; // plain relay
let B: TestRelay; // second plain relay, for the pool tests
let C: TestRelay; // require_auth relay
const cleanups: (() => unknown)[] = [];

beforeAll(async () => {
  [A, B, C] = await Promise.all([startTestRelay(), startTestRelay(), startTestRelay({ options: { auth: "always" } })]);
});

afterAll(async () => {
  for (const c of cleanups.reverse()) {
    try {
      await c();
    } catch {
      // a client that is already closed
    }
  }
  await Promise.all([A, B, C].filter(Boolean).map((r) => r.stop()));
});

// ---- helpers -------------------------------------------------------------------------------

interface Key {
  sk: Uint8Array;
  pk: string;
  sign(t: Partial<EventTemplate> & { kind: number }): VerifiedEvent;
  /** The NIP-42 signer nostr-tools wants for onauth / auth(). */
  authSigner: (t: EventTemplate) => Promise<VerifiedEvent>;
}

function key(): Key {
  const sk = generateSecretKey();
  return {
    sk,
    pk: getPublicKey(sk),
    sign: (t) => finalizeEvent({ kind: t.kind, content: t.content ?? "", tags: t.tags ?? [], created_at: t.created_at ?? now() }, sk),
    authSigner: async (t) => finalizeEvent(t, sk),
  };
}

async function connect(url: string): Promise<Relay> {
  const r = await Relay.connect(url);
  cleanups.push(() => r.close());
  return r;
}

/** A nostr-tools Relay that answers the relay's AUTH challenge with `k` and has its OK. */
async function connectAuthed(url: string, k: Key): Promise<Relay> {
  const r = new Relay(url);
  cleanups.push(() => r.close());
  let asked = false;
  r.onauth = (t) => ((asked = true), k.authSigner(t));
  await r.connect();
  await waitFor(() => asked, "the relay's AUTH challenge");
  await r.auth(k.authSigner); // the authentication already in flight
  return r;
}

function pool(): SimplePool {
  const p = new SimplePool();
  cleanups.push(() => p.destroy());
  return p;
}

async function waitFor(cond: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(10);
  }
}

/** Events a single subscription receives before EOSE, and after it. */
function collect(r: Relay, filters: Parameters<Relay["subscribe"]>[0]) {
  const stored: Event[] = [];
  const live: Event[] = [];
  const closed: string[] = [];
  let eosed = false;
  let onEose!: () => void;
  const eose = new Promise<void>((res) => (onEose = res));
  const sub = r.subscribe(filters, {
    eoseTimeout: NO_FAKE_EOSE,
    onevent: (e) => (eosed ? live : stored).push(e),
    oneose: () => {
      eosed = true;
      onEose();
    },
    onclose: (reason) => closed.push(reason),
  });
  return { sub, stored, live, closed, eose };
}

/**
 * A fence for checking that something did NOT arrive on `reader`, instead of a fixed sleep:
 * `const pass = await fence(reader, writer)` subscribes `reader` to an event that does not exist
 * yet (its EOSE: the relay has handled what `reader` sent before, a CLOSE say); `await pass()`
 * publishes it through `writer` and waits for it. The relay sends a connection's frames in order
 * and fans out in commit order, so what it would have sent for earlier events came before.
 */
async function fence(reader: Relay, writer: Relay): Promise<() => Promise<void>> {
  const e = key().sign({ kind: 1, content: `fence ${Math.random()}` });
  const got = collect(reader, [{ ids: [e.id] }]);
  await got.eose;
  return async () => {
    expect(await writer.publish(e)).toBe("");
    await waitFor(() => got.live.length > 0, "the fence event");
    got.sub.close();
  };
}

const ids = (es: { id: string }[]): string[] => es.map((e) => e.id);
/** The wire form: nostr-tools marks events it signed or verified with a symbol. */
const plain = <T>(x: T): T => JSON.parse(JSON.stringify(x));
const sorted = (xs: string[]): string[] => [...xs].sort();

/** Rejection message of a promise that must reject. */
async function rejection(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
  throw new Error("expected the promise to reject, but it resolved");
}

// ---- nostr-tools Relay ---------------------------------------------------------------------

describe("nostr-tools Relay", () => {
  test(
    "publish resolves on OK true, and the event can be read back",
    async () => {
      const r = await connect(A.url);
      const k = key();
      const e = k.sign({ kind: 1, content: "hello from nostr-tools" });
      expect(await r.publish(e)).toBe("");
      // Publishing it again is still accepted (OK true, "duplicate:").
      expect(await r.publish(e)).toStartWith("duplicate:");

      const { stored, eose } = collect(r, [{ ids: [e.id] }]);
      await eose;
      expect(plain(stored)).toEqual([plain(e)]);
    },
    T,
  );

  test(
    "a refused event rejects with the relay's reason",
    async () => {
      const r = await connect(A.url);
      const k = key();
      const future = k.sign({ kind: 1, content: "from the future", created_at: now() + 3600 });
      const msg = await rejection(r.publish(future));
      expect(msg).toStartWith("invalid:");
      expect(msg).toContain("future");

      // A bad signature is refused too, with the relay's reason, and nothing is stored.
      const good = k.sign({ kind: 1, content: "tampered" });
      const badSig = { ...good, sig: good.sig.slice(0, -2) + (good.sig.endsWith("00") ? "11" : "00") };
      expect(await rejection(r.publish(badSig))).toStartWith("invalid:");

      const { stored, eose } = collect(r, [{ authors: [k.pk] }]);
      await eose;
      expect(stored).toEqual([]);
    },
    T,
  );

  test(
    "subscribe gets the stored events, then oneose, then a live event from another connection exactly once",
    async () => {
      const writer = await connect(A.url);
      const reader = await connect(A.url);
      const k = key();
      const t = now() - 100;
      const old = [0, 1, 2].map((i) => k.sign({ kind: 1, content: `stored ${i}`, created_at: t + i }));
      for (const e of old) expect(await writer.publish(e)).toBe("");

      const { stored, live, closed, eose } = collect(reader, [{ kinds: [1], authors: [k.pk] }]);
      await eose;
      // Newest first (NIP-01), nothing else.
      expect(ids(stored)).toEqual(ids([...old].reverse()));
      expect(live).toEqual([]);

      const fresh = k.sign({ kind: 1, content: "live!" });
      expect(await writer.publish(fresh)).toBe("");
      await waitFor(() => live.length > 0, "the live event");
      await (await fence(reader, writer))(); // a duplicate delivery would have come before it
      expect(ids(live)).toEqual([fresh.id]);
      expect(stored.length).toBe(3);
      expect(closed).toEqual([]);

      // A non-matching live event does not arrive.
      const pass = await fence(reader, writer);
      expect(await writer.publish(key().sign({ kind: 1, content: "someone else" }))).toBe("");
      expect(await writer.publish(k.sign({ kind: 7, content: "+" }))).toBe("");
      await pass();
      expect(ids(live)).toEqual([fresh.id]);
    },
    T,
  );

  test(
    "after sub.close() no more live events arrive",
    async () => {
      const writer = await connect(A.url);
      const reader = await connect(A.url);
      const k = key();
      const { sub, live, eose } = collect(reader, [{ authors: [k.pk] }]);
      await eose;
      const e1 = k.sign({ kind: 1, content: "one" });
      await writer.publish(e1);
      await waitFor(() => live.length === 1, "the first live event");
      sub.close();
      const pass = await fence(reader, writer); // the CLOSE has been handled
      await writer.publish(k.sign({ kind: 1, content: "two" }));
      await pass();
      expect(ids(live)).toEqual([e1.id]);
    },
    T,
  );

  test(
    "an ephemeral event reaches a live subscriber and is not stored",
    async () => {
      const writer = await connect(A.url);
      const reader = await connect(A.url);
      const k = key();
      const { live, eose } = collect(reader, [{ kinds: [20001], authors: [k.pk] }]);
      await eose;
      const e = k.sign({ kind: 20001, content: "here and gone" });
      expect(await writer.publish(e)).toBe("");
      await waitFor(() => live.length > 0, "the ephemeral event");
      await (await fence(reader, writer))(); // a second copy would have come before it
      expect(ids(live)).toEqual([e.id]);
      const later = collect(reader, [{ ids: [e.id] }]);
      await later.eose;
      expect(later.stored).toEqual([]);
    },
    T,
  );

  test(
    "replaceable kind 0 updated twice: querySync returns only the newest",
    async () => {
      const r = await connect(A.url);
      const p = pool();
      const k = key();
      const t = now() - 10;
      const versions = [0, 1, 2].map((i) => k.sign({ kind: 0, content: JSON.stringify({ name: `v${i}` }), created_at: t + i }));
      for (const e of versions) expect(await r.publish(e)).toBe("");

      const got = await p.querySync([A.url], { kinds: [0], authors: [k.pk] }, { maxWait: NO_FAKE_EOSE });
      expect(ids(got)).toEqual([versions[2]!.id]);
      expect(JSON.parse(got[0]!.content)).toEqual({ name: "v2" });

      // An older version arriving late does not replace the newest.
      const stale = k.sign({ kind: 0, content: JSON.stringify({ name: "stale" }), created_at: t - 100 });
      await r.publish(stale).catch(() => {});
      const after = await p.querySync([A.url], { kinds: [0], authors: [k.pk] }, { maxWait: NO_FAKE_EOSE });
      expect(ids(after)).toEqual([versions[2]!.id]);
    },
    T,
  );

  test(
    "replaceable with equal created_at keeps the lowest id (NIP-01)",
    async () => {
      const r = await connect(A.url);
      const k = key();
      const t = now() - 5;
      const a = k.sign({ kind: 0, content: '{"name":"a"}', created_at: t });
      const b = k.sign({ kind: 0, content: '{"name":"b"}', created_at: t });
      await r.publish(a).catch(() => {});
      await r.publish(b).catch(() => {});
      const { stored, eose } = collect(r, [{ kinds: [0], authors: [k.pk] }]);
      await eose;
      expect(ids(stored)).toEqual([a.id < b.id ? a.id : b.id]);
    },
    T,
  );

  test(
    "addressable kind 30023 is replaced per d tag",
    async () => {
      const r = await connect(A.url);
      const p = pool();
      const k = key();
      const t = now() - 10;
      const a1 = k.sign({ kind: 30023, content: "article A v1", tags: [["d", "a"]], created_at: t });
      const b1 = k.sign({ kind: 30023, content: "article B v1", tags: [["d", "b"]], created_at: t + 1 });
      const a2 = k.sign({
        kind: 30023,
        content: "article A v2",
        tags: [
          ["d", "a"],
          ["title", "A"],
        ],
        created_at: t + 2,
      });
      for (const e of [a1, b1, a2]) expect(await r.publish(e)).toBe("");

      const onlyA = await p.querySync([A.url], { kinds: [30023], authors: [k.pk], "#d": ["a"] }, { maxWait: NO_FAKE_EOSE });
      expect(ids(onlyA)).toEqual([a2.id]);
      const all = await p.querySync([A.url], { kinds: [30023], authors: [k.pk] }, { maxWait: NO_FAKE_EOSE });
      expect(sorted(ids(all))).toEqual(sorted([a2.id, b1.id]));
      // The same d under another pubkey is a different address.
      const other = key();
      const o = other.sign({ kind: 30023, content: "other A", tags: [["d", "a"]], created_at: t + 3 });
      expect(await r.publish(o)).toBe("");
      const byD = await p.querySync([A.url], { kinds: [30023], "#d": ["a"], authors: [k.pk, other.pk] }, { maxWait: NO_FAKE_EOSE });
      expect(sorted(ids(byD))).toEqual(sorted([a2.id, o.id]));
    },
    T,
  );
});

// ---- nostr-tools SimplePool over two relays ------------------------------------------------

describe("nostr-tools SimplePool across two relays", () => {
  test(
    "querySync merges both relays and dedupes an event stored on both",
    async () => {
      const ra = await connect(A.url);
      const rb = await connect(B.url);
      const k = key();
      const t = now() - 30;
      const onA = k.sign({ kind: 1, content: "only on A", created_at: t });
      const onB = k.sign({ kind: 1, content: "only on B", created_at: t + 1 });
      const onBoth = k.sign({ kind: 1, content: "on both", created_at: t + 2 });
      await ra.publish(onA);
      await rb.publish(onB);
      await ra.publish(onBoth);
      await rb.publish(onBoth);

      const p = pool();
      p.trackRelays = true;
      const got = await p.querySync([A.url, B.url], { authors: [k.pk] }, { maxWait: NO_FAKE_EOSE });
      expect(sorted(ids(got))).toEqual(sorted([onA.id, onB.id, onBoth.id]));
      // Both relays really sent the shared one; the pool passed it on once.
      expect(p.seenOn.get(onBoth.id)?.size).toBe(2);
      expect(p.seenOn.get(onA.id)?.size).toBe(1);
    },
    T,
  );

  test(
    "subscribeMany: stored events from both relays, one oneose, then a live event on both arrives once",
    async () => {
      const ra = await connect(A.url);
      const rb = await connect(B.url);
      const k = key();
      const t = now() - 30;
      const onA = k.sign({ kind: 1, content: "A", created_at: t });
      const onB = k.sign({ kind: 1, content: "B", created_at: t + 1 });
      const onBoth = k.sign({ kind: 1, content: "AB", created_at: t + 2 });
      await Promise.all([ra.publish(onA), rb.publish(onB), ra.publish(onBoth), rb.publish(onBoth)]);

      const p = pool();
      p.trackRelays = true;
      const before: Event[] = [];
      const after: Event[] = [];
      let eoses = 0;
      const sub = p.subscribeMany(
        [A.url, B.url],
        { authors: [k.pk] },
        {
          maxWait: NO_FAKE_EOSE,
          onevent: (e) => (eoses ? after : before).push(e),
          oneose: () => eoses++,
        },
      );
      cleanups.push(() => sub.close());
      await waitFor(() => eoses > 0, "EOSE from both relays");
      expect(sorted(ids(before))).toEqual(sorted([onA.id, onB.id, onBoth.id]));
      expect(p.seenOn.get(onBoth.id)?.size).toBe(2);

      const liveBoth = k.sign({ kind: 1, content: "live on both" });
      const liveB = k.sign({ kind: 1, content: "live on B" });
      await Promise.all([ra.publish(liveBoth), rb.publish(liveBoth), rb.publish(liveB)]);
      await waitFor(() => p.seenOn.get(liveBoth.id)?.size === 2 && after.length >= 2, "live events from both relays");
      // A fence on each relay: one more event published to it alone. Each relay sends in order, so
      // once both have arrived, a second delivery from either would have come before them.
      const fences = [k.sign({ kind: 1, content: "fence A" }), k.sign({ kind: 1, content: "fence B" })];
      await Promise.all([ra.publish(fences[0]!), rb.publish(fences[1]!)]);
      await waitFor(() => fences.every((f) => after.some((e) => e.id === f.id)), "the fence events from both relays");
      const fenceIds = new Set(fences.map((f) => f.id));
      expect(sorted(ids(after.filter((e) => !fenceIds.has(e.id))))).toEqual(sorted([liveBoth.id, liveB.id]));
      expect(eoses).toBe(1);
      sub.close();
    },
    T,
  );

  test(
    "pool.publish to two relays resolves for both and each relay stores it",
    async () => {
      const p = pool();
      const k = key();
      const e = k.sign({ kind: 1, content: "published through the pool" });
      const results = await Promise.allSettled(p.publish([A.url, B.url], e));
      expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled"]);

      for (const url of [A.url, B.url]) {
        const r = await connect(url);
        const { stored, eose } = collect(r, [{ ids: [e.id] }]);
        await eose;
        expect(ids(stored)).toEqual([e.id]);
      }
    },
    T,
  );
});

// ---- NIP-42 AUTH with nostr-tools ----------------------------------------------------------

describe("nostr-tools and NIP-42 AUTH", () => {
  test(
    "unauthenticated publish fails with auth-required:, relay.auth() then lets it through",
    async () => {
      const r = await connect(C.url);
      const k = key();
      const e = k.sign({ kind: 1, content: "needs auth" });
      expect(await rejection(r.publish(e))).toStartWith("auth-required:");

      // Reads are closed with auth-required: too.
      const denied = collect(r, [{ authors: [k.pk] }]);
      await waitFor(() => denied.closed.length > 0, "CLOSED for the unauthenticated REQ");
      expect(denied.closed[0]).toStartWith("auth-required:");

      // The relay sent its challenge on connect, so auth() has what it needs.
      expect(await r.auth(k.authSigner)).toBe("");
      expect(await r.publish(e)).toBe("");
      const { stored, eose, closed } = collect(r, [{ authors: [k.pk] }]);
      await eose;
      expect(closed).toEqual([]);
      expect(ids(stored)).toEqual([e.id]);
    },
    T,
  );

  test(
    "Relay with onauth authenticates on the challenge sent at connect",
    async () => {
      const k = key();
      const templates: EventTemplate[] = [];
      const r = new Relay(C.url);
      cleanups.push(() => r.close());
      r.onauth = async (t) => {
        templates.push(t);
        return k.authSigner(t);
      };
      await r.connect();
      await waitFor(() => templates.length > 0, "onauth to be called for the relay's challenge");
      // auth() hands back the authentication already in flight: its OK.
      expect(await r.auth(k.authSigner)).toBe("");
      expect(templates.length).toBe(1);
      const t = templates[0]!;
      expect(t.kind).toBe(22242);
      const challenge = t.tags.find((x) => x[0] === "challenge")?.[1];
      expect(typeof challenge).toBe("string");
      expect(challenge!.length).toBeGreaterThan(0);
      expect(t.tags.find((x) => x[0] === "relay")?.[1]).toBe(C.url);

      const e = k.sign({ kind: 1, content: "authed via onauth" });
      expect(await r.publish(e)).toBe("");
    },
    T,
  );

  test(
    "AUTH signed for another challenge is refused, and publishing stays closed",
    async () => {
      const r = await connect(C.url);
      const k = key();
      const e = k.sign({ kind: 1, content: "still needs auth" });
      expect(await rejection(r.publish(e))).toStartWith("auth-required:");
      const msg = await rejection(
        r.auth(async (t) =>
          finalizeEvent({ ...t, tags: t.tags.map((x) => (x[0] === "challenge" ? ["challenge", "not-the-challenge"] : x)) }, k.sk),
        ),
      );
      expect(msg).toStartWith("invalid:");
      expect(await rejection(r.publish(e))).toStartWith("auth-required:");
    },
    T,
  );

  test(
    "pool.subscribeMany with onauth re-subscribes after CLOSED auth-required:",
    async () => {
      const k = key();
      const e = k.sign({ kind: 1, content: "readable after auth" });
      expect(await (await connectAuthed(C.url, k)).publish(e)).toBe("");

      const p = pool();
      const got: Event[] = [];
      const closes: string[] = [];
      let eosed = false;
      const sub = p.subscribeMany(
        [C.url],
        { authors: [k.pk] },
        {
          maxWait: NO_FAKE_EOSE,
          onauth: key().authSigner,
          onevent: (ev) => got.push(ev),
          oneose: () => (eosed = true),
          onclose: (rs) => closes.push(...rs.map((r) => r.reason)),
        },
      );
      cleanups.push(() => sub.close());
      await waitFor(() => eosed, "EOSE after authenticating");
      expect(ids(got)).toEqual([e.id]);
      expect(closes).toEqual([]);
      sub.close();
    },
    T,
  );

  test(
    "pool.publish with onauth retries after auth-required:",
    async () => {
      const p = pool();
      const k = key();
      const e = k.sign({ kind: 1, content: "pool + auth" });
      const [res] = p.publish([C.url], e, { onauth: k.authSigner });
      expect(await res!).toBe("");
      const r = await connectAuthed(C.url, key());
      const { stored, eose } = collect(r, [{ ids: [e.id] }]);
      await eose;
      expect(ids(stored)).toEqual([e.id]);
    },
    T,
  );
});

// ---- NDK -----------------------------------------------------------------------------------

describe("NDK", () => {
  // No outbox model: it would go looking for public relays (purplepag.es, …) to find relay
  // lists, and wait on them. These tests talk to our relays only.
  const newNdk = (urls: string[], signer: NDKPrivateKeySigner, extra: Partial<ConstructorParameters<typeof NDK>[0]> = {}) => {
    const ndk = new NDK({ explicitRelayUrls: urls, signer, enableOutboxModel: false, autoConnectUserRelays: false, ...extra });
    cleanups.push(() => {
      for (const relay of ndk.pool.relays.values()) relay.disconnect();
    });
    return ndk;
  };

  test(
    "connect, publish with NDKPrivateKeySigner, fetchEvents",
    async () => {
      const signer = NDKPrivateKeySigner.generate();
      const ndk = newNdk([A.url], signer);
      await ndk.connect(5000);
      const pk = (await signer.user()).pubkey;

      const note = new NDKEvent(ndk, { kind: 1, content: "hello from NDK", tags: [["t", "bunstr"]] });
      const publishedTo = await note.publish();
      expect([...publishedTo].map((r) => r.url)).toEqual([`${A.url}`]);

      const got = await ndk.fetchEvents({ kinds: [1], authors: [pk] });
      expect([...got].map((e) => e.id)).toEqual([note.id]);
      const ev = [...got][0]!;
      expect(ev.content).toBe("hello from NDK");
      expect(ev.pubkey).toBe(pk);
      expect(ev.verifySignature(false)).toBe(true);

      // What NDK published is a valid event for nostr-tools too.
      const r = await connect(A.url);
      const { stored, eose } = collect(r, [{ "#t": ["bunstr"], authors: [pk] }]);
      await eose;
      expect(ids(stored)).toEqual([note.id!]);
    },
    T,
  );

  test(
    "NDK signs in on a require_auth relay with NDKRelayAuthPolicies.signIn",
    async () => {
      const signer = NDKPrivateKeySigner.generate();
      const ndk = newNdk([C.url], signer);
      ndk.relayAuthDefaultPolicy = NDKRelayAuthPolicies.signIn({ ndk });
      const authed = new Promise<void>((res) => ndk.pool.on("relay:authed", () => res()));
      await ndk.connect(5000);
      await Promise.race([authed, Bun.sleep(5000).then(() => Promise.reject(new Error("NDK never authenticated")))]);

      const note = new NDKEvent(ndk, { kind: 1, content: "NDK behind auth" });
      await note.publish();
      const got = await ndk.fetchEvents({ ids: [note.id!] });
      expect([...got].map((e) => e.id)).toEqual([note.id]);
    },
    T,
  );
});
