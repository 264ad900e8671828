// The REQ snapshot point (SqliteStore.lastSeq) follows commits of other connections (another
// process: `bunstr import` into a running relay's database), looked for at most every 10 ms
// (store/sqlite/store.ts VERSION_CHECK_MS).
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SqliteStore } from "../src/store/sqlite/store.ts";
import { storeEvents } from "./helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "bunstr-lastseq-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const event = (i: number) => ({
  id: i.toString(16).padStart(64, "0"),
  pubkey: "ab".repeat(32),
  created_at: 1_700_000_000 + i,
  kind: 1,
  tags: [],
  content: `n${i}`,
  sig: "cd".repeat(64),
});
const write = (store: SqliteStore, from: number, n: number) =>
  storeEvents(
    store,
    Array.from({ length: n }, (_, k) => event(from + k)),
  );

test("a commit of another connection is in the snapshot point within 10 ms, and the relay's own at once", async () => {
  const path = join(dir, "bunstr.sqlite");
  const relay = new SqliteStore({ path, synchronous: "normal", readerWorkers: 1, writerThread: true });
  await relay.ready();
  await write(relay, 1, 3);
  expect(relay.lastSeq()).toBe(3); // its own commits: no waiting
  const other = new SqliteStore({ path, synchronous: "normal", readerWorkers: 1 });
  await write(other, 10, 5);
  await other.close();
  await Bun.sleep(15);
  expect(relay.lastSeq()).toBe(8);
  await write(relay, 20, 1);
  expect(relay.lastSeq()).toBe(9);
  await relay.close();
});
