// The relay key on Postgres: one row every node shares. Nodes starting at once on a fresh
// database agree on one key (the first INSERT wins, the others read it), and a node started
// later takes the same; NIP-11 `self` of every node is its pubkey.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { resolveRelayKey } from "../../src/cli/relay-key.ts";
import { PostgresStore } from "../../src/store/postgres/store.ts";
import { testConfig } from "../helpers.ts";
import { createDatabase, databaseFor, dropDatabase } from "../postgres-env.ts";

const dir = mkdtempSync(join(tmpdir(), "bunstr-pg-key-"));
const name = databaseFor(dir);
afterAll(async () => {
  await dropDatabase(name);
  rmSync(dir, { recursive: true, force: true });
});

test("nodes starting at once on one database get the one relay key; a later node too", async () => {
  const url = await createDatabase(name);
  const config = testConfig({ database: { engine: "postgres", postgres_url: url } });
  const stores = await Promise.all([1, 2, 3].map(() => PostgresStore.open({ url, poolSize: 2 })));
  try {
    const logged: string[] = [];
    const keys = await Promise.all(stores.map((s) => resolveRelayKey(config, s, (l) => logged.push(l))));
    expect(new Set(keys.map((k) => k.pubkey)).size).toBe(1);
    expect(keys.every((k) => k.where === "database")).toBe(true);
    // Nothing is written to the data directory, and nothing is said: the key is in the dump.
    expect(logged).toEqual([]);
    const later = await PostgresStore.open({ url, poolSize: 1 });
    try {
      expect((await resolveRelayKey(config, later, () => {})).pubkey).toBe(keys[0]!.pubkey);
    } finally {
      await later.close();
    }
  } finally {
    await Promise.all(stores.map((s) => s.close()));
  }
});

test("[info] relay_secret_key wins over the database's row", async () => {
  const url = await createDatabase(name);
  const store = await PostgresStore.open({ url, poolSize: 1 });
  try {
    const config = testConfig({ database: { engine: "postgres", postgres_url: url }, info: { relay_secret_key: "7".repeat(64) } });
    const key = await resolveRelayKey(config, store, () => {});
    expect(key.where).toBe("config");
    expect(key.pubkey).not.toBe(
      (await resolveRelayKey(testConfig({ database: { engine: "postgres", postgres_url: url } }), store, () => {})).pubkey,
    );
  } finally {
    await store.close();
  }
});
