// NIP-29: the store's group_gates kept equal to the group state (relay/group-gates.ts). The writer
// raises a gate with the 9002 or 9008 that may gate, before the state judged it; the state lowers
// what it did not accept (a 9002 by someone without the right, stored on a stale view) and what
// opened the group; at start every row that differs is written as the state says. Against a real
// store (SQLite here, Postgres in test/postgres-suite.ts): what an anonymous read returns follows.
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defaults } from "../src/config/schema.ts";
import { GroupState } from "../src/groups/state.ts";
import { serializeEvent, type NostrEvent } from "../src/protocol/event.ts";
import { freshRelayKey } from "../src/protocol/schnorr.ts";
import { GroupGates } from "../src/relay/group-gates.ts";
import { openDatabase } from "../src/store/sqlite/db.ts";
import { SqliteWriter } from "../src/store/sqlite/write.ts";
import { allRows, type Store, type WriteRules } from "../src/store/types.ts";
import { databaseFor, dropDatabase, onPostgres } from "./postgres-env.ts";
import { now, openTestStore, signer } from "./helpers.ts";

const RULES: WriteRules = { deletion: true, vanish: true, search: false, searchSkipKinds: new Set() };
const dir = mkdtempSync(join(tmpdir(), "bunstr-group-gates-"));
const relay = freshRelayKey();
const [owner, stranger] = [signer(), signer()];
const config = defaults();
config.groups.enabled = true;
let store: Store;
let state: GroupState;
let gates: GroupGates;
let t = now() - 500;

beforeAll(async () => {
  store = await openTestStore(dir);
  await store.ready();
  state = new GroupState({ config: () => config, relayPubkey: relay.pubkey });
  await state.rebuild(store.groups);
  gates = new GroupGates(state, store);
});
afterAll(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  if (onPostgres) await dropDatabase(databaseFor(dir));
});

const ev = (who: ReturnType<typeof signer>, kind: number, group: string, tags: string[][] = []) =>
  who.sign({ kind, content: "", created_at: t++, tags: [["h", group], ...tags] });
/** Stored (the writer's raise with it), then applied as the commit feed applies it, corrections committed. */
async function commit(e: NostrEvent): Promise<void> {
  const [o] = await store.writeBatch([{ event: e, json: serializeEvent(e) }], RULES);
  expect(o!.stored).toBe(true);
  gates.apply(e);
  await gates.written();
}
const gate = async (g: string) => (await store.groups.gates!()).find((x) => x.group === g);
/** What an anonymous reader gets of group `g`'s messages. */
const anonymous = async (g: string) =>
  (
    await allRows(
      store.query({
        maxSeq: store.lastSeq(),
        now: 0,
        visibility: { restrictedKinds: [], viewers: [], groups: { members: [], relays: [relay.pubkey] } },
        filters: [{ kinds: [9], "#h": [g] }],
        limits: [100],
      }),
    )
  ).length;

test("a 9002 `private` by someone without the right, stored on a stale view: raised by the writer, lowered by the state", async () => {
  await commit(ev(owner, 9007, "g"));
  await commit(ev(owner, 9, "g"));
  const forged = ev(stranger, 9002, "g", [["private"]]);
  const [o] = await store.writeBatch([{ event: forged, json: serializeEvent(forged) }], RULES);
  expect(o!.stored).toBe(true);
  // Raised in the 9002's own commit: hidden from anonymous readers before the state has judged it.
  expect(await gate("g")).toEqual({ group: "g", events: true, metadata: false });
  gates.apply(forged);
  await gates.written();
  expect(state.gateOf("g").events).toBe(false); // the state skipped it
  expect(await gate("g")).toBeUndefined();
  expect(await anonymous("g")).toBe(1);
});

test("the owner's `private`: up, and stays; `public`: the writer raises nothing, the state lowers it", async () => {
  await commit(ev(owner, 9002, "g", [["private"]]));
  expect(await gate("g")).toEqual({ group: "g", events: true, metadata: false });
  expect(await anonymous("g")).toBe(0);
  await commit(ev(owner, 9002, "g", [["public"], ["hidden"]]));
  expect(await gate("g")).toEqual({ group: "g", events: false, metadata: true });
  expect(await anonymous("g")).toBe(1);
});

test("a 9008: both gates up for good (a deleted group is read by no one)", async () => {
  await commit(ev(owner, 9008, "g"));
  expect(await gate("g")).toEqual({ group: "g", events: true, metadata: true });
  expect(await anonymous("g")).toBe(0);
});

test("at start: every row that differs from the state is written as the state says", async () => {
  await commit(ev(owner, 9007, "h2"));
  await commit(ev(owner, 9002, "h2", [["private"]]));
  await commit(ev(owner, 9, "h2"));
  // As after a migration, an import into a stopped relay, a correction a crash lost.
  await store.admin.setGroupGates(
    [
      { group: "h2", events: false, metadata: false },
      { group: "bogus", events: true, metadata: true },
    ],
    { seq: store.lastSeq() },
  );
  expect(await anonymous("h2")).toBe(1);
  expect(await gates.reconcile()).toBe(2);
  expect(await gate("h2")).toEqual({ group: "h2", events: true, metadata: false });
  expect(await gate("bogus")).toBeUndefined();
  expect(await gate("g")).toEqual({ group: "g", events: true, metadata: true });
  expect(await anonymous("h2")).toBe(0);
  expect(await gates.reconcile()).toBe(0);
});

// The SQLite file's own migration (Postgres creates the table empty: its relay fills it at start, as the test above).
if (!onPostgres)
  test("SQLite schema 14: a database of schema 13 gets the gates its stored 9002s and 9008s raise", () => {
    const migrated = mkdtempSync(join(tmpdir(), "bunstr-group-gates-14-"));
    const path = join(migrated, "bunstr.sqlite");
    try {
      const db = openDatabase({ path, synchronous: "normal" });
      const w = new SqliteWriter(db);
      const write = (e: NostrEvent) => expect(w.writeBatch([{ event: e, json: serializeEvent(e) }], RULES)[0]!.stored).toBe(true);
      write(ev(owner, 9002, "was-private", [["private"]]));
      write(ev(owner, 9002, "was-hidden", [["hidden"]]));
      write(ev(owner, 9008, "was-deleted"));
      write(ev(owner, 9002, "never", [["public"]]));
      db.close();
      // Back to schema 13: no table.
      const old = new Database(path);
      old.exec(
        "DROP TABLE group_gates; DROP TABLE admissions; DROP TABLE invoices; DROP TABLE balances; DROP TABLE nip05; DROP TABLE invites; DROP TABLE hidden; PRAGMA user_version = 13",
      );
      old.close();
      const again = openDatabase({ path, synchronous: "normal" });
      expect((again.query("PRAGMA user_version").get() as { user_version: number }).user_version).toBe(16);
      expect(again.query("SELECT value, events, metadata FROM group_gates ORDER BY value").all()).toEqual([
        { value: "was-deleted", events: 1, metadata: 1 },
        { value: "was-hidden", events: 0, metadata: 1 },
        { value: "was-private", events: 1, metadata: 0 },
      ]);
      again.close();
    } finally {
      rmSync(migrated, { recursive: true, force: true });
    }
  });
