// Issue 33: Store.admission round trips (admissions, invoices, balances, NIP-05 rows, invite
// codes), the races it must settle once (a webhook and the poller paying one invoice; two joins
// with one code), and the registry built on it: it stores, loads, and answers from memory. On
// the store openTestStore gives: SQLite with its writer thread (and an in-memory one here), or
// Postgres in test/postgres-suite.ts.
import { afterAll, describe, expect, spyOn, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AdmissionRegistry } from "../src/access/registry.ts";
import { BASIS_BIT } from "../src/policy/admission.ts";
import { SqliteStore } from "../src/store/sqlite/store.ts";
import { paidRow, type InviteRow, type InvoiceRow, type Store } from "../src/store/types.ts";
import { openTestStore, testConfig } from "./helpers.ts";
import { databaseFor, dropDatabase, onPostgres } from "./postgres-env.ts";

const dir = mkdtempSync(join(tmpdir(), "bunstr-admission-store-"));
const stores: Store[] = [];
afterAll(async () => {
  for (const s of stores) await s.close();
  rmSync(dir, { recursive: true, force: true });
  if (onPostgres) for (const name of ["main", "registry", "bans"]) await dropDatabase(databaseFor(join(dir, name)));
});

const A = "a".repeat(64);
const B = "b".repeat(64);
const C = "c".repeat(64);

const invoice = (hash: string, o: Partial<InvoiceRow> = {}): InvoiceRow => ({
  payment_hash: hash,
  pubkey: A,
  purpose: "admission",
  amount_sats: 4200,
  bolt11: `lnbcrt4200${hash.slice(0, 8)}`,
  status: "unpaid",
  created_at: 1000,
  expires_at: 4600,
  paid_at: null,
  checked_at: null,
  ...o,
});

const invite = (code: string, o: Partial<InviteRow> = {}): InviteRow => ({
  code,
  issuer: A,
  created_at: 1000,
  expires_at: 2000,
  used_by: null,
  used_at: null,
  ...o,
});

const kinds: [string, () => Promise<Store>][] = [
  ["the relay's store (writer thread, or Postgres)", async () => openTestStore(join(dir, "main"))],
  [
    "an in-memory SQLite store (writer on this thread)",
    async () => new SqliteStore({ path: ":memory:", synchronous: "normal", readerWorkers: 1 }),
  ],
];

describe.each(kinds)("Store.admission: %s", (_name, open) => {
  let store: Store;
  const db = () => store.admission;

  test("admissions: put, upsert keeps since, remove", async () => {
    store = await open();
    stores.push(store);
    await store.ready();
    expect(await db().rows()).toEqual([]);
    await db().put({ pubkey: A, basis: "paid", since: 100, until: null, evidence: '{"payment_hash":"x"}' });
    await db().put({ pubkey: B, basis: "verified", since: 200, until: 900, evidence: '{"address":"b@example.com"}' });
    await db().put({ pubkey: A, basis: "paid", since: 300, until: null, evidence: '{"payment_hash":"y"}' });
    expect(await db().rows()).toEqual([
      { pubkey: A, basis: "paid", since: 100, until: null, evidence: '{"payment_hash":"y"}' },
      { pubkey: B, basis: "verified", since: 200, until: 900, evidence: '{"address":"b@example.com"}' },
    ]);
    // A node's reload of the pubkeys another changed reads theirs only.
    expect((await db().rowsOf([B, C])).map((r) => [r.pubkey, r.basis])).toEqual([[B, "verified"]]);
    expect(await db().rowsOf([])).toEqual([]);
    await db().remove(A, "paid");
    await db().remove(C, "member"); // nothing there: no error
    expect((await db().rows()).map((r) => r.pubkey)).toEqual([B]);
    await db().remove(B, "verified");
  });

  test("invoices: open, due, checked, recent", async () => {
    const h = (n: number) => n.toString(16).padStart(64, "0");
    await db().putInvoice(invoice(h(1), { created_at: 1000 }));
    await db().putInvoice(invoice(h(2), { created_at: 1100, purpose: "topup" }));
    await db().putInvoice(invoice(h(3), { created_at: 1200, pubkey: B, expires_at: 1500 }));
    expect(await db().invoice(h(1))).toEqual(invoice(h(1)));
    expect(await db().invoice(h(9))).toBeUndefined();
    expect((await db().openInvoice(A, "admission", 2000))?.payment_hash).toBe(h(1));
    expect((await db().openInvoice(A, "topup", 2000))?.payment_hash).toBe(h(2));
    expect(await db().openInvoice(B, "admission", 2000)).toBeUndefined(); // expired at 1500
    expect(await db().openInvoices(2000)).toBe(2);
    // Due: unpaid, expired less than the grace ago, never checked first.
    await db().checkedInvoice(h(1), 1900);
    expect((await db().dueInvoices(2000, 600, 10)).map((i) => i.payment_hash)).toEqual([h(2), h(3), h(1)]);
    expect((await db().dueInvoices(2000, 0, 10)).map((i) => i.payment_hash)).toEqual([h(2), h(1)]);
    expect((await db().dueInvoices(2000, 600, 1)).map((i) => i.payment_hash)).toEqual([h(2)]);
    expect((await db().recentInvoices(2)).map((i) => i.payment_hash)).toEqual([h(3), h(2)]);
  });

  test("settleInvoice moves an unpaid invoice once, however many race for it", async () => {
    const hash = "f".repeat(64);
    await db().putInvoice(invoice(hash));
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => db().settleInvoice(hash, "paid", 3000 + i)));
    expect(results.filter(Boolean).length).toBe(1);
    const paid = (await db().invoice(hash))!;
    expect(paid.status).toBe("paid");
    expect(paid.paid_at).toBe(3000 + results.indexOf(true));
    expect(await db().settleInvoice(hash, "expired", 4000)).toBe(false);
    expect(await db().settleInvoice("e".repeat(64), "paid", 4000)).toBe(false); // unknown
    const old = "d".repeat(64);
    await db().putInvoice(invoice(old));
    expect(await db().settleInvoice(old, "expired", 5000)).toBe(true);
    expect(await db().invoice(old)).toMatchObject({ status: "expired", paid_at: null, checked_at: 5000 });
  });

  test("balances add up, negative deltas too", async () => {
    await db().addBalances([
      { pubkey: A, sats: 100 },
      { pubkey: B, sats: 5 },
    ]);
    await db().addBalances([
      { pubkey: A, sats: -30 },
      { pubkey: A, sats: 1 },
    ]);
    await db().addBalances([]);
    const sorted = (await db().balances()).sort((x, y) => x.pubkey.localeCompare(y.pubkey));
    expect(sorted).toEqual([
      { pubkey: A, sats: 71 },
      { pubkey: B, sats: 5 },
    ]);
  });

  test("a paid invoice's admission or credit is written with its settle, once; reconcilePaid mends only a settle made without it", async () => {
    const [T, U, V] = ["1", "2", "3"].map((c) => c.repeat(64)) as [string, string, string];
    const top = invoice("71".repeat(32), { pubkey: T, purpose: "topup", amount_sats: 25 });
    await db().putInvoice(top);
    const credit = { credit: { pubkey: T, sats: 25 } };
    const moved = await Promise.all(Array.from({ length: 10 }, () => db().settleInvoice(top.payment_hash, "paid", 3000, credit)));
    expect(moved.filter(Boolean).length).toBe(1);
    expect((await db().balances()).find((b) => b.pubkey === T)?.sats).toBe(25);
    expect(await db().invoice(top.payment_hash)).toMatchObject({ status: "paid", paid_at: 3000, checked_at: null });
    const adm = invoice("72".repeat(32), { pubkey: U });
    await db().putInvoice(adm);
    expect(await db().settleInvoice(adm.payment_hash, "paid", 3000, { admission: paidRow(adm, 3000) })).toBe(true);
    const row = (await db().rows()).find((r) => r.pubkey === U)!;
    expect(row).toMatchObject({ basis: "paid", since: 3000, until: null });
    expect(JSON.parse(row.evidence)).toEqual({ payment_hash: adm.payment_hash, amount_sats: 4200, paid_at: 3000 });
    // Settled paid by a bunstr that wrote the admission in a second step, which never came.
    const legacy = invoice("73".repeat(32), { pubkey: V, status: "paid", paid_at: 3100, checked_at: 3100 });
    await db().putInvoice(legacy);
    const mended = (await db().reconcilePaid(5000)).map((i) => i.payment_hash);
    expect(mended).toContain(legacy.payment_hash); // (and the test above's, settled without an effect too)
    expect(mended).not.toContain(adm.payment_hash);
    expect(mended).not.toContain(top.payment_hash);
    expect((await db().rows()).filter((r) => r.pubkey === V).map((r) => r.basis)).toEqual(["paid"]);
    expect(await db().reconcilePaid(5001)).toEqual([]);
    await db().remove(V, "paid");
    expect(await db().reconcilePaid(5002)).toEqual([]); // a revoke afterwards stands
  });

  test("chargeBalance (Postgres, balances shared by nodes): racing charges never overdraw", async () => {
    const W = "4".repeat(64);
    if (store instanceof SqliteStore) {
      expect(db().chargeBalance).toBeUndefined(); // one process: the ledger keeps them in memory
      return;
    }
    await db().addBalances([{ pubkey: W, sats: 25 }]);
    const charged = await Promise.all(Array.from({ length: 20 }, () => db().chargeBalance!(W, 10)));
    expect(charged.filter((c) => c.charged).length).toBe(2);
    expect(charged.filter((c) => !c.charged).every((c) => c.sats === 5)).toBe(true);
    expect((await db().balances()).find((b) => b.pubkey === W)?.sats).toBe(5);
    expect(await db().chargeBalance!("5".repeat(64), 1)).toEqual({ charged: false, sats: 0 });
  });

  test("NIP-05 rows: put, due by last check, remove", async () => {
    await db().putNip05({ pubkey: A, address: "a@example.com", verified_at: null, checked_at: 100, failures: 0, error: "" });
    await db().putNip05({ pubkey: B, address: "b@example.com", verified_at: 50, checked_at: 50, failures: 0, error: "" });
    await db().putNip05({ pubkey: A, address: "a@example.com", verified_at: null, checked_at: 150, failures: 2, error: "timed out" });
    expect(await db().nip05(A)).toEqual({
      pubkey: A,
      address: "a@example.com",
      verified_at: null,
      checked_at: 150,
      failures: 2,
      error: "timed out",
    });
    expect((await db().dueNip05(200, 10)).map((r) => r.pubkey)).toEqual([B, A]);
    expect((await db().dueNip05(100, 10)).map((r) => r.pubkey)).toEqual([B]);
    await db().removeNip05(B);
    expect(await db().nip05(B)).toBeUndefined();
  });

  test("due NIP-05 rows: a verified writer's re-check comes before new addresses however many (issue 33 review, M2)", async () => {
    const flood = Array.from({ length: 20 }, (_, i) => (i + 1).toString(16).padStart(64, "e"));
    for (const pk of flood)
      await db().putNip05({ pubkey: pk, address: `x@h.attacker.example`, verified_at: null, checked_at: 0, failures: 0, error: "" });
    await db().putNip05({ pubkey: C, address: "c@example.com", verified_at: 10, checked_at: 60, failures: 0, error: "" });
    const page = await db().dueNip05(200, 5);
    expect(page[0]?.pubkey).toBe(C);
    expect(page).toHaveLength(5);
    for (const pk of [...flood, C]) await db().removeNip05(pk);
  });

  test("takeInvite: once, by one of many racing joiners; unknown, expired and used codes say so", async () => {
    await db().putInvite(invite("code-1"));
    await db().putInvite(invite("code-2", { issuer: B }));
    await db().putInvite(invite("old", { expires_at: 1500 }));
    const joiners = Array.from({ length: 10 }, (_, i) => i.toString(16).padStart(64, "0"));
    const results = await Promise.all(joiners.map((pk) => db().takeInvite("code-1", pk, 1200)));
    const won = results.filter((r) => typeof r === "object");
    expect(won).toEqual([invite("code-1")]); // the row as it was
    expect(results.filter((r) => r === "used").length).toBe(9);
    const taken = (await db().invitesBy(A)).find((i) => i.code === "code-1")!;
    expect(joiners).toContain(taken.used_by!);
    expect(taken.used_at).toBe(1200);
    expect(await db().takeInvite("nope", C, 1200)).toBe("unknown");
    expect(await db().takeInvite("old", C, 1600)).toBe("expired");
    expect((await db().invitesBy(A)).map((i) => i.code)).toEqual(["code-1", "old"]);
    expect((await db().invitesBy(B)).map((i) => i.code)).toEqual(["code-2"]);
  });

  test("asked at once many times (as several nodes would be), one code is written and the quota holds (issue 33 review, M6)", async () => {
    const issuer = "d".repeat(64);
    const asks = Array.from({ length: 8 }, (_, i) => db().issueInvite(invite(`q-${i}`, { issuer, expires_at: 5000 }), 1, 1200));
    const results = await Promise.all(asks);
    expect(results.filter((r) => r !== "none-left" && r.fresh)).toHaveLength(1);
    const codes = new Set(results.map((r) => (r === "none-left" ? "" : r.row.code)));
    expect(codes.size).toBe(1);
    const [only] = [...codes];
    expect(typeof (await db().takeInvite(only!, C, 1300))).toBe("object");
    // Used: the quota of 1 is spent, whoever asks; an admin (no quota) gets a new one.
    const again = await Promise.all([1, 2].map((i) => db().issueInvite(invite(`r-${i}`, { issuer, expires_at: 5000 }), 1, 1300)));
    expect(again).toEqual(["none-left", "none-left"]);
    expect(await db().issueInvite(invite("admin-1", { issuer, expires_at: 5000 }), null, 1300)).toMatchObject({ fresh: true });
    expect((await db().invitesBy(issuer)).map((i) => i.code).sort()).toEqual(["admin-1", only!].sort());
  });
});

describe("AdmissionRegistry on the store", () => {
  test("admit stores then shows; revoke the reverse; a new registry loads what was stored; disabled models are masked", async () => {
    const store = await openTestStore(join(dir, "registry"));
    stores.push(store);
    await store.ready();
    const config = testConfig({ pay_to_relay: { enabled: true }, membership: { enabled: true } });
    let t = 1000;
    const registry = new AdmissionRegistry({ store: store.admission, config: () => config, now: () => t });
    expect(registry.ready).toBe(false);
    await registry.load();
    expect(registry.ready).toBe(true);
    const changes: string[] = [];
    registry.onChange((pk, basis, admitted) => changes.push(`${pk[0]} ${basis} ${admitted}`));
    await registry.admit(A, "paid", { payment_hash: "x" });
    await registry.admit(A, "member", { invited_by: B });
    await registry.admit(B, "verified", { address: "b@example.com" }, 2000);
    expect(registry.bits(A)).toBe(BASIS_BIT.paid | BASIS_BIT.member);
    expect(registry.bits(B)).toBe(0); // verified is not enabled
    config.verified_users.mode = "enabled";
    expect(registry.bits(B)).toBe(BASIS_BIT.verified);
    t = 2000; // its until
    expect(registry.bits(B)).toBe(0);
    t = 1000;
    await registry.revoke(A, "paid", "");
    expect(registry.bits(A)).toBe(BASIS_BIT.member);
    expect(changes).toEqual(["a paid true", "a member true", "b verified true", "a paid false"]);
    expect(registry.counts()).toMatchObject({ paid: 0, member: 1, verified: 1 });
    await expect(registry.admit(C, "manual", {})).rejects.toThrow("manual is not a stored basis");

    const again = new AdmissionRegistry({ store: store.admission, config: () => config, now: () => t, relayPubkey: C });
    await again.load();
    expect(again.bits(A)).toBe(BASIS_BIT.member);
    expect(again.bits(B)).toBe(BASIS_BIT.verified);
    expect(again.bits(C)).toBe(BASIS_BIT.manual); // the relay's key
    config.authorization.pubkey_allowlist = [B];
    expect(again.bits(B)).toBe(BASIS_BIT.verified | BASIS_BIT.manual);
    // No model on: nothing admits (the policy passes everyone; the mask is 0).
    config.pay_to_relay.enabled = config.membership.enabled = false;
    config.verified_users.mode = "disabled";
    expect(again.bits(A)).toBe(0);
  });

  test("a ban gives no bases (held keeps them); revoke lines, which the public can cause, are one a minute per basis", async () => {
    const store = await openTestStore(join(dir, "bans"));
    stores.push(store);
    await store.ready();
    const config = testConfig({ membership: { enabled: true }, authorization: { pubkey_denylist: [B] } });
    const banned = new Map<string, unknown>();
    const admin = {
      bannedPubkeys: banned,
      allowedPubkeys: new Map(),
      bannedEvents: new Map(),
      blockedIps: new Map(),
      allowedKinds: new Set<number>(),
      disallowedKinds: new Set<number>(),
    };
    const registry = new AdmissionRegistry({ store: store.admission, config: () => config, admin });
    await registry.load();
    for (const pk of [A, B, C]) await registry.admit(pk, "member", {});
    banned.set(A, {});
    expect([A, B, C].map((pk) => registry.bits(pk))).toEqual([0, 0, BASIS_BIT.member]);
    expect(registry.held(A)).toBe(BASIS_BIT.member);
    const log = spyOn(console, "log").mockImplementation(() => {});
    try {
      for (const pk of [A, B, C]) await registry.revoke(pk, "member", "mismatch");
      const lines = log.mock.calls.map((c) => String(c[0])).filter((l) => [A, B, C].some((pk) => l.startsWith(`admission: ${pk}`)));
      expect(lines).toEqual([`admission: ${A} no longer member (mismatch)`]);
    } finally {
      log.mockRestore();
    }
  });
});
