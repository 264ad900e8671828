// The web of trust at 100,000 pubkeys (issue 33): a seed following 500 pubkeys who
// follow 200 each, as kind 3s in a real SQLite store (writer thread, reader worker), built at
// depth 2. Prints the build time and the heap the graph holds per pubkey (heapStats after a full
// GC, typed arrays' buffers included), and bounds both with room for a loaded 2-core box.
import { afterAll, expect, test } from "bun:test";
import { heapStats } from "bun:jsc";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { WebOfTrust } from "../src/access/wot.ts";
import type { NostrEvent } from "../src/protocol/event.ts";
import { SqliteStore } from "../src/store/sqlite/store.ts";
import { now, storeEvents } from "./helpers.ts";

const DEPTH1 = 500;
const FOLLOWS_EACH = 200;
const dir = mkdtempSync(join(tmpdir(), "bunstr-wot-memory-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const hex32 = (): string => randomBytes(32).toString("hex");

/** A kind 3 with a correct id and a dummy signature (written straight into the store). */
function followList(pubkey: string, follows: readonly string[]): NostrEvent {
  const e = { pubkey, created_at: now() - 60, kind: 3, tags: follows.map((p) => ["p", p]), content: "" };
  const id = createHash("sha256")
    .update(JSON.stringify([0, e.pubkey, e.created_at, e.kind, e.tags, e.content]))
    .digest("hex");
  return { id, sig: "0".repeat(128), ...e };
}

/** Writes the follow lists; returns the seed, a depth-1 pubkey and the last depth-2 one with its parent. */
async function fill(store: SqliteStore): Promise<{ seed: string; one: string; parent: string; probe: string }> {
  const seed = hex32();
  const depth1 = Array.from({ length: DEPTH1 }, hex32);
  const events = [followList(seed, depth1), ...depth1.map((p) => followList(p, Array.from({ length: FOLLOWS_EACH }, hex32)))];
  await storeEvents(store, events);
  // Copies, so no string of the events outlives this function.
  const copy = (s: string) => Buffer.from(s, "hex").toString("hex");
  return {
    seed: copy(seed),
    one: copy(depth1[123]!),
    parent: copy(depth1[DEPTH1 - 1]!),
    probe: copy(events[DEPTH1]!.tags[FOLLOWS_EACH - 1]![1]!),
  };
}

/** The heap after full collections, once what the writes left behind has settled. */
async function settledHeap(): Promise<number> {
  await Bun.sleep(100);
  for (let i = 0; i < 3; i++) Bun.gc(true);
  return heapStats().heapSize;
}

test("100,000 pubkeys: built in seconds, ≤ 48 bytes of heap a pubkey", async () => {
  const store = new SqliteStore({ path: join(dir, "bunstr.sqlite"), synchronous: "normal", readerWorkers: 1, writerThread: true });
  await store.ready();
  const { seed, one, parent, probe } = await fill(store);

  let built = 0;
  const wot = new WebOfTrust(store, {
    settings: () => ({ seeds: [seed], depth: 2, min_followers: 1, max_pubkeys: 200_000 }),
    onBuilt: () => void built++,
  });
  // Three builds, each replacing the last: the heap held with one graph alive, the least of three
  // (what else the process allocates meanwhile, the store's reads, only adds), and the slowest build.
  const before = await settledHeap();
  let held = Infinity;
  let seconds = 0;
  for (let i = 0; i < 3; i++) {
    await wot.rebuild();
    seconds = Math.max(seconds, wot.buildSeconds);
    held = Math.min(held, (await settledHeap()) - before);
  }
  const graph = wot.current;
  const n = graph.size;
  const perPubkey = held / n;
  console.log(
    `wot 100k: ${n} pubkeys built in ${seconds.toFixed(2)} s (slowest of 3); heap +${(held / 2 ** 20).toFixed(2)} MiB = ` +
      `${perPubkey.toFixed(1)} B/pubkey (arrays ${graph.bytes / n} B/pubkey); loadavg ${loadavg()
        .map((l) => l.toFixed(2))
        .join(" ")}`,
  );

  expect(built).toBe(3);
  expect(n).toBe(1 + DEPTH1 + DEPTH1 * FOLLOWS_EACH);
  expect(wot.has(seed) && wot.has(one) && wot.has(probe)).toBe(true);
  expect(graph.path(probe)).toEqual([seed, parent, probe]);
  expect(graph.bytes).toBe(39 * n);
  // Design target: < 5 s on an idle box (~1 s measured); a loaded 2-core box gets three times that.
  expect(seconds).toBeLessThan(15);
  // Design target ≤ 48 B: the arrays' 39 B and what a full GC leaves of the build.
  expect(perPubkey).toBeLessThanOrEqual(48);
  wot.stop();
  await store.close();
}, 120_000);
