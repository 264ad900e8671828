// Two real `bunstr` processes on one Postgres database and one Redis bus, over real websockets:
// cross-node fanout exactly once and how fast, one winner for concurrent replaceable and
// addressable writes, admin changes on every node, NIP-29 group state on every node, and a node
// killed with SIGKILL.
// Named *.pgtest.ts so that the default `bun test` (SQLite, no services) does not pick it up;
// test/postgres-suite.ts runs it by path.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { SQL } from "bun";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { adminCall, Client, now, relayInfo, signer, type Signer } from "../helpers.ts";
import { createDatabase, dropDatabase, REDIS_URL } from "../postgres-env.ts";
import { spawnRelay, type RelayProcess } from "../process-helpers.ts";
import { SOURCE } from "../relay-process.ts";
import { serializeEvent, type NostrEvent } from "../../src/protocol/event.ts";
import { PostgresStore } from "../../src/store/postgres/store.ts";

const admin = signer();
const dir = mkdtempSync(join(tmpdir(), "bunstr-cluster-"));
const dbName = `bunstr_cluster_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
let dbUrl = "";
let sql: SQL | undefined;
let a: RelayProcess;
let b: RelayProcess;
const clients: Client[] = [];

async function connect(node: RelayProcess): Promise<Client> {
  const c = await Client.connect(node.url);
  clients.push(c);
  return c;
}

beforeAll(async () => {
  dbUrl = await createDatabase(dbName);
  sql = new SQL({ url: dbUrl, max: 1 } as ConstructorParameters<typeof SQL>[0]);
  const config = join(dir, "bunstr.toml");
  writeFileSync(
    config,
    `[database]\nengine = "postgres"\npostgres_url = "${dbUrl}"\nbus_url = "${REDIS_URL}"\n\n[admin]\npubkeys = ["${admin.pubkey}"]\n\n[groups]\nenabled = true\ncreators = "anyone"\n`,
  );
  // Both at once: the schema migration runs under an advisory lock.
  const started = await Promise.allSettled([spawnRelay(SOURCE, ["--config", config], dir), spawnRelay(SOURCE, ["--config", config], dir)]);
  [a, b] = started.map((r) => (r.status === "fulfilled" ? r.value : undefined!)) as [RelayProcess, RelayProcess];
  for (const r of started) if (r.status === "rejected") throw r.reason;
}, 30_000);

afterAll(async () => {
  for (const c of clients) c.close();
  for (const n of [a, b]) {
    if (n && n.proc.exitCode === null) {
      n.proc.kill(9);
      await n.proc.exited;
    }
  }
  await sql?.close();
  await dropDatabase(dbName);
  rmSync(dir, { recursive: true, force: true });
});

/** Prints a measurement (straight to stdout: earlier test files in the same run mock console). */
const report = (line: string) => process.stdout.write(`cluster: ${line}\n`);

/** How often each id arrived for this subscription (EVENT frames only). */
function tally(c: Client, subId: string): Map<string, number> {
  const m = new Map<string, number>();
  for (const e of c.eventsFor(subId)) m.set(e.id, (m.get(e.id) ?? 0) + 1);
  return m;
}

/** Waits until `done()` or the deadline; then waits `settleMs` more for late duplicates. */
async function until(done: () => boolean, timeoutMs: number, settleMs = 300): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done() && Date.now() < deadline) await Bun.sleep(10);
  await Bun.sleep(settleMs);
}

/** Sends every event without waiting and resolves with the OK frames, by id: one for each event. */
async function publishAll(c: Client, events: NostrEvent[]): Promise<Map<string, any[]>> {
  const from = c.frames.length;
  for (const e of events) c.send(["EVENT", e]);
  const ids = new Set(events.map((e) => e.id));
  await until(() => c.frames.slice(from).filter((f) => f[0] === "OK" && ids.has(f[1])).length >= ids.size, 15_000, 0);
  const oks = new Map(
    c.frames
      .slice(from)
      .filter((f) => f[0] === "OK" && ids.has(f[1]))
      .map((f) => [f[1], f]),
  );
  // An event left unanswered would otherwise vanish from the map and from every check on it.
  expect(events.filter((e) => !oks.has(e.id)).map((e) => e.id)).toEqual([]);
  return oks;
}

function expectExactlyOnce(c: Client, subId: string, ids: string[]): void {
  const t = tally(c, subId);
  const missing = ids.filter((id) => !t.has(id));
  const twice = [...t].filter(([, n]) => n > 1);
  expect({ missing: missing.length, duplicated: twice.length }).toEqual({ missing: 0, duplicated: 0 });
  expect(t.size).toBe(ids.length);
}

describe("fanout across nodes", () => {
  test("an ephemeral event (never stored) accepted on A reaches a live subscriber on B once", async () => {
    const s = signer();
    const pub = await connect(a);
    const subB = await connect(b);
    const subA = await connect(a);
    await subB.req("eph", { kinds: [20001], authors: [s.pubkey] });
    await subA.req("eph", { kinds: [20001], authors: [s.pubkey] });
    const events = Array.from({ length: 10 }, (_, i) => s.sign({ kind: 20001, content: `typing ${i}` }));
    const oks = await publishAll(pub, events);
    expect(events.map((e) => oks.get(e.id)?.[2])).toEqual(events.map(() => true));
    const ids = events.map((e) => e.id);
    await until(() => tally(subB, "eph").size >= ids.length && tally(subA, "eph").size >= ids.length, 3000);
    expectExactlyOnce(subB, "eph", ids);
    expectExactlyOnce(subA, "eph", ids);
    expect((await subB.req("stored", { ids })).events).toEqual([]);
  });

  test("an event accepted on A reaches a live subscriber on B once, quickly", async () => {
    const s = signer();
    const pub = await connect(a);
    const sub = await connect(b);
    await sub.req("x", { kinds: [1], authors: [s.pubkey] });
    const delays: number[] = [];
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      const e = s.sign({ kind: 1, content: `hop ${i}` });
      ids.push(e.id);
      const from = sub.frames.length;
      const t0 = performance.now();
      pub.send(["EVENT", e]);
      await sub.next((f) => f[0] === "EVENT" && f[1] === "x" && f[2].id === e.id, 5000, from);
      delays.push(performance.now() - t0);
    }
    await Bun.sleep(300);
    expectExactlyOnce(sub, "x", ids);
    delays.sort((x, y) => x - y);
    const median = delays[delays.length >> 1]!;
    const max = delays[delays.length - 1]!;
    report(`cross-node delay (EVENT sent to A -> EVENT on B), 20 events: median ${median.toFixed(1)} ms, max ${max.toFixed(1)} ms`);
    // The bus, not the 1 s polling safety net, carries them.
    expect(median).toBeLessThan(250);
    expect(max).toBeLessThan(1000);
  });

  test("a concurrent stream on both nodes reaches subscribers on both nodes exactly once, also REQs opened mid-stream", async () => {
    const authors = [signer(), signer(), signer()];
    const filter = { kinds: [1], authors: authors.map((s) => s.pubkey), limit: 5000 };
    const [pubA, pubB, subA, subB] = await Promise.all([connect(a), connect(b), connect(a), connect(b)]);
    await Promise.all([subA.req("s", filter), subB.req("s", filter)]);
    const base = now() - 600;
    const make = (tag: string, n: number) =>
      Array.from({ length: n }, (_, i) =>
        authors[i % authors.length]!.sign({ kind: 1, content: `${tag} ${i}`, created_at: base + (i % 500) }),
      );
    const onA = make("A", 200);
    const onB = make("B", 200);
    const all = [...onA, ...onB].map((e) => e.id);

    // In waves, so that the late REQs below open while events are still coming on both nodes.
    const stream = async (c: Client, events: NostrEvent[]) => {
      for (let i = 0; i < events.length; i += 20) {
        const oks = await publishAll(c, events.slice(i, i + 20));
        for (const ok of oks.values()) expect(ok[2]).toBe(true);
      }
    };
    const late: [Client, string][] = [];
    const opener = (async () => {
      const deadline = Date.now() + 10_000;
      while (tally(subB, "s").size < 120 && Date.now() < deadline) await Bun.sleep(2);
      const [lateB, lateA] = await Promise.all([connect(b), connect(a)]);
      lateB.send(["REQ", "late", filter]);
      lateA.send(["REQ", "late", filter]);
      late.push([lateB, "late"], [lateA, "late"]);
    })();
    await Promise.all([stream(pubA, onA), stream(pubB, onB), opener]);
    const everyone: [Client, string][] = [[subA, "s"], [subB, "s"], ...late];
    await until(() => everyone.every(([c, id]) => tally(c, id).size >= all.length), 10_000, 500);
    for (const [c, id] of everyone) expectExactlyOnce(c, id, all);
    // The late REQs really opened mid-stream: part of what they got came live after their EOSE.
    for (const [c] of late) {
      const eose = c.frames.findIndex((f) => f[0] === "EOSE" && f[1] === "late");
      expect(eose).toBeGreaterThan(0);
      const stored = c.frames.slice(0, eose).filter((f) => f[0] === "EVENT").length;
      report(`a REQ opened mid-stream: ${stored} stored + ${all.length - stored} live`);
      expect(stored).toBeGreaterThan(0);
      expect(stored).toBeLessThan(all.length);
    }
  }, 30_000);
});

describe("concurrent replaceable and addressable writes on both nodes", () => {
  /** The newest created_at wins; among equals, the lowest id. */
  const winner = (events: NostrEvent[]) => [...events].sort((x, y) => y.created_at - x.created_at || (x.id < y.id ? -1 : 1))[0]!;

  async function race(kind: number, tags: string[][]): Promise<void> {
    let empty = 0;
    for (let round = 0; round < 5; round++) {
      const s: Signer = signer();
      const base = now() - 100;
      // Ten versions plus three ties at the newest created_at; odd ones to A, even ones to B,
      // A newest first and B oldest first so that the two writers overlap.
      const versions = Array.from({ length: 13 }, (_, i) =>
        s.sign({ kind, tags, content: `v${i} r${round}`, created_at: base + Math.min(i, 10) }),
      );
      const toA = versions.filter((_, i) => i % 2 === 1).reverse();
      const toB = versions.filter((_, i) => i % 2 === 0);
      const [ca, cb] = await Promise.all([connect(a), connect(b)]);
      await Promise.all([publishAll(ca, toA), publishAll(cb, toB)]);
      const want = winner(versions);
      const f: Record<string, unknown> = { kinds: [kind], authors: [s.pubkey] };
      if (tags.length) f["#d"] = [tags[0]![1]];
      // The database holds the one winner as soon as both nodes have answered OK.
      const rows = await sql!`SELECT encode(id, 'hex') AS id FROM events WHERE pubkey = decode(${s.pubkey}, 'hex') AND kind = ${kind}`;
      expect(rows.map((r: { id: string }) => r.id)).toEqual([want.id]);
      // Each node answers as of the commits it has applied: until the other node's batch has
      // come over the bus (milliseconds) it may still answer nothing (its own version is gone,
      // the winner is newer than its snapshot), never a losing version.
      const t0 = performance.now();
      for (const c of [ca, cb]) {
        let got: string[] = [];
        for (let n = 0; !got.length && performance.now() - t0 < 1000; n++) {
          if (n) await Bun.sleep(5);
          got = (await c.req(`w${n}`, f)).events.map((e) => e.id);
          if (!got.length) empty++;
        }
        expect(got).toEqual([want.id]);
      }
      expect(performance.now() - t0).toBeLessThan(1000);
      ca.close();
      cb.close();
    }
    report(`kind ${kind}: 5 rounds of 13 versions on both nodes; empty answers (the other node's batch not applied yet): ${empty}`);
  }

  test("kind 0: one winner (newest, ties by lowest id), the same on both nodes", () => race(0, []), 20_000);
  test("kind 30023 with the same d: one winner, the same on both nodes", () => race(30023, [["d", "post"]]), 20_000);
});

describe("admin state", () => {
  async function call(n: RelayProcess, method: string, params: unknown[]): Promise<any> {
    const res = await adminCall(n.url, admin, method, params);
    expect(res.status).toBe(200);
    return res.body.result;
  }

  test("a pubkey banned through NIP-86 on A is refused on B at once", async () => {
    const x = signer();
    const cb = await connect(b);
    const before = await cb.publish(x.sign({ kind: 1, content: "before" }));
    expect(before[2]).toBe(true);
    expect(await call(a, "banpubkey", [x.pubkey, "spam"])).toBe(true);
    const t0 = performance.now();
    let ok: any[];
    for (;;) {
      ok = await cb.publish(x.sign({ kind: 1, content: "after" }));
      if (ok[2] === false || performance.now() - t0 > 3000) break;
      await Bun.sleep(20);
    }
    const took = performance.now() - t0;
    report(`banpubkey on A took effect on B after ${took.toFixed(0)} ms`);
    expect(ok[2]).toBe(false);
    expect(ok[3]).toStartWith("blocked:");
    expect(took).toBeLessThan(1000);
    expect((await call(b, "listbannedpubkeys", [])).map((e: { pubkey: string }) => e.pubkey)).toContain(x.pubkey);
  });

  test("what a ban on A hides is hidden on B, and an unban on A serves it on B again (issue 34)", async () => {
    const x = signer();
    const cb = await connect(b);
    const note = x.sign({ kind: 1, content: "hidden on both nodes" });
    expect((await cb.publish(note))[2]).toBe(true);
    const served = async () => (await cb.req(`q-${Math.random()}`, { authors: [x.pubkey] })).events.length;
    const soon = async (want: number) => {
      const deadline = Date.now() + 3000;
      while ((await served()) !== want && Date.now() < deadline) await Bun.sleep(20);
      return served();
    };
    expect(await call(a, "banpubkey", [x.pubkey, "spam"])).toBe(true);
    expect(await soon(0)).toBe(0);
    expect(await call(a, "unbanpubkey", [x.pubkey])).toBe(true);
    expect(await soon(1)).toBe(1);
  });
});

describe("NIP-29 groups", () => {
  /** Publishes until the OK is true (the other node's state follows the commit feed within ms), at most 5 s. */
  async function acceptedSoon(c: Client, make: () => NostrEvent): Promise<void> {
    const deadline = Date.now() + 5000;
    for (;;) {
      const ok = await c.publish(make());
      if (ok[2] || Date.now() > deadline) return expect(ok.slice(2)).toEqual([true, ""]);
      await Bun.sleep(50);
    }
  }

  test("a group created on A, joined on B: both nodes have the same members; the member's posts are accepted on both", async () => {
    const owner = signer();
    const member = signer();
    const outsider = signer();
    const id = `c-${crypto.randomUUID().slice(0, 8)}`;
    const onA = await connect(a);
    const onB = await connect(b);
    expect((await onA.auth(owner, a.url))[2]).toBe(true);
    let n = 0;
    // Each event its own (two posts in one second would be one event).
    const group =
      (kind: number, s: Signer, tags: string[][] = []) =>
      () =>
        s.sign({ kind, content: `${++n}`, tags: [["h", id], ...tags] });
    await acceptedSoon(onA, group(9007, owner));
    await acceptedSoon(onA, group(9002, owner, [["restricted"]]));
    await acceptedSoon(onB, group(9021, member));
    const self = (await relayInfo(a.url)).self;
    expect((await relayInfo(b.url)).self).toBe(self);
    // The members as each node lists them (39002, written by B after the join): the same from both.
    const members = async (c: Client) => {
      const { events } = await c.req(`m-${Math.random()}`, { kinds: [39002], authors: [self], "#d": [id] });
      return events.flatMap((e) => e.tags.filter((t) => t[0] === "p").map((t) => t[1])).sort();
    };
    expect(await members(onB)).toEqual([owner.pubkey, member.pubkey].sort());
    expect(await members(onA)).toEqual(await members(onB));
    await acceptedSoon(onA, group(9, member));
    await acceptedSoon(onB, group(9, member));
    for (const c of [onA, onB]) {
      const ok = await c.publish(group(9, outsider)());
      expect(ok.slice(2)).toEqual([false, "restricted: only members can write in this group"]);
    }
  }, 30_000);

  test("a 9005 whose node never carried it out (died after the commit) has its target deleted by the others", async () => {
    const owner = signer();
    const id = `d-${crypto.randomUUID().slice(0, 8)}`;
    const onA = await connect(a);
    expect((await onA.auth(owner, a.url))[2]).toBe(true);
    await acceptedSoon(onA, () => owner.sign({ kind: 9007, content: "", tags: [["h", id]] }));
    const post = owner.sign({ kind: 9, content: "to be deleted", tags: [["h", id]] });
    expect((await onA.publish(post)).slice(2)).toEqual([true, ""]);
    // A third writer on the same database and bus that deletes nothing: a node gone after its commit.
    const ghost = await PostgresStore.open({ url: dbUrl, busUrl: REDIS_URL, poolSize: 1, queryTimeoutMs: 10_000 });
    try {
      await ghost.ready();
      const del = owner.sign({
        kind: 9005,
        content: "",
        tags: [
          ["h", id],
          ["e", post.id],
        ],
      });
      const rules = { deletion: true, vanish: true, search: false, searchSkipKinds: new Set<number>() };
      expect((await ghost.writeBatch([{ event: del, json: serializeEvent(del) }], rules))[0]!.stored).toBe(true);
    } finally {
      await ghost.close();
    }
    // The other nodes delete it again 10 s after applying the 9005 (SWEEP_AFTER_MS).
    const reader = await connect(b);
    let left = 1;
    for (const deadline = Date.now() + 20_000; left > 0 && Date.now() < deadline; await Bun.sleep(250))
      left = (await reader.req(`x-${Math.random()}`, { ids: [post.id] })).events.length;
    expect(left).toBe(0);
  }, 40_000);
});

describe("a node killed with SIGKILL", () => {
  test("the other keeps serving, and every event the dead node acknowledged is readable from it", async () => {
    const s = signer();
    const live = await connect(b);
    await live.req("all", { authors: [s.pubkey], limit: 5000 });
    const pub = await connect(a);
    const events = Array.from({ length: 400 }, (_, i) => s.sign({ kind: 1, content: `doomed ${i}` }));
    const from = pub.frames.length;
    for (const e of events) pub.send(["EVENT", e]);
    // Kill while the burst is still being written.
    while (pub.frames.slice(from).filter((f) => f[0] === "OK").length < 50) await Bun.sleep(1);
    a.proc.kill(9);
    await a.proc.exited;
    const acked = pub.frames
      .slice(from)
      .filter((f) => f[0] === "OK" && f[2] === true)
      .map((f) => f[1] as string);
    expect(acked.length).toBeGreaterThanOrEqual(50);
    report(`killed node A after ${acked.length} of ${events.length} events were acknowledged`);

    // B's live subscriber gets each acknowledged event, exactly once: by the bus, or read from
    // Postgres by B's sequence poll when the dead node's bus message never went out.
    await until(() => acked.every((id) => tally(live, "all").has(id)), 5000);
    const t = tally(live, "all");
    expect(acked.filter((id) => !t.has(id))).toEqual([]);
    expect([...t].filter(([, n]) => n !== 1)).toEqual([]);
    // And a REQ on B finds them all.
    const reader = await connect(b);
    const { events: stored } = await reader.req("acked", { ids: acked, limit: 5000 });
    const storedIds = new Set(stored.map((e) => e.id));
    expect(acked.filter((id) => !storedIds.has(id))).toEqual([]);

    // B keeps serving: publish, live fanout and REQ.
    const after = s.sign({ kind: 1, content: "after the kill" });
    expect(await reader.publish(after)).toEqual(["OK", after.id, true, ""]);
    await live.next((f) => f[0] === "EVENT" && f[1] === "all" && f[2].id === after.id, 3000);
    expect((await reader.req("after", { ids: [after.id] })).events.map((e) => e.id)).toEqual([after.id]);
  }, 30_000);
});
