// Issue 36 item 3 over real websockets: a NIP-09 deletion of hundreds of heavy events (many tags
// each), and the same events expiring in the same second (NIP-40), must not stall the other
// clients' EVENTs. Both were one transaction in the writer thread (the kind 5's batch; a sweep
// of up to 5,000 events): an honest client on another address waited seconds for its OKs. Now
// both are purge steps between batches (store/sqlite/write.ts). The kind 5's OK comes once its
// targets are gone: none of them is served after it, from the store or from memory (the ring).
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RawWs } from "../bench/lib/rawws.ts";
import { serializeEvent, type NostrEvent } from "../src/protocol/event.ts";
import { openDatabase } from "../src/store/sqlite/db.ts";
import type { SqliteStore } from "../src/store/sqlite/store.ts";
import { SqliteWriter } from "../src/store/sqlite/write.ts";
import { failOnRelayErrors, now, signer, startTestRelay, type Signer, type TestRelay } from "./helpers.ts";
import { onPostgres } from "./postgres-env.ts";

failOnRelayErrors();

/** Heavy events and their tags: ~1M tag rows, ~2.5 s of deletes in one transaction on an idle 2-core box. */
const EVENTS = 600;
const TAGS = 1500;
/**
 * Under the old stall on a busy box (5-7 s; 1.7 s on an idle 2-core one), far over a purge step
 * (~5 ms) and a batch on a busy box (16-170 ms seen at load 3-14; 1,026 ms once beside a CPU hog
 * at load 10, when the bound was 1,000 ms). On the old code the deletion is also all at once: no
 * OK comes while it is partly done, which `during` below catches on an idle box too. The bound is
 * on the 90th percentile of the honest OKs: beside a CPU hog (load 5.5) one OK of 60 once took
 * 4.4 s while the other 59 came in time, the scheduler's doing, not a purge step's.
 */
const MAX_OK_MS = 2000;
/** The 90th percentile of the honest client's OK times. */
const p90 = (samples: { ms: number }[]): number => {
  const xs = samples.map((s) => s.ms).sort((a, b) => a - b);
  return xs[Math.min(xs.length - 1, Math.ceil(xs.length * 0.9) - 1)]!;
};
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Heavy events of `v` written straight into a new relay database (ids need not be real: never re-checked). */
function prefill(v: Signer, createdAt: number, expiration?: number): { dir: string; ids: string[] } {
  const dir = mkdtempSync(join(tmpdir(), "bunstr-deletion-stall-"));
  dirs.push(dir);
  const db = openDatabase({ path: join(dir, "bunstr.sqlite"), synchronous: "normal" });
  db.exec("PRAGMA synchronous = OFF");
  const w = new SqliteWriter(db);
  const rules = { deletion: true, vanish: true, search: true, searchSkipKinds: new Set<number>() };
  const ids: string[] = [];
  for (let i = 0; i < EVENTS; i += 50) {
    const batch = [];
    for (let k = i; k < Math.min(EVENTS, i + 50); k++) {
      const tags = Array.from({ length: TAGS }, (_, j) => ["t", `w${k}x${j}`]);
      if (expiration !== undefined) tags.push(["expiration", String(expiration)]);
      const e: NostrEvent = {
        id: k.toString(16).padStart(8, "0") + v.pubkey.slice(8),
        pubkey: v.pubkey,
        created_at: createdAt + k,
        kind: 1,
        tags,
        content: `heavy ${k}`,
        sig: "0".repeat(128),
      };
      ids.push(e.id);
      batch.push({ event: e, json: serializeEvent(e) });
    }
    w.writeBatch(batch, rules);
  }
  db.close();
  return { dir, ids };
}

const left = (r: TestRelay, pubkey: string): number =>
  ((r.ctx.store as SqliteStore).db.query("SELECT count(*) AS n FROM events WHERE pubkey = unhex(?)").get(pubkey) as { n: number }).n;

/** EVENT and its OK over a raw socket; the OK frame and the round trip in ms. */
async function publish(ws: RawWs, e: NostrEvent, timeoutMs = 30_000): Promise<{ ok: any[]; ms: number }> {
  const from = ws.frames.length;
  const a = performance.now();
  ws.send(["EVENT", e]);
  const ok = await ws.next((f) => f[0] === "OK" && f[1] === e.id, timeoutMs, from);
  return { ok, ms: performance.now() - a };
}

/** The ids a REQ returns (until EOSE). */
async function ids(ws: RawWs, subId: string, filter: object): Promise<string[]> {
  const from = ws.frames.length;
  ws.send(["REQ", subId, filter]);
  await ws.next((f) => (f[0] === "EOSE" || f[0] === "CLOSED") && f[1] === subId, 10_000, from);
  ws.send(["CLOSE", subId]);
  return ws.frames
    .slice(from)
    .filter((f) => f[0] === "EVENT" && f[1] === subId)
    .map((f) => f[2].id);
}

/**
 * An honest client publishing one event at a time (and reading now and then) until `stop`
 * returns true; each OK's time and how many of the watched events were left when it came.
 */
function honest(ws: RawWs, until: () => boolean, watched: () => number): { done: Promise<{ ms: number; left: number }[]> } {
  const s = signer();
  const samples: { ms: number; left: number }[] = [];
  const done = (async () => {
    // One first, not counted: the relay's first EVENT on a connection warms its code paths up.
    expect((await publish(ws, s.sign({ kind: 1, content: "warm-up", created_at: now() }))).ok[2]).toBe(true);
    for (let i = 0; !until() && i < 5000; i++) {
      const { ok, ms } = await publish(ws, s.sign({ kind: 1, content: `honest ${i}`, created_at: now() }));
      expect(ok[2]).toBe(true);
      samples.push({ ms, left: watched() });
      if (i % 10 === 0) expect(await ids(ws, `h${i}`, { authors: [s.pubkey], limit: 1 })).toHaveLength(1);
      await Bun.sleep(10);
    }
    return samples;
  })();
  return { done };
}

test("the writer: a kind 5 past its batch's budget is a purge of its listed targets, carried out in steps", () => {
  const db = openDatabase({ path: ":memory:", synchronous: "normal" });
  try {
    const w = new SqliteWriter(db);
    const rules = { deletion: true, vanish: true, search: true, searchSkipKinds: new Set<number>() };
    const v = signer();
    const fake = (k: number, kind = 1, extra: string[][] = []): NostrEvent => ({
      id: k.toString(16).padStart(8, "0") + v.pubkey.slice(8),
      pubkey: v.pubkey,
      created_at: 1000 + k,
      kind,
      tags: [...extra, ...Array.from({ length: 500 }, (_, j) => ["t", `u${k}x${j}`])],
      content: `n ${k}`,
      sig: "0".repeat(128),
    });
    const events = Array.from({ length: 200 }, (_, k) => fake(k));
    const article = fake(500, 30023, [["d", "an-article"]]);
    w.writeBatch(
      [...events, article].map((e) => ({ event: e, json: serializeEvent(e) })),
      rules,
    );
    const purged: number[] = [];
    w.onPurged = (ids) => purged.push(...ids);
    const del = v.sign({ kind: 5, tags: [...events.map((e) => ["e", e.id]), ["a", `30023:${v.pubkey}:an-article`]], created_at: 5000 });
    const [o] = w.writeBatch([{ event: del, json: serializeEvent(del) }], rules);
    expect(o!.stored).toBe(true);
    const purge = (o as { purge?: number }).purge!;
    expect(purge).toBeNumber();
    const count = (sql: string) => (db.query(sql).get() as { n: number }).n;
    expect(count("SELECT count(*) AS n FROM purge_targets")).toBeGreaterThan(0);
    // Another event at a target's seq (a seq reused after the target went) is not the target.
    const seq = (db.query("SELECT max(seq) AS s FROM purge_targets").get() as { s: number }).s;
    db.query("UPDATE events SET id = randomblob(32) WHERE seq = ?").run(seq);
    let steps = 0;
    while (w.purgeStep(5)) steps++;
    expect(steps).toBeGreaterThan(1);
    expect(purged).toEqual([purge]);
    expect(count("SELECT count(*) AS n FROM purge_targets") + count("SELECT count(*) AS n FROM purges")).toBe(0);
    // Left: the kind 5 and the event that took the seq (the article's, the last); every tag row of the others gone.
    expect(count("SELECT count(*) AS n FROM events")).toBe(2);
    expect(count("SELECT count(*) AS n FROM tags")).toBe(article.tags.length + del.tags.length);
  } finally {
    db.close();
  }
});

describe("the writer: a small deletion does not wait behind bigger ones (issue 36 review)", () => {
  const rules = { deletion: true, vanish: true, search: true, searchSkipKinds: new Set<number>() };
  /** Events of `by`, `tags` tags each, written in one batch. */
  const events = (w: SqliteWriter, by: Signer, from: number, n: number, tags: number): NostrEvent[] => {
    const list = Array.from({ length: n }, (_, i): NostrEvent => {
      const k = from + i;
      return {
        id: k.toString(16).padStart(8, "0") + by.pubkey.slice(8),
        pubkey: by.pubkey,
        created_at: 1000 + k,
        kind: 1,
        tags: Array.from({ length: tags }, (_, j) => ["t", `s${k}x${j}`]),
        content: `n ${k}`,
        sig: "0".repeat(128),
      };
    });
    w.writeBatch(
      list.map((e) => ({ event: e, json: serializeEvent(e) })),
      rules,
    );
    return list;
  };
  const deletion = (by: Signer, targets: NostrEvent[], at: number) => {
    const e = by.sign({ kind: 5, tags: targets.map((t) => ["e", t.id]), created_at: at });
    return { event: e, json: serializeEvent(e) };
  };

  test("after a big deletion in the same batch, a one-target deletion is done at once (no purge, its target gone)", () => {
    const db = openDatabase({ path: ":memory:", synchronous: "normal" });
    try {
      const w = new SqliteWriter(db);
      const attacker = signer();
      const author = signer();
      const heavy = events(w, attacker, 0, 200, 500);
      const [mine] = events(w, author, 10_000, 1, 1);
      const [big, small] = w.writeBatch([deletion(attacker, heavy, 5000), deletion(author, [mine!], 5000)], rules);
      // The big one used the batch's budget and is a purge; the small one is not.
      expect((big as { purge?: number }).purge).toBeNumber();
      expect(small!.stored).toBe(true);
      expect((small as { purge?: number }).purge).toBeUndefined();
      expect(db.query("SELECT 1 FROM events WHERE id = unhex(?)").get(mine!.id)).toBeNull();
    } finally {
      db.close();
    }
  });

  test("a deletion of a few dozen targets is finished within a few purge steps, not after every bigger purge before it", () => {
    const db = openDatabase({ path: ":memory:", synchronous: "normal" });
    try {
      const w = new SqliteWriter(db);
      const attacker = signer();
      const author = signer();
      const heavy = events(w, attacker, 0, 300, 500);
      const mine = events(w, author, 10_000, 40, 1);
      // Three big purges recorded first, the author's in the last one's batch (which the big one used up).
      for (let i = 0; i < 2; i++) w.writeBatch([deletion(attacker, heavy.slice(i * 100, i * 100 + 100), 5000 + i)], rules);
      const [, o] = w.writeBatch([deletion(attacker, heavy.slice(200), 5002), deletion(author, mine, 6000)], rules);
      const purge = (o as { purge?: number }).purge!;
      expect(purge).toBeNumber();
      const purged: number[] = [];
      w.onPurged = (ids) => purged.push(...ids);
      let steps = 0;
      let mineAfter = 0;
      while (w.purgeStep(5)) {
        steps++;
        if (mineAfter === 0 && purged.includes(purge)) mineAfter = steps;
      }
      steps++;
      if (mineAfter === 0) mineAfter = steps;
      console.log(`a 40-target deletion after three of 100 x 500 tags: done after ${mineAfter} of ${steps} purge steps`);
      // The big purges take dozens of steps (each ~5 ms); the small one a few, whatever came before.
      expect(steps).toBeGreaterThan(20);
      expect(mineAfter).toBeLessThanOrEqual(4);
      expect(db.query("SELECT count(*) AS n FROM events WHERE pubkey = unhex(?)").get(author.pubkey)).toEqual({ n: 1 });
    } finally {
      db.close();
    }
  });
});

if (!onPostgres)
  describe("deleting hundreds of events of many tags each", () => {
    test("a kind 5: other clients' EVENTs are answered meanwhile, and nothing it deletes is served after its OK", async () => {
      const v = signer();
      const t = now();
      const { dir, ids: stored } = prefill(v, t - 100_000);
      const r = await startTestRelay({}, { dir });
      const port = Number(new URL(r.url).port);
      const attacker = await RawWs.connect(port, "127.0.0.3");
      const again = await RawWs.connect(port, "127.0.0.4");
      const probe = await RawWs.connect(port, "127.0.0.2");
      try {
        expect(left(r, v.pubkey)).toBe(EVENTS);
        // A few heavy events over the wire too: the fanout's ring holds them (answers from memory).
        const live: NostrEvent[] = [];
        for (let k = 0; k < 20; k++) {
          const tags = Array.from({ length: TAGS }, (_, j) => ["t", `live${k}x${j}`]);
          live.push(v.sign({ kind: 1, tags, content: `live ${k}`, created_at: t - 50 + k }));
        }
        for (const e of live) expect((await publish(attacker, e)).ok[2]).toBe(true);
        expect(await ids(attacker, "ring0", { authors: [v.pubkey], since: t - 60, limit: 100 })).toHaveLength(live.length);
        const targets = [...stored, ...live.map((e) => e.id)];
        const del = v.sign({ kind: 5, tags: targets.map((id) => ["e", id]), content: "", created_at: t });

        let answered = 0;
        const probing = honest(
          probe,
          () => answered > 0 && performance.now() > answered + 200,
          () => left(r, v.pubkey),
        );
        await probe.next((f) => f[0] === "OK", 10_000); // the honest client is under way
        const first = publish(attacker, del);
        // The same kind 5 sent again once the deletion is under way: a duplicate, answered only
        // when the first copy's targets are gone too.
        while (left(r, v.pubkey) >= EVENTS + live.length) await Bun.sleep(5);
        const resent = await publish(again, del);
        expect(resent.ok[2]).toBe(true);
        expect(left(r, v.pubkey)).toBe(1);
        const { ok, ms } = await first;
        answered = performance.now();
        expect(ok[2]).toBe(true);
        // At the OK: every target gone from the store, and from every read, the ring's included.
        expect(left(r, v.pubkey)).toBe(1);
        expect(await ids(attacker, "ring", { authors: [v.pubkey], since: t - 60, limit: 100 })).toEqual([del.id]);
        expect(await ids(attacker, "all", { authors: [v.pubkey], kinds: [1] })).toEqual([]);
        expect(await ids(attacker, "tag", { "#t": ["w3x7", "live3x7"] })).toEqual([]);
        expect(await ids(attacker, "ids", { ids: [stored[0], stored[EVENTS - 1], live[0]!.id] })).toEqual([]);
        expect(await ids(attacker, "kind5", { kinds: [5], authors: [v.pubkey] })).toEqual([del.id]);
        const samples = await probing.done;
        const during = samples.filter((s) => s.left > 1 && s.left < EVENTS + live.length);
        const slowest = Math.max(...samples.map((s) => s.ms));
        console.log(
          `kind 5 of ${targets.length} events x ${TAGS} tags: OK after ${ms.toFixed(0)} ms; ` +
            `honest client: ${samples.length} OKs, ${during.length} during the deletion, p90 ${p90(samples).toFixed(0)} ms, slowest ${slowest.toFixed(0)} ms`,
        );
        expect(p90(samples)).toBeLessThan(MAX_OK_MS);
        expect(during.length).toBeGreaterThanOrEqual(5);
        // Nothing it deleted comes back.
        expect((await publish(attacker, live[0]!)).ok[3]).toStartWith("blocked:");
      } finally {
        probe.close();
        attacker.close();
        again.close();
        await r.stop();
      }
    }, 120_000);

    test("the same events expiring in the same second: other clients' EVENTs are answered while they are swept", async () => {
      const v = signer();
      const t = now();
      // Expiring a moment after the relay has started; the relay sweeps every second.
      const expiration = t + 3;
      const { dir } = prefill(v, t - 100_000, expiration);
      const r = await startTestRelay({ options: { expiration_sweep_seconds: 1 } }, { dir });
      const port = Number(new URL(r.url).port);
      const probe = await RawWs.connect(port, "127.0.0.2");
      try {
        let swept = false;
        const probing = honest(
          probe,
          () => swept,
          () => left(r, v.pubkey),
        );
        const deadline = performance.now() + 40_000;
        while (left(r, v.pubkey) > 0 && performance.now() < deadline) await Bun.sleep(20);
        swept = true;
        const samples = await probing.done;
        expect(left(r, v.pubkey)).toBe(0);
        const during = samples.filter((s) => s.left > 0 && s.left < EVENTS);
        const slowest = Math.max(...samples.map((s) => s.ms));
        console.log(
          `sweep of ${EVENTS} expired events x ${TAGS} tags: honest client: ${samples.length} OKs, ${during.length} during the sweep, p90 ${p90(samples).toFixed(0)} ms, slowest ${slowest.toFixed(0)} ms`,
        );
        expect(p90(samples)).toBeLessThan(MAX_OK_MS);
        expect(during.length).toBeGreaterThanOrEqual(5);
      } finally {
        probe.close();
        await r.stop();
      }
    }, 60_000);
  });
