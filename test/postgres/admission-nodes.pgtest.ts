// Issue 33 on several nodes sharing one Postgres database (issue 33 review, M7): an admission written by
// one node reaches the others by its pubkey (the admission change log), not by a reload of the
// whole admissions table and the admin state; and the background work one node should do (the
// NIP-05 schedule, the payment poller) is led by one node at a time, taken over when it stops.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AdmissionRegistry } from "../../src/access/registry.ts";
import { BASIS_BIT } from "../../src/policy/admission.ts";
import { PostgresStore } from "../../src/store/postgres/store.ts";
import type { CommitFeed } from "../../src/store/types.ts";
import { testConfig, waitUntil } from "../helpers.ts";
import { createDatabase, databaseFor, dropDatabase } from "../postgres-env.ts";

const dir = mkdtempSync(join(tmpdir(), "bunstr-pg-admission-"));
const name = databaseFor(dir);
afterAll(async () => {
  await dropDatabase(name);
  rmSync(dir, { recursive: true, force: true });
});

test("an admission written on one node reaches another by its pubkey, without a reload of everything", async () => {
  const url = await createDatabase(name);
  const a = await PostgresStore.open({ url, poolSize: 2, pollMs: 100 });
  const b = await PostgresStore.open({ url, poolSize: 2, pollMs: 100 });
  try {
    const config = testConfig({ pay_to_relay: { enabled: true, node_url: "http://127.0.0.1:9", api_secret: "k" } });
    const onB = new AdmissionRegistry({ store: b.admission, config: () => config });
    await onB.load();
    const told: (readonly string[] | undefined)[] = [];
    let adminReloads = 0;
    const feed: CommitFeed = {
      committed() {},
      batchEnd() {},
      ephemeral() {},
      adminChanged: () => adminReloads++,
      admissionsChanged: (pubkeys) => {
        told.push(pubkeys);
        void onB.reload(pubkeys);
      },
    };
    b.subscribe(feed);
    const pk = "a".repeat(64);
    await a.admission.put({ pubkey: pk, basis: "paid", since: 1, until: null, evidence: "{}" });
    await waitUntil("B to see the admission", () => (onB.bits(pk) & BASIS_BIT.paid) !== 0, 5000);
    expect(told).toEqual([[pk]]);
    expect(adminReloads).toBe(0);
    await a.admission.remove(pk, "paid");
    await waitUntil("B to see the revoke", () => onB.bits(pk) === 0, 5000);
    expect(told).toEqual([[pk], [pk]]);
    expect(adminReloads).toBe(0);
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

test("one node at a time leads a piece of work; another takes it over when the leader stops", async () => {
  const url = await createDatabase(name);
  const stores = await Promise.all([1, 2, 3].map(() => PostgresStore.open({ url, poolSize: 2 })));
  const closed = new Set<number>();
  try {
    const leads = stores.map((s) => s.leader("nip05"));
    await Promise.all(leads.map((l) => l.first));
    expect(leads.filter((l) => l.leading)).toHaveLength(1);
    // Another name is led apart.
    const other = stores.map((s) => s.leader("payments"));
    await Promise.all(other.map((l) => l.first));
    expect(other.filter((l) => l.leading)).toHaveLength(1);
    const first = leads.findIndex((l) => l.leading);
    closed.add(first);
    await stores[first]!.close();
    await waitUntil("another leader", () => leads.some((l, i) => i !== first && l.leading), 15_000);
    expect(leads.filter((l, i) => i !== first && l.leading)).toHaveLength(1);
  } finally {
    await Promise.all(stores.filter((_, i) => !closed.has(i)).map((s) => s.close()));
  }
}, 30_000);
