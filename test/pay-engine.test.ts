// The payments engine and the ledger (access/payments.ts, access/ledger.ts) against the fake
// LNbits over real HTTP, with an in-memory invoice store of the AdmissionStore contract: a webhook
// is only a hint, the node is always asked, and every path into the node is bounded.
import { afterAll, afterEach, beforeEach, expect, spyOn, test } from "bun:test";
import { Ledger } from "../src/access/ledger.ts";
import { Lnbits } from "../src/access/lnbits.ts";
import { AccessMetrics } from "../src/access/metrics.ts";
import { INVOICES_PER_MINUTE, Payments, WIDE_JOIN_FACTOR, wideGroup, type InvoiceStore, type PayKeys } from "../src/access/payments.ts";
import { refuse, type Refusal } from "../src/protocol/reasons.ts";
import type { InvoiceRow, PaidEffect } from "../src/store/types.ts";
import { startFakeLnbits } from "./fakes/lnbits.ts";
import { waitUntil } from "./helpers.ts";

const lnbits = startFakeLnbits({ apiKey: "k" });
afterAll(() => lnbits.close());

/** The AdmissionStore invoice calls, in memory, with settleInvoice's "once" rule. */
class MemoryInvoices implements InvoiceStore {
  rows = new Map<string, InvoiceRow>();
  balances: { pubkey: string; sats: number }[] = [];
  async putInvoice(i: InvoiceRow) {
    this.rows.set(i.payment_hash, { ...i });
  }
  async invoice(hash: string) {
    const r = this.rows.get(hash);
    return r && { ...r };
  }
  async openInvoice(pubkey: string, purpose: string, now: number) {
    let best: InvoiceRow | undefined;
    for (const r of this.rows.values())
      if (
        r.pubkey === pubkey &&
        r.purpose === purpose &&
        r.status === "unpaid" &&
        r.expires_at > now &&
        (!best || r.created_at >= best.created_at)
      )
        best = r;
    return best && { ...best };
  }
  async openInvoices(now: number) {
    return [...this.rows.values()].filter((r) => r.status === "unpaid" && r.expires_at > now).length;
  }
  async checkedInvoice(hash: string, at: number) {
    const r = this.rows.get(hash);
    if (r) r.checked_at = at;
  }
  async dueInvoices(now: number, graceS: number, max: number) {
    return [...this.rows.values()]
      .filter((r) => r.status === "unpaid" && r.expires_at + graceS > now)
      .sort((a, b) => (a.checked_at ?? 0) - (b.checked_at ?? 0))
      .slice(0, max);
  }
  /** What each paid settle wrote with it (the store's one step). */
  effects: PaidEffect[] = [];
  async settleInvoice(hash: string, status: "paid" | "expired", at: number, effect?: PaidEffect) {
    const r = this.rows.get(hash);
    if (r?.status !== "unpaid") return false;
    r.status = status;
    if (status === "paid") r.paid_at = at;
    if (status === "paid" && effect) {
      this.effects.push(effect);
      if ("credit" in effect) this.balances.push(effect.credit);
    }
    return true;
  }
  async reconcilePaid() {
    return [];
  }
  async addBalances(d: { pubkey: string; sats: number }[]) {
    this.balances.push(...d);
  }
  async balancesList() {
    return [];
  }
}

let store: MemoryInvoices;
let admitted: Map<string, number>;
let keys: PayKeys;
let clock: number;
let clockMs = 1e12;
let payments: Payments;
let ledger: Ledger;
let metrics: AccessMetrics;
const PK = "a".repeat(64);
const pk = (i: number) => i.toString(16).padStart(64, "0");

function make(opts: { timeoutMs?: number } = {}) {
  ledger = new Ledger(
    { balances: async () => [], addBalances: (d) => store.addBalances(d) },
    { cost: () => 10, payer: (p) => admitted.has(p), short: (_p, b, c) => refuse("blocked", `balance ${b} < ${c}`) },
  );
  payments = new Payments({
    node: new Lnbits({ nodeUrl: lnbits.url, apiKey: "k", timeoutMs: () => opts.timeoutMs ?? 300 }),
    store,
    ledger,
    keys: () => keys,
    webhookUrl: () => "http://127.0.0.1:1/lnbits",
    now: () => clock,
    nowMs: () => clockMs,
    admitter: {
      admitted: (p) => admitted.has(p),
      admitPaid: async (p) => {
        admitted.set(p, (admitted.get(p) ?? 0) + 1);
      },
    },
    metrics,
  });
}

let warn: ReturnType<typeof spyOn>;
beforeEach(() => {
  store = new MemoryInvoices();
  admitted = new Map();
  keys = {
    admission_cost: 4200,
    sign_ups: true,
    invoice_expiry_seconds: 3600,
    poll_seconds: 1,
    max_open_invoices: 10_000,
    join_attempts_per_hour: 20,
  };
  clock = Math.floor(Date.now() / 1000);
  metrics = new AccessMetrics();
  lnbits.mode = "ok";
  make();
  warn = spyOn(console, "warn").mockImplementation(() => {});
});
afterEach(async () => {
  warn.mockRestore();
  lnbits.mode = "ok";
  await payments.stop();
});

test("an invoice, handed out again while open; paid only when the node says so", async () => {
  const a = await payments.invoiceFor(PK, "g");
  expect(a.kind).toBe("invoice");
  if (a.kind !== "invoice") return;
  expect(a.amount_sats).toBe(4200);
  expect(await payments.invoiceFor(PK, "g")).toEqual(a);
  expect(lnbits.calls.create).toBeGreaterThan(0);
  expect(await payments.status(PK)).toBe(false);
  lnbits.markPaid(a.payment_hash);
  expect(await payments.check(a.payment_hash, true)).toBe("paid");
  expect(admitted.get(PK)).toBe(1);
  expect(await payments.invoiceFor(PK, "g")).toEqual({ kind: "admitted" });
  expect(metrics.invoices.created).toBe(1);
  expect(metrics.invoices.paid).toBe(1);
});

test("forged and replayed webhooks admit nobody twice; the node is asked once per hint", async () => {
  const a = await payments.invoiceFor(PK, "g");
  if (a.kind !== "invoice") throw new Error("no invoice");
  const before = lnbits.calls.check;
  payments.webhook(JSON.stringify({ payment_hash: a.payment_hash, paid: true, status: "success" }));
  await webhooksHandled(1);
  expect(lnbits.calls.check).toBe(before + 1);
  expect(admitted.has(PK)).toBe(false);
  payments.webhook(JSON.stringify({ payment_hash: "f".repeat(64) }));
  payments.webhook("not json");
  await webhooksHandled(3);
  expect(admitted.size).toBe(0);
  lnbits.markPaid(a.payment_hash);
  clockMs += CHECK_GAP;
  payments.webhook(JSON.stringify({ payment_hash: a.payment_hash }));
  await webhooksHandled(4);
  expect(admitted.get(PK)).toBe(1);
  for (let i = 0; i < 3; i++) {
    clockMs += CHECK_GAP;
    payments.webhook(JSON.stringify({ payment_hash: a.payment_hash }));
  }
  await webhooksHandled(7);
  expect(admitted.get(PK)).toBe(1);
});
const CHECK_GAP = 2_050;

/** Waits until `n` webhooks of this test are done with: each is counted (checked, unknown, dropped) once its check ended. */
function webhooksHandled(n: number): Promise<void> {
  const w = metrics.webhooks;
  return waitUntil(`${n} webhooks handled`, () => w.checked + w.unknown + w.dropped >= n, 5000);
}

test("the poller admits a payment whose webhook never came", async () => {
  const a = await payments.invoiceFor(PK, "g");
  if (a.kind !== "invoice") throw new Error("no invoice");
  payments.start();
  lnbits.markPaid(a.payment_hash);
  await waitUntil("the poller's admission", () => admitted.has(PK), 4000);
  expect(admitted.get(PK)).toBe(1);
});

test("an expired invoice is replaced by a new one", async () => {
  const a = await payments.invoiceFor(PK, "g");
  if (a.kind !== "invoice") throw new Error("no invoice");
  clock += 3600 - 30;
  const b = await payments.invoiceFor(PK, "g");
  expect(b.kind).toBe("invoice");
  if (b.kind === "invoice") expect(b.payment_hash).not.toBe(a.payment_hash);
  clock += 90;
  await payments.poll();
  expect(store.rows.get(a.payment_hash)!.status).toBe("expired");
  expect(metrics.invoices.expired).toBeGreaterThanOrEqual(1);
});

test.each(["down", "slow", "garbage", "500"] as const)("node %s: node-error, nobody admitted, one log line", async (mode) => {
  const a = await payments.invoiceFor(PK, "g");
  if (a.kind !== "invoice") throw new Error("no invoice");
  admitted.set(pk(7), 1);
  lnbits.markPaid(a.payment_hash);
  lnbits.mode = mode;
  expect(await payments.invoiceFor(pk(1), "g")).toEqual({ kind: "node-error" });
  expect(await payments.invoiceFor(pk(2), "g")).toEqual({ kind: "node-error" });
  expect(await payments.check(a.payment_hash, true)).toBeUndefined();
  expect(admitted.has(PK)).toBe(false);
  expect(admitted.has(pk(7))).toBe(true);
  expect(warn.mock.calls.filter((c: unknown[]) => String(c[0]).startsWith("warning: payments: LNBits create")).length).toBe(1);
  expect(metrics.nodeErrors.create).toBe(2);
});

test("10,000 join attempts from one address group: at most 20 node calls, the rest limited", async () => {
  const before = lnbits.calls.create;
  const answers = await Promise.all(Array.from({ length: 10_000 }, (_, i) => payments.invoiceFor(pk(i + 1), "1.2.3.4")));
  expect(lnbits.calls.create - before).toBeLessThanOrEqual(20);
  expect(answers.filter((a) => a.kind === "limited").length).toBeGreaterThanOrEqual(9_980);
  const limited = answers.find((a) => a.kind === "limited");
  expect(limited && limited.kind === "limited" && limited.retryAfterS).toBeGreaterThan(0);
  expect((await payments.invoiceFor(pk(20_001), "5.6.7.8")).kind).toBe("invoice");
  expect(warn.mock.calls.filter((c: unknown[]) => String(c[0]).includes("join attempts limited")).length).toBe(1);
});

test("a webhook flood of 5,000 hints: node checks bounded by the hint bucket", async () => {
  const hashes: string[] = [];
  for (let i = 0; i < 30; i++) {
    const a = await payments.invoiceFor(pk(i + 1), `g${i}`);
    if (a.kind === "invoice") hashes.push(a.payment_hash);
  }
  const before = lnbits.calls.check;
  for (let i = 0; i < 5_000; i++) payments.webhook(JSON.stringify({ payment_hash: hashes[i % hashes.length] }));
  await webhooksHandled(5_000);
  expect(lnbits.calls.check - before).toBeLessThanOrEqual(30);
  expect(metrics.webhooks.dropped).toBeGreaterThanOrEqual(4_970);
});

test("max_open_invoices, sign_ups = false, a short payment", async () => {
  keys.max_open_invoices = 2;
  expect((await payments.invoiceFor(pk(1), "a")).kind).toBe("invoice");
  expect((await payments.invoiceFor(pk(2), "b")).kind).toBe("invoice");
  expect(await payments.invoiceFor(pk(3), "c")).toEqual({ kind: "full" });
  keys.sign_ups = false;
  expect(await payments.invoiceFor(pk(4), "d")).toEqual({ kind: "closed" });
  keys.sign_ups = true;
  keys.max_open_invoices = 10;
  const a = await payments.invoiceFor(pk(5), "e");
  if (a.kind !== "invoice") throw new Error("no invoice");
  lnbits.markPaid(a.payment_hash, 1);
  expect(await payments.check(a.payment_hash, true)).toBe("unpaid");
  expect(admitted.has(pk(5))).toBe(false);
});

test("ledger: reservations cannot overdraw, stored events are charged, top-ups credit once", async () => {
  admitted.set(PK, 1);
  expect((ledger.reserve(PK) as Refusal | undefined)?.prefix).toBe("blocked");
  const t = await payments.invoiceFor(PK, "g", 25);
  if (t.kind !== "invoice") throw new Error("no top-up invoice");
  expect(t.amount_sats).toBe(25);
  lnbits.markPaid(t.payment_hash);
  await payments.check(t.payment_hash, true);
  await payments.check(t.payment_hash, true);
  expect(ledger.balance(PK)).toBe(25);
  expect(ledger.reserve(PK)).toBeUndefined();
  expect(ledger.reserve(PK)).toBeUndefined();
  expect((ledger.reserve(PK) as Refusal | undefined)?.message).toBe("balance 25 < 10");
  ledger.settle(PK, true);
  ledger.settle(PK, false);
  expect(ledger.balance(PK)).toBe(15);
  expect(ledger.reserve(PK)).toBeUndefined();
  ledger.settle(PK, true);
  expect(ledger.balance(PK)).toBe(5);
  // The credit went to the store with the settle, once; the charges follow as one delta.
  expect(store.balances).toEqual([{ pubkey: PK, sats: 25 }]);
  await ledger.flush();
  expect(store.balances).toEqual([
    { pubkey: PK, sats: 25 },
    { pubkey: PK, sats: -20 },
  ]);
  expect(ledger.reserve("b".repeat(64))).toBeUndefined();
});

test("admission_cost 0 admits through the join bucket: one address group cannot make admission rows without bound", async () => {
  keys.admission_cost = 0;
  keys.join_attempts_per_hour = 2;
  const answers = [];
  for (let i = 1; i <= 10; i++) answers.push((await payments.invoiceFor(pk(i), "9.9.9.9")).kind);
  expect(answers.filter((k) => k === "admitted").length).toBe(2);
  expect(answers.filter((k) => k === "limited").length).toBe(8);
  expect(admitted.size).toBe(2);
});

test("many /64s of one IPv6 /48 share a coarser bucket, and every asker one bucket of new invoices a minute", async () => {
  expect(wideGroup("2001:db8:7:1::/64")).toBe("2001:db8:7::/48");
  expect(wideGroup("10.1.2.3")).toBe("10.1.2.3");
  keys.join_attempts_per_hour = 1;
  const before = lnbits.calls.create;
  const fromOne48 = [];
  for (let i = 1; i <= 12; i++) fromOne48.push((await payments.invoiceFor(pk(i), `2001:db8:7:${i.toString(16)}::/64`)).kind);
  expect(fromOne48.filter((k) => k === "invoice").length).toBe(WIDE_JOIN_FACTOR);
  expect(fromOne48.filter((k) => k === "limited").length).toBe(12 - WIDE_JOIN_FACTOR);
  // Addresses from everywhere: the minute's bucket over everyone (less what the /48 took above).
  const everywhere = await Promise.all(Array.from({ length: 100 }, (_, i) => payments.invoiceFor(pk(1000 + i), `10.7.${i}.1`)));
  expect(everywhere.filter((a) => a.kind === "invoice").length).toBe(INVOICES_PER_MINUTE - WIDE_JOIN_FACTOR);
  expect(lnbits.calls.create - before).toBe(INVOICES_PER_MINUTE);
});
