// NIP-77 negentropy end to end over a real websocket, driven by nostr-tools' client: its
// NegentropySync on a nostr-tools Relay for whole syncs, its Negentropy + NegentropyStorageVector
// on a raw websocket where the test needs to see or shape individual frames.
//
// NIP-77: "Subscription IDs are in a separate namespace from `REQ` subscription IDs. If a
// `NEG-OPEN` is issued for a currently open subscription ID, the existing subscription is first
// closed." "After a `NEG-ERR` is issued, the subscription is considered to be closed."
// Appendix: "If a server receives a message with a protocol version that it cannot handle, it
// should reply with a single byte containing the highest protocol version it supports".
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { nip77 } from "nostr-tools";
import { matchFilter, type Filter } from "nostr-tools/filter";
import { finalizeEvent } from "nostr-tools/pure";
import { Relay } from "nostr-tools/relay";
import type { NostrEvent } from "../src/protocol/event.ts";
import type { PendingWrite } from "../src/store/types.ts";
import { Client, now, openTestStore, signer, startTestRelay, type Signer, type TestRelay } from "./helpers.ts";

const { Negentropy, NegentropyStorageVector, NegentropySync } = nip77;

type Item = { created_at: number; id: string };

const relays: TestRelay[] = [];
const clients: Client[] = [];
const ntRelays: Relay[] = [];
const dirs: string[] = [];

// Stopping the relays drops their databases on Postgres (two of 50,000 events among them): beside a
// CPU hog that took more than the 30 s a hook gets by default, so they stop together, given 120 s.
afterAll(async () => {
  for (const r of ntRelays) r.close();
  for (const c of clients) c.close();
  await Promise.all(relays.map((r) => r.stop()));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
}, 120_000);

async function relayWith(patch: Parameters<typeof startTestRelay>[0] = {}, opts: { dir?: string } = {}): Promise<TestRelay> {
  const r = await startTestRelay(patch, opts);
  relays.push(r);
  return r;
}

async function connect(url: string): Promise<Client> {
  const c = await Client.connect(url);
  clients.push(c);
  return c;
}

async function ntConnect(url: string): Promise<Relay> {
  const r = await Relay.connect(url);
  ntRelays.push(r);
  return r;
}

async function publishAll(c: Client, evs: NostrEvent[]): Promise<void> {
  for (const e of evs) expect(await c.publish(e)).toEqual(["OK", e.id, true, ""]);
}

const sorted = (ids: Iterable<string>): string[] => [...ids].sort();
const idsOf = (evs: Item[]): string[] => sorted(evs.map((e) => e.id));

function storageOf(items: Item[]): InstanceType<typeof NegentropyStorageVector> {
  const s = new NegentropyStorageVector();
  for (const it of items) s.insert(it.created_at, it.id);
  s.seal();
  return s;
}

interface SyncResult {
  have: string[];
  need: string[];
  /** NEG-MSG replies from the relay (= round trips: NEG-OPEN plus every NEG-MSG we sent). */
  roundTrips: number;
  ms: number;
  /** Longest NEG-MSG hex from the relay. */
  maxFrame: number;
}

/**
 * One whole sync with nostr-tools' NegentropySync on a nostr-tools Relay. Resolves when the
 * client reconciles to nothing left (it then sends NEG-CLOSE); rejects on NEG-ERR (whose reason
 * NegentropySync drops, so the subscription's frames are tapped) or after a timeout.
 */
function sync(relay: Relay, items: Item[], filter: Filter, timeoutMs = 15000): Promise<SyncResult> {
  const have: string[] = [];
  const need: string[] = [];
  let roundTrips = 0;
  let maxFrame = 0;
  let negErr: unknown[] | undefined;
  const t0 = performance.now();
  return new Promise<SyncResult>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`negentropy sync timed out after ${roundTrips} round trips`)), timeoutMs);
    const s = new NegentropySync(relay, storageOf(items), filter, {
      onhave: (id) => have.push(id),
      onneed: (id) => need.push(id),
      onclose: (reason) => {
        clearTimeout(timer);
        if (negErr) return reject(new Error(`NEG-ERR: ${JSON.stringify(negErr)}`));
        if (reason) return reject(new Error(`sync closed: ${reason}`));
        resolve({ have: sorted(have), need: sorted(need), roundTrips, ms: performance.now() - t0, maxFrame });
      },
    });
    const sub = (s as any).subscription as { oncustom: (data: any[]) => void };
    const inner = sub.oncustom;
    sub.oncustom = (data) => {
      if (data[0] === "NEG-MSG") {
        roundTrips++;
        maxFrame = Math.max(maxFrame, String(data[2]).length);
      }
      if (data[0] === "NEG-ERR") negErr = data;
      inner(data);
    };
    void s.start();
  });
}

/** A fresh nostr-tools client's first message for `items`, and a decoder of the relay's reply. */
function negClient(items: Item[] = []) {
  const neg = new Negentropy(storageOf(items));
  const initial = neg.initiate();
  return {
    neg,
    initial,
    /** Feeds one relay reply; the ids learned, and the next message (null = done). */
    reply(hex: string): { have: string[]; need: string[]; next: string | null } {
      const have: string[] = [];
      const need: string[] = [];
      const next = neg.reconcile(
        hex,
        (id) => have.push(id),
        (id) => need.push(id),
      );
      return { have: sorted(have), need: sorted(need), next };
    },
  };
}

/** Sends a frame and resolves with the relay's first NEG-MSG / NEG-ERR for that id after it. */
async function negAnswer(c: Client, frame: unknown[], subId = frame[1] as string, timeoutMs = 5000): Promise<any[]> {
  const from = c.frames.length;
  c.send(frame);
  return c.next((f) => (f[0] === "NEG-MSG" || f[0] === "NEG-ERR") && f[1] === subId, timeoutMs, from);
}

/** Resolves once every frame sent so far was processed (the relay answers in order). */
async function settle(c: Client): Promise<void> {
  const from = c.frames.length;
  const id = `ping-${Math.random()}`;
  c.send(["COUNT", id, { ids: ["0".repeat(64)] }]);
  await c.next((f) => f[1] === id, 5000, from);
}

/**
 * Counts the relay's negentropy store reads as they finish (the relay runs in this process). A
 * finished read's reply has been sent or dropped by the time a timer runs, so waiting for the
 * count, then settle(), shows every reply the relay was ever going to send: a fence for "no
 * reply", instead of a fixed sleep. Call the returned `restore` when done.
 */
/** Counts the relay's NEG-OPEN reads as they finish; given `gate`, each read's answer waits for it. */
function countNegReads(r: TestRelay, gate?: Promise<void>): { finished: () => number; restore: () => void } {
  // SQLite keeps sessions in its reader workers (Store.negentropy.open); Postgres hands the items over.
  const store = (r.ctx.store.negentropy ?? r.ctx.store) as unknown as Record<
    "open" | "negentropyItems",
    ((...args: unknown[]) => Promise<unknown>) | undefined
  >;
  const method = r.ctx.store.negentropy ? "open" : "negentropyItems";
  const read = store[method]!;
  let finished = 0;
  store[method] = (...args) => {
    const read0 = read.apply(store, args);
    const p = gate ? read0.then(async (v) => (await gate, v)) : read0;
    p.then(
      () => finished++,
      () => finished++,
    ); // runs before the relay's own continuation
    return p;
  };
  return { finished: () => finished, restore: () => void (store[method] = read) };
}

async function until(cond: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; !cond(); await Bun.sleep(5)) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
  }
}

const mk = (s: Signer, kind = 1, created_at = now() - 100, tags: string[][] = []) =>
  s.sign({ kind, created_at, tags, content: `${kind}:${Math.random()}` });

// ---------------------------------------------------------------------------------------------

describe("a whole sync with nostr-tools' NegentropySync", () => {
  test("small sets: have/need are exactly each side's missing ids; after exchanging, nothing is left", async () => {
    const relay = await relayWith();
    const a = signer();
    const b = signer();
    const t = now() - 1000;
    // Some share a created_at, so the bounds need id prefixes.
    const common = Array.from({ length: 8 }, (_, i) => mk(i % 2 ? a : b, 1, t + (i % 3)));
    const relayOnly = Array.from({ length: 5 }, (_, i) => mk(a, i % 2 ? 7 : 1, t + (i % 3)));
    const clientOnly = Array.from({ length: 4 }, (_, i) => mk(b, 1, t + 1 + (i % 2)));
    const c = await connect(relay.url);
    await publishAll(c, [...common, ...relayOnly]);

    const nt = await ntConnect(relay.url);
    const local = [...common, ...clientOnly];
    const first = await sync(nt, local, {});
    expect(first.have).toEqual(idsOf(clientOnly));
    expect(first.need).toEqual(idsOf(relayOnly));

    // Download what we need by REQ ids, upload what we have by EVENT.
    const got = await c.req("fetch", { ids: first.need });
    expect(idsOf(got.events)).toEqual(idsOf(relayOnly));
    expect(got.events).toEqual(expect.arrayContaining(relayOnly));
    for (const id of first.have) {
      const e = local.find((x) => x.id === id)!;
      expect(await nt.publish(e)).toBe("");
    }
    local.push(...got.events);

    const second = await sync(nt, local, {});
    expect(second).toMatchObject({ have: [], need: [] });
    expect(second.roundTrips).toBe(1);
    // And an empty client against the relay learns every stored id.
    expect((await sync(nt, [], {})).need).toEqual(idsOf(local));
  });

  test("50,000 events each side, a few hundred different each way, converge", async () => {
    const N = 50_000;
    const DIFF = 300;
    const dir = mkdtempSync(join(tmpdir(), "bunstr-nip77-"));
    dirs.push(dir);

    // Random ids, pubkeys and sigs in bulk: nothing verifies them when writing to the store.
    const hexOf = (bytes: number) => Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString("hex");
    const rand = (count: number, size: number): string[] => {
      const out: string[] = [];
      for (let done = 0; done < count; ) {
        const n = Math.min(count - done, Math.floor(65536 / size)); // getRandomValues' per-call cap
        const h = hexOf(n * size);
        for (let i = 0; i < n; i++) out.push(h.slice(i * size * 2, (i + 1) * size * 2));
        done += n;
      }
      return out;
    };
    const tGen = performance.now();
    const ids = rand(N + DIFF, 32);
    const pubkeys = rand(64, 32);
    const sig = hexOf(64);
    // 5,000 distinct seconds for 50,000 events: ties are common, so bounds carry id prefixes.
    const base = now() - 10_000;
    const items: Item[] = ids.map((id) => ({ id, created_at: base + Math.floor(Math.random() * 5000) }));
    const relayItems = items.slice(0, N); // the last DIFF of these the client lacks
    const clientItems = [...items.slice(0, N - DIFF), ...items.slice(N)]; // also N, DIFF the relay lacks
    const relayOnly = items.slice(N - DIFF, N);
    const clientOnly = items.slice(N);

    const store = await openTestStore(dir);
    try {
      const rules = { deletion: false, vanish: false, search: false, searchSkipKinds: new Set<number>() };
      for (let i = 0; i < relayItems.length; i += 1000) {
        const batch: PendingWrite[] = relayItems.slice(i, i + 1000).map((it, j) => {
          const event: NostrEvent = {
            id: it.id,
            pubkey: pubkeys[(i + j) % pubkeys.length]!,
            created_at: it.created_at,
            kind: 1,
            tags: [],
            content: "",
            sig,
          };
          return { event, json: JSON.stringify(event) };
        });
        const out = await store.writeBatch(batch, rules);
        expect(out.every((o) => o.stored)).toBe(true);
      }
    } finally {
      await store.close();
    }
    const populateMs = performance.now() - tGen;

    const relay = await relayWith({}, { dir });
    const nt = await ntConnect(relay.url);
    const r = await sync(nt, clientItems, {}, 20000);
    console.log(
      `NIP-77 50k: populate ${populateMs.toFixed(0)} ms; sync ${r.ms.toFixed(0)} ms in ${r.roundTrips} round trips ` +
        `(have ${r.have.length}, need ${r.need.length})`,
    );
    expect(r.have.length).toBe(DIFF);
    expect(r.need.length).toBe(DIFF);
    expect(r.have).toEqual(idsOf(clientOnly));
    expect(r.need).toEqual(idsOf(relayOnly));
    // Range-based reconciliation: a handful of rounds (log16 of the set, plus a little).
    expect(r.roundTrips).toBeLessThanOrEqual(10);
    expect(r.ms).toBeLessThan(15000);
    expect(r.maxFrame).toBeLessThanOrEqual(2 * 60_000);

    // An empty client learns all 50,000 ids (1.6 MB of them), spread over frames the client accepts.
    const all = await sync(nt, [], {}, 20000);
    console.log(`NIP-77 50k from empty: ${all.ms.toFixed(0)} ms in ${all.roundTrips} round trips, largest frame ${all.maxFrame} hex chars`);
    expect(all.have).toEqual([]);
    expect(all.need.length).toBe(N);
    expect(all.need).toEqual(idsOf(relayItems));
    expect(all.maxFrame).toBeLessThanOrEqual(2 * 60_000);
    expect(all.roundTrips).toBeGreaterThan(1);
  }, 60000);

  test("NEG-OPEN's filter (kinds, authors, since, tags) bounds the relay's set", async () => {
    const relay = await relayWith();
    const a = signer();
    const b = signer();
    const T = now() - 500;
    const all: NostrEvent[] = [];
    for (const s of [a, b])
      for (const kind of [1, 7, 30023])
        for (const dt of [-200, -1, 0, 50])
          all.push(
            mk(
              s,
              kind,
              T + dt,
              kind === 30023
                ? [
                    ["d", `${dt}`],
                    ["t", "x"],
                  ]
                : dt === 0
                  ? [["t", "x"]]
                  : [],
            ),
          );
    const c = await connect(relay.url);
    await publishAll(c, all);
    const nt = await ntConnect(relay.url);

    const filters: Filter[] = [
      { kinds: [1] },
      { authors: [a.pubkey] },
      { since: T },
      { until: T - 1 },
      { "#t": ["x"] },
      { kinds: [1, 7], authors: [b.pubkey], since: T },
      { kinds: [1], authors: [a.pubkey], since: T, until: T },
      { kinds: [9999] },
    ];
    for (const f of filters) {
      const match = all.filter((e) => matchFilter(f, e));
      // A client with nothing learns exactly the matching events...
      const empty = await sync(nt, [], f);
      expect({ f, need: empty.need }).toEqual({ f, need: idsOf(match) });
      expect(empty.have).toEqual([]);
      // ...and a client with everything "has" exactly the ones outside the filter.
      const full = await sync(nt, all, f);
      expect({ f, have: full.have }).toEqual({ f, have: idsOf(all.filter((e) => !matchFilter(f, e))) });
      expect(full.need).toEqual([]);
    }

    // The combined case with differences on both sides.
    const f: Filter = { kinds: [1, 7], authors: [a.pubkey], since: T };
    const match = all.filter((e) => matchFilter(f, e));
    const lacking = match.slice(0, 2);
    const extra = mk(a, 1, T + 10);
    const r = await sync(nt, [...match.slice(2), extra], f);
    expect(r.need).toEqual(idsOf(lacking));
    expect(r.have).toEqual([extra.id]);
  });
});

describe("subscription ids", () => {
  let relay: TestRelay;
  const a = signer();
  const b = signer();
  const aEvents: NostrEvent[] = [];
  const bEvents: NostrEvent[] = [];
  beforeAll(async () => {
    relay = await relayWith();
    const c = await connect(relay.url);
    aEvents.push(...Array.from({ length: 3 }, () => mk(a)));
    bEvents.push(...Array.from({ length: 4 }, () => mk(b)));
    await publishAll(c, [...aEvents, ...bEvents]);
  });

  test("a REQ and a NEG-OPEN with the same id coexist; closing one leaves the other", async () => {
    const c = await connect(relay.url);
    const live = signer();
    expect((await c.req("x", { authors: [live.pubkey] })).end).toEqual(["EOSE", "x"]);
    const n = negClient();
    const opened = await negAnswer(c, ["NEG-OPEN", "x", { authors: [a.pubkey] }, n.initial]);
    expect(opened[0]).toBe("NEG-MSG");
    expect(n.reply(opened[2]).need).toEqual(idsOf(aEvents));

    // CLOSE ends the REQ, not the negentropy session.
    c.send(["CLOSE", "x"]);
    const again = await negAnswer(c, ["NEG-MSG", "x", negClient().initial]);
    expect(again[0]).toBe("NEG-MSG");
    expect(negClient().reply(again[2]).need).toEqual(idsOf(aEvents));

    // NEG-CLOSE ends the session, not a REQ of the same id.
    expect((await c.req("x", { authors: [live.pubkey] })).end).toEqual(["EOSE", "x"]);
    c.send(["NEG-CLOSE", "x"]);
    const e = mk(live, 1, now());
    const other = await connect(relay.url);
    await publishAll(other, [e]);
    expect((await c.next((f) => f[0] === "EVENT" && f[1] === "x"))[2].id).toBe(e.id);
    const closed = await negAnswer(c, ["NEG-MSG", "x", negClient().initial]);
    expect(closed[0]).toBe("NEG-ERR");
    expect(closed[2]).toStartWith("closed:");
    // The REQ is still live.
    const e2 = mk(live, 1, now());
    await publishAll(other, [e2]);
    expect((await c.next((f) => f[0] === "EVENT" && f[1] === "x" && f[2].id === e2.id))[2].id).toBe(e2.id);
  });

  test("reopening an id replaces the session: replies belong to the new filter", async () => {
    const c = await connect(relay.url);
    const first = await negAnswer(c, ["NEG-OPEN", "r", { authors: [a.pubkey] }, negClient().initial]);
    expect(negClient().reply(first[2]).need).toEqual(idsOf(aEvents));
    const second = await negAnswer(c, ["NEG-OPEN", "r", { authors: [b.pubkey] }, negClient().initial]);
    expect(second[0]).toBe("NEG-MSG");
    expect(negClient().reply(second[2]).need).toEqual(idsOf(bEvents));
    // Later NEG-MSGs are answered from the new session.
    const third = await negAnswer(c, ["NEG-MSG", "r", negClient().initial]);
    expect(negClient().reply(third[2]).need).toEqual(idsOf(bEvents));

    // Back to back, so the second arrives while the first is still reading the store: the first
    // is never answered (its reply would be taken for the new filter's), the second is. The reads
    // are held until the second NEG-OPEN has been handled (the REQ after it answered: one
    // connection's messages are handled in order); else a box that handles the two frames in two
    // turns lets the first read finish and be answered before it is replaced.
    const from = c.frames.length;
    let release!: () => void;
    const reads = countNegReads(relay, new Promise<void>((r) => (release = r)));
    try {
      c.send(["NEG-OPEN", "race", { authors: [a.pubkey] }, negClient().initial]);
      c.send(["NEG-OPEN", "race", { authors: [b.pubkey] }, negClient().initial]);
      await c.req("after-reopen", { limit: 0 });
      release();
      await c.next((f) => f[0] === "NEG-MSG" && f[1] === "race", 5000, from);
      await until(() => reads.finished() >= 2, "both NEG-OPEN reads");
    } finally {
      reads.restore();
    }
    await settle(c);
    const replies = c.frames.slice(from).filter((f) => f[1] === "race");
    expect(replies).toHaveLength(1);
    expect(replies[0][0]).toBe("NEG-MSG");
    expect(negClient().reply(replies[0][2]).need).toEqual(idsOf(bEvents));
  });

  test("NEG-CLOSE right after NEG-OPEN, while the store is read: no reply at all", async () => {
    const c = await connect(relay.url);
    const from = c.frames.length;
    // The read is held until the NEG-CLOSE has been handled (the REQ after it answered: one
    // connection's messages are handled in order), however slowly the box runs.
    let release!: () => void;
    const reads = countNegReads(relay, new Promise<void>((r) => (release = r)));
    try {
      c.send(["NEG-OPEN", "gone", {}, negClient().initial]);
      c.send(["NEG-CLOSE", "gone"]);
      await c.req("after-close", { limit: 0 });
      release();
      await until(() => reads.finished() >= 1, "the NEG-OPEN read");
    } finally {
      reads.restore();
    }
    await settle(c);
    expect(c.frames.slice(from).filter((f) => f[1] === "gone")).toEqual([]);
  });

  test("frames sent back to back are answered in order: NEG-OPEN, NEG-MSGs, an oversize NEG-MSG, NEG-CLOSE", async () => {
    const small = await relayWith({ limits: { max_message_bytes: 4096 } });
    const c = await connect(small.url);
    await publishAll(c, aEvents);
    const n = negClient();
    const from = c.frames.length;
    // Without waiting for any reply: each NEG-MSG waits for the open's items (read in a worker)
    // and for the one before it; the oversize one is refused in its turn, not ahead of them.
    c.send(["NEG-OPEN", "seq", { authors: [a.pubkey] }, n.initial]);
    c.send(["NEG-MSG", "seq", n.initial]);
    c.send(["NEG-MSG", "seq", n.initial]);
    c.send(["NEG-MSG", "seq", "61" + "ab".repeat(4000)]);
    c.send(["NEG-MSG", "seq", n.initial]);
    c.send(["NEG-CLOSE", "seq"]);
    await c.next((f) => f[1] === "seq" && f[0] === "NEG-ERR" && String(f[2]).startsWith("closed:"), 5000, from);
    const answers = c.frames.slice(from).filter((f) => f[1] === "seq");
    expect(answers.map((f) => f[0])).toEqual(["NEG-MSG", "NEG-MSG", "NEG-MSG", "NEG-ERR", "NEG-ERR"]);
    for (const f of answers.slice(0, 3)) expect(negClient().reply(f[2]).need).toEqual(idsOf(aEvents));
    expect(answers[3]![2]).toStartWith("invalid: message is larger");
  });

  test("frames still waiting when the connection closes are dropped: no session and no item count is left behind", async () => {
    // Each store read takes 150 ms, so the second NEG-OPEN is still waiting in its lane at the close.
    const store = (relay.ctx.store.negentropy ?? relay.ctx.store) as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
    const method = relay.ctx.store.negentropy ? "open" : "negentropyItems";
    const read = store[method]!;
    let reads = 0;
    let finished = 0;
    let handles = 0;
    let closedHandles = 0;
    // Other tests' connections on this relay may still hold sessions: compare with what they hold.
    const held = () => [...relay.ctx.negItems.values()].reduce((x, y) => x + y, 0);
    const before = held();
    store[method] = async (...args) => {
      reads++;
      await Bun.sleep(150);
      try {
        const r = (await read.apply(store, args)) as { close?: () => void };
        if (typeof r?.close === "function") {
          handles++;
          const close = r.close.bind(r);
          r.close = () => (closedHandles++, close());
        }
        return r;
      } finally {
        finished++;
      }
    };
    try {
      const c = await connect(relay.url);
      c.send(["NEG-OPEN", "late", { authors: [a.pubkey] }, negClient().initial]);
      c.send(["NEG-OPEN", "late", { authors: [b.pubkey] }, negClient().initial]);
      await until(() => reads >= 1, "the first read");
      c.close();
      await until(() => finished >= 1, "the first read to end");
      // A queued NEG-OPEN that ran after the close would start its read within a few ms of it.
      await Bun.sleep(100);
      await until(() => finished >= reads, "every read to end");
    } finally {
      store[method] = read;
    }
    expect(reads).toBe(1);
    expect(held()).toBe(before);
    expect(closedHandles).toBe(handles);
  });

  test("NEG-CLOSE, then NEG-MSG on that id -> NEG-ERR closed:", async () => {
    const c = await connect(relay.url);
    const n = negClient();
    expect((await negAnswer(c, ["NEG-OPEN", "z", {}, n.initial]))[0]).toBe("NEG-MSG");
    c.send(["NEG-CLOSE", "z"]);
    const err = await negAnswer(c, ["NEG-MSG", "z", n.initial]);
    expect(err[0]).toBe("NEG-ERR");
    expect(err[2]).toStartWith("closed:");
    // A NEG-CLOSE for an id that is not open is silently ignored.
    c.send(["NEG-CLOSE", "never-opened"]);
    await settle(c);
    expect(c.frames.filter((f) => f[1] === "never-opened" || f[0] === "NOTICE")).toEqual([]);
  });
});

describe("malformed messages are answered with NEG-ERR, never NOTICE", () => {
  let relay: TestRelay;
  beforeAll(async () => {
    relay = await relayWith();
    const c = await connect(relay.url);
    const s = signer();
    await publishAll(
      c,
      Array.from({ length: 3 }, () => mk(s)),
    );
  });

  test("a bad initial message or filter -> NEG-ERR invalid:", async () => {
    const c = await connect(relay.url);
    const good = negClient().initial;
    const cases: [string, unknown, unknown][] = [
      ["non-hex", {}, "zz"],
      ["hex with a non-hex char", {}, good.slice(0, -2) + "0g"],
      ["odd length", {}, good + "0"],
      ["empty", {}, ""],
      ["not a string", {}, 61],
      ["missing", {}, undefined],
      ["truncated varint", {}, "6180"],
      ["unknown mode", {}, "61000003"],
      ["truncated fingerprint", {}, "610000" + "01" + "00".repeat(8)],
      ["id list longer than the message", {}, "610000" + "02" + "05" + "00".repeat(32)],
      ["version byte out of range", {}, "01"],
      ["filter with string kinds", { kinds: ["1"] }, good],
      ["filter with a bad author", { authors: ["xyz"] }, good],
      ["filter that is not an object", 42, good],
      ["filter that is null", null, good],
    ];
    for (const [name, filter, msg] of cases) {
      const frame = msg === undefined ? ["NEG-OPEN", name, filter] : ["NEG-OPEN", name, filter, msg];
      const r = await negAnswer(c, frame);
      expect({ name, frame: r }).toEqual({ name, frame: ["NEG-ERR", name, expect.stringMatching(/^invalid: /)] });
      // The session is gone: a good NEG-MSG on that id is not answered as if it were open.
      const after = await negAnswer(c, ["NEG-MSG", name, good]);
      expect({ name, after: after[0] }).toEqual({ name, after: "NEG-ERR" });
    }
    await settle(c);
    expect(c.frames.filter((f) => f[0] === "NOTICE")).toEqual([]);
  });

  test("a bad NEG-MSG on an open session -> NEG-ERR invalid:, and the session is closed", async () => {
    const c = await connect(relay.url);
    const cases: [string, unknown][] = [
      ["non-hex", "xyz!"],
      ["odd length", "610"],
      ["truncated varint", "61ff"],
      ["unknown mode", "61000007"],
      ["bounds out of order", "61" + "0a01ff00" + "01010000"],
      ["a range after the infinity bound", "61" + "000000" + "000000"],
    ];
    for (const [name, msg] of cases) {
      const n = negClient();
      expect((await negAnswer(c, ["NEG-OPEN", name, {}, n.initial]))[0]).toBe("NEG-MSG");
      const r = await negAnswer(c, ["NEG-MSG", name, msg]);
      expect({ name, frame: r }).toEqual({ name, frame: ["NEG-ERR", name, expect.stringMatching(/^invalid: /)] });
      const after = await negAnswer(c, ["NEG-MSG", name, n.initial]);
      expect({ name, after }).toEqual({ name, after: ["NEG-ERR", name, expect.stringMatching(/^closed: /)] });
    }
    await settle(c);
    expect(c.frames.filter((f) => f[0] === "NOTICE")).toEqual([]);
  });

  test("a NEG-OPEN or NEG-MSG over max_message_bytes -> NEG-ERR for its id, not NOTICE", async () => {
    const small = await relayWith({ limits: { max_message_bytes: 4096 } });
    const c = await connect(small.url);
    // A well-formed V1 message: one IdList range of 100 ids, 6.4 KB of hex.
    const big = "61" + "0000" + "02" + "64" + "ab".repeat(32 * 100);
    expect(await negAnswer(c, ["NEG-OPEN", "huge", {}, big], "huge", 1500)).toEqual([
      "NEG-ERR",
      "huge",
      expect.stringMatching(/^[a-z-]+: /),
    ]);
    const n = negClient();
    expect((await negAnswer(c, ["NEG-OPEN", "open", {}, n.initial]))[0]).toBe("NEG-MSG");
    // The session cannot go on without that message; the client must be told it is over.
    expect(await negAnswer(c, ["NEG-MSG", "open", big], "open", 1500)).toEqual(["NEG-ERR", "open", expect.stringMatching(/^[a-z-]+: /)]);
    expect((await negAnswer(c, ["NEG-MSG", "open", n.initial]))[0]).toBe("NEG-ERR");
    expect(c.frames.filter((f) => f[0] === "NOTICE")).toEqual([]);
  });

  test("a NEG-MSG for an id never opened -> NEG-ERR", async () => {
    const c = await connect(relay.url);
    const r = await negAnswer(c, ["NEG-MSG", "unknown-id", negClient().initial]);
    expect(r).toEqual(["NEG-ERR", "unknown-id", expect.stringMatching(/^closed: /)]);
    await settle(c);
    expect(c.frames.filter((f) => f[0] === "NOTICE")).toEqual([]);
  });

  test("an unsupported protocol version (0x62) is answered NEG-MSG 61, so the client can downgrade", async () => {
    const c = await connect(relay.url);
    expect(await negAnswer(c, ["NEG-OPEN", "v2", {}, "62"])).toEqual(["NEG-MSG", "v2", "61"]);
    // A V2 message with a body gets the same answer.
    expect(await negAnswer(c, ["NEG-OPEN", "v2b", {}, "62" + "0000" + "02" + "00"])).toEqual(["NEG-MSG", "v2b", "61"]);
    // Downgraded: a V1 message on a new NEG-OPEN works.
    const n = negClient();
    const r = await negAnswer(c, ["NEG-OPEN", "v2", {}, n.initial]);
    expect(r[0]).toBe("NEG-MSG");
    expect(n.reply(r[2]).need).toHaveLength(3);
  });
});

describe("limits and configuration", () => {
  test("more matching events than max_negentropy_items -> NEG-ERR blocked:", async () => {
    const relay = await relayWith({ limits: { max_negentropy_items: 100 } });
    const a = signer();
    const b = signer();
    const c = await connect(relay.url);
    const t = now() - 1000;
    await publishAll(c, [
      ...Array.from({ length: 100 }, (_, i) => mk(a, 1, t + i)),
      ...Array.from({ length: 5 }, (_, i) => mk(b, 1, t + i)),
    ]);

    const over = await negAnswer(c, ["NEG-OPEN", "big", {}, negClient().initial]);
    expect(over).toEqual(["NEG-ERR", "big", expect.stringMatching(/^blocked: /)]);
    // The session is closed after the NEG-ERR.
    expect((await negAnswer(c, ["NEG-MSG", "big", negClient().initial]))[0]).toBe("NEG-ERR");

    // Exactly at the cap is served, all of it.
    const nt = await ntConnect(relay.url);
    expect((await sync(nt, [], { authors: [a.pubkey] })).need).toHaveLength(100);
    expect((await sync(nt, [], { authors: [b.pubkey] })).need).toHaveLength(5);
    await expect(sync(nt, [], {})).rejects.toThrow(/NEG-ERR.*blocked:/);
  });

  test("max_negentropy_items_total bounds the sessions of all connections together, whatever their addresses", async () => {
    const relay = await relayWith({ limits: { max_negentropy_items: 100, max_negentropy_items_total: 150 } });
    const [a, b, c, d] = [signer(), signer(), signer(), signer()];
    const t = now() - 1000;
    const c1 = await connect(relay.url);
    const c2 = await connect(relay.url);
    await publishAll(c1, [
      ...Array.from({ length: 100 }, (_, i) => mk(a, 1, t + i)),
      ...Array.from({ length: 60 }, (_, i) => mk(b, 1, t + i)),
      ...Array.from({ length: 50 }, (_, i) => mk(c, 1, t + i)),
      mk(d, 1, t),
    ]);
    // c1 holds 100 items; c2 may hold 50 more, not the 60 of b (its own cap is 100).
    expect((await negAnswer(c1, ["NEG-OPEN", "all-a", { authors: [a.pubkey] }, negClient().initial]))[0]).toBe("NEG-MSG");
    expect(relay.ctx.negItemsTotal).toBe(100);
    const by = (s: Signer) => ({ authors: [s.pubkey] });
    expect(await negAnswer(c2, ["NEG-OPEN", "x", by(b), negClient().initial])).toEqual([
      "NEG-ERR",
      "x",
      expect.stringMatching(/^blocked: /),
    ]);
    expect((await negAnswer(c2, ["NEG-OPEN", "b", by(c), negClient().initial]))[0]).toBe("NEG-MSG");
    expect(relay.ctx.negItemsTotal).toBe(150);
    // At the limit, even a session of a single event is refused, and told why.
    expect(await negAnswer(c2, ["NEG-OPEN", "y", by(d), negClient().initial])).toEqual([
      "NEG-ERR",
      "y",
      expect.stringMatching(/^blocked: this relay's open negentropy sessions are at their limit/),
    ]);
    // Items go back when a session closes, and when its connection goes.
    c2.send(["NEG-CLOSE", "b"]);
    await settle(c2);
    expect(relay.ctx.negItemsTotal).toBe(100);
    c1.close();
    for (let i = 0; i < 100 && relay.ctx.negItemsTotal > 0; i++) await Bun.sleep(20);
    expect(relay.ctx.negItemsTotal).toBe(0);
    expect((await negAnswer(c2, ["NEG-OPEN", "all-a", { authors: [a.pubkey] }, negClient().initial]))[0]).toBe("NEG-MSG");
  });

  test("a session with no NEG-MSG for negentropy_idle_seconds is closed with NEG-ERR closed: and its items freed", async () => {
    const relay = await relayWith({ limits: { negentropy_idle_seconds: 1 } });
    const a = signer();
    const c = await connect(relay.url);
    await publishAll(
      c,
      Array.from({ length: 5 }, (_, i) => mk(a, 1, now() - 100 + i)),
    );
    const n = negClient();
    const first = await negAnswer(c, ["NEG-OPEN", "s", { authors: [a.pubkey] }, n.initial]);
    expect(first[0]).toBe("NEG-MSG");
    expect(relay.ctx.negItemsTotal).toBe(5);
    // Kept open by its messages: 3 round trips spread over 1.5 s.
    for (let i = 0; i < 3; i++) {
      await Bun.sleep(500);
      expect((await negAnswer(c, ["NEG-MSG", "s", n.initial]))[0]).toBe("NEG-MSG");
    }
    // Then quiet: the relay says so on its own, and forgets it.
    const from = c.frames.length;
    const closed = await c.next((f) => f[0] === "NEG-ERR" && f[1] === "s", 5000, from);
    expect(closed).toEqual(["NEG-ERR", "s", expect.stringMatching(/^closed: /)]);
    expect(relay.ctx.negItemsTotal).toBe(0);
    expect(await negAnswer(c, ["NEG-MSG", "s", n.initial])).toEqual(["NEG-ERR", "s", expect.stringMatching(/^closed: /)]);
  });

  test("negentropy sessions count against max_subscriptions, apart from REQs; auth = always applies", async () => {
    const relay = await relayWith({ limits: { max_subscriptions: 2 } });
    const c = await connect(relay.url);
    expect((await c.req("q1", {})).end[0]).toBe("EOSE");
    expect((await c.req("q2", {})).end[0]).toBe("EOSE");
    expect((await negAnswer(c, ["NEG-OPEN", "a", {}, negClient().initial]))[0]).toBe("NEG-MSG");
    expect((await negAnswer(c, ["NEG-OPEN", "b", {}, negClient().initial]))[0]).toBe("NEG-MSG");
    expect(await negAnswer(c, ["NEG-OPEN", "c", {}, negClient().initial])).toEqual([
      "NEG-ERR",
      "c",
      expect.stringMatching(/^rate-limited: /),
    ]);
    // Reopening an open id replaces it, so it is not one too many.
    expect((await negAnswer(c, ["NEG-OPEN", "b", {}, negClient().initial]))[0]).toBe("NEG-MSG");
    c.send(["NEG-CLOSE", "a"]);
    expect((await negAnswer(c, ["NEG-OPEN", "c", {}, negClient().initial]))[0]).toBe("NEG-MSG");

    const strict = await relayWith({ options: { auth: "always" } });
    const s = await connect(strict.url);
    expect(await negAnswer(s, ["NEG-OPEN", "n", {}, negClient().initial])).toEqual([
      "NEG-ERR",
      "n",
      expect.stringMatching(/^auth-required: /),
    ]);
  });

  test("nip77 = false: NEG-OPEN gets NEG-ERR and NIP-11 does not list 77", async () => {
    const off = await relayWith({ nips: { nip77: false } });
    const on = await relayWith();
    const info = async (r: TestRelay) =>
      (await (await fetch(r.url.replace(/^ws/, "http"), { headers: { Accept: "application/nostr+json" } })).json()) as any;
    expect((await info(on)).supported_nips).toContain(77);
    expect((await info(off)).supported_nips).not.toContain(77);

    const c = await connect(off.url);
    const r = await negAnswer(c, ["NEG-OPEN", "n", {}, negClient().initial]);
    expect(r).toEqual(["NEG-ERR", "n", expect.stringMatching(/^[a-z-]+: /)]);
    expect((await negAnswer(c, ["NEG-MSG", "n", negClient().initial]))[0]).toBe("NEG-ERR");
    const c2 = await connect(on.url);
    expect((await negAnswer(c2, ["NEG-OPEN", "n", {}, negClient().initial]))[0]).toBe("NEG-MSG");
  });
});

describe("restricted kinds (DMs) through negentropy", () => {
  let relay: TestRelay;
  const alice = signer();
  const bob = signer();
  const carol = signer();
  const publicEvents: NostrEvent[] = [];
  let dm4: NostrEvent;
  let wrap: NostrEvent;

  beforeAll(async () => {
    relay = await relayWith();
    publicEvents.push(mk(alice, 1), mk(bob, 1), mk(carol, 7));
    dm4 = mk(alice, 4, now() - 50, [["p", bob.pubkey]]);
    wrap = mk(signer(), 1059, now() - 60, [["p", bob.pubkey]]);
    const c = await connect(relay.url);
    await publishAll(c, [...publicEvents, dm4, wrap]);
  });

  const authAs = async (nt: Relay, s: Signer) => {
    for (let i = 0; i < 100 && !(nt as any).challenge; i++) await Bun.sleep(10);
    expect(await nt.auth(async (t) => finalizeEvent(t, s.sk))).toBe("");
  };

  test("unauthenticated: NEG-OPEN for kind 1059 -> NEG-ERR auth-required:", async () => {
    const c = await connect(relay.url);
    for (const kinds of [[1059], [4], [1, 4]]) {
      const r = await negAnswer(c, ["NEG-OPEN", "dm", { kinds }, negClient().initial]);
      expect({ kinds, r }).toEqual({ kinds, r: ["NEG-ERR", "dm", expect.stringMatching(/^auth-required: /)] });
    }
  });

  test("filter {}: DMs are outside the relay's set unless the connection is their author or recipient", async () => {
    // Unauthenticated: the relay's set is exactly the public events.
    const anon = await ntConnect(relay.url);
    expect(await sync(anon, [], {})).toMatchObject({ need: idsOf(publicEvents), have: [] });
    // A client that holds the DMs sees them as "have": the relay does not show it its copies.
    expect((await sync(anon, [...publicEvents, dm4, wrap], {})).have).toEqual(idsOf([dm4, wrap]));

    // Authenticated as someone else: still hidden.
    const asCarol = await ntConnect(relay.url);
    await authAs(asCarol, carol);
    expect(await sync(asCarol, publicEvents, {})).toMatchObject({ need: [], have: [] });
    expect((await sync(asCarol, [], { kinds: [1059] })).need).toEqual([]);

    // The recipient sees both; the kind-4 author sees hers but not the wrap (signed by another key).
    const asBob = await ntConnect(relay.url);
    await authAs(asBob, bob);
    expect(await sync(asBob, publicEvents, {})).toMatchObject({ need: idsOf([dm4, wrap]), have: [] });
    expect((await sync(asBob, [], { kinds: [1059] })).need).toEqual([wrap.id]);
    const asAlice = await ntConnect(relay.url);
    await authAs(asAlice, alice);
    expect((await sync(asAlice, publicEvents, {})).need).toEqual([dm4.id]);
  });
});
