// The payment node clients (access/lnbits.ts, access/clnrest.ts) against the fake nodes over real
// HTTP: shapes, the key/rune, each fault mode a NodeError within the timeout, the 64 KiB cap, and
// faults logged at most once a minute.
import { afterAll, describe, expect, spyOn, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ClnRest, readRune } from "../src/access/clnrest.ts";
import { NodeError, NodeFaults, type PaymentNode } from "../src/access/lightning.ts";
import { Lnbits } from "../src/access/lnbits.ts";
import { startFakeClnRest } from "./fakes/clnrest.ts";
import type { FakeNodeBase } from "./fakes/lightning-node.ts";
import { startFakeLnbits } from "./fakes/lnbits.ts";

const lnbits = startFakeLnbits({ apiKey: "invoice-key" });
const cln = startFakeClnRest({ rune: "rune-abc" });
const dir = mkdtempSync(join(tmpdir(), "bunstr-pay-node-"));
afterAll(async () => {
  await lnbits.close();
  await cln.close();
  rmSync(dir, { recursive: true, force: true });
});

const TIMEOUT = 300;
const clients: [string, FakeNodeBase, () => PaymentNode, () => PaymentNode][] = [
  [
    "LNbits",
    lnbits,
    () => new Lnbits({ nodeUrl: `${lnbits.url}/`, apiKey: "invoice-key", timeoutMs: () => TIMEOUT }),
    () => new Lnbits({ nodeUrl: lnbits.url, apiKey: "wrong", timeoutMs: () => TIMEOUT }),
  ],
  [
    "CLN REST",
    cln,
    () => {
      writeFileSync(join(dir, "rune"), "rune-abc\n");
      return new ClnRest({ nodeUrl: cln.url, rune: readRune(join(dir, "rune")), timeoutMs: () => TIMEOUT });
    },
    () => new ClnRest({ nodeUrl: cln.url, rune: "rune-other", timeoutMs: () => TIMEOUT }),
  ],
];

describe.each(clients)("%s client", (_name, fake, client, badKey) => {
  test("creates an invoice and follows it: unpaid, paid with the amount, expired, unknown", async () => {
    const node = client();
    const inv = await node.create(4200, "bunstr admission npub1abc", "http://127.0.0.1:1/lnbits", 600);
    expect(inv.payment_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(inv.bolt11).toStartWith("lnbcrt4200");
    expect(fake.invoices.get(inv.payment_hash)!.amountSats).toBe(4200);
    expect(fake.invoices.get(inv.payment_hash)!.memo).toBe("bunstr admission npub1abc");
    expect(await node.check(inv.payment_hash)).toEqual({ state: "unpaid" });
    fake.markPaid(inv.payment_hash);
    expect(await node.check(inv.payment_hash)).toEqual({ state: "paid", receivedSats: 4200 });
    const other = await node.create(10, "m", undefined, 600);
    fake.expire(other.payment_hash);
    expect((await node.check(other.payment_hash)).state).toBe("expired");
    expect(await node.check("ab".repeat(32))).toEqual({ state: "unknown" });
    expect(await node.check("../../etc")).toEqual({ state: "unknown" });
  });

  test("a wrong key or rune is a NodeError, and the node counted it unauthorised", async () => {
    const before = fake.calls.unauthorized;
    expect(
      await badKey()
        .create(1, "m", undefined, 60)
        .catch((e) => e),
    ).toBeInstanceOf(NodeError);
    expect(fake.calls.unauthorized).toBe(before + 1);
  });

  test.each(["down", "slow", "garbage", "500"] as const)("mode %s: a NodeError within the timeout", async (mode) => {
    const node = client();
    const inv = await node.create(21, "m", undefined, 600);
    fake.mode = mode;
    try {
      const t0 = performance.now();
      const create = await node.create(21, "m", undefined, 600).catch((e) => e);
      const check = await node.check(inv.payment_hash).catch((e) => e);
      expect(create).toBeInstanceOf(NodeError);
      expect(check).toBeInstanceOf(NodeError);
      expect(create.call).toBe("create");
      expect(check.call).toBe("check");
      expect(performance.now() - t0).toBeLessThan(2 * TIMEOUT + 1000);
      if (mode === "slow") expect(create.message).toContain(`no answer in ${TIMEOUT} ms`);
    } finally {
      fake.mode = "ok";
    }
    expect(await node.check(inv.payment_hash)).toEqual({ state: "unpaid" });
  });
});

test("LNbits: bolt11 and payment_request are both read; the webhook is passed on only when set", async () => {
  const node = clients[0]![2]();
  lnbits.useBolt11Name = true;
  const a = await node.create(5, "m", undefined, 60);
  lnbits.useBolt11Name = false;
  const b = await node.create(5, "m", "http://127.0.0.1:9/lnbits", 60);
  expect(a.bolt11).toBe(lnbits.invoices.get(a.payment_hash)!.bolt11);
  expect(b.bolt11).toBe(lnbits.invoices.get(b.payment_hash)!.bolt11);
  expect(lnbits.invoices.get(a.payment_hash)!.webhook).toBeUndefined();
  expect(lnbits.invoices.get(b.payment_hash)!.webhook).toBe("http://127.0.0.1:9/lnbits");
});

test("LNbits: a short payment reports what was received", async () => {
  const node = clients[0]![2]();
  const inv = await node.create(1000, "m", undefined, 60);
  lnbits.markPaid(inv.payment_hash, 10);
  expect(await node.check(inv.payment_hash)).toEqual({ state: "paid", receivedSats: 10 });
});

test("CLN REST: every invoice has its own label (CLN refuses a label twice)", async () => {
  const node = clients[1]![2]();
  for (let i = 0; i < 5; i++) await node.create(7, "m", undefined, 60);
  expect(cln.labels.length).toBeGreaterThanOrEqual(5);
  expect(new Set(cln.labels).size).toBe(cln.labels.length);
  for (const l of cln.labels) expect(l).toMatch(/^bunstr-[0-9a-f]{16}$/);
});

test("CLN REST: an answer about another invoice than the one asked is unknown, never its status", async () => {
  const node = clients[1]![2]();
  const paid = await node.create(9, "m", undefined, 60);
  cln.markPaid(paid.payment_hash);
  expect(await node.check(paid.payment_hash)).toEqual({ state: "paid", receivedSats: 9 });
  cln.ignoreFilter = true; // answers with that one paid invoice whatever is asked
  try {
    expect(await node.check("e".repeat(64))).toEqual({ state: "unknown" });
    expect(await node.check(paid.payment_hash)).toEqual({ state: "paid", receivedSats: 9 });
  } finally {
    cln.ignoreFilter = false;
  }
});

test("an answer past 64 KiB is refused without being read whole", async () => {
  const huge = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: () =>
      new Response(
        new ReadableStream({
          pull(c) {
            c.enqueue(new Uint8Array(16 * 1024).fill(32));
          },
        }),
        { headers: { "content-type": "application/json" } },
      ),
  });
  try {
    const node = new Lnbits({ nodeUrl: `http://127.0.0.1:${huge.port}`, apiKey: "k", timeoutMs: () => 5000 });
    const err = await node.check("ab".repeat(32)).catch((e) => e);
    expect(err).toBeInstanceOf(NodeError);
    expect(err.message).toContain("larger than 64 KiB");
  } finally {
    await huge.stop(true);
  }
});

test("NodeFaults: every fault counted, one log line a minute per call with the count held back", () => {
  const warn = spyOn(console, "warn").mockImplementation(() => {});
  try {
    const seen: string[] = [];
    const faults = new NodeFaults("LNBits", (c) => seen.push(c));
    for (let i = 0; i < 1000; i++) faults.record("check", new NodeError("check", "no answer in 10 ms"));
    faults.record("create", new NodeError("create", "HTTP 500"));
    expect(faults.counts).toEqual({ check: 1000, create: 1 });
    expect(seen.length).toBe(1001);
    expect(warn).toHaveBeenCalledTimes(2);
    expect(String(warn.mock.calls[0]![0])).toBe("warning: payments: LNBits check failed: no answer in 10 ms");
  } finally {
    warn.mockRestore();
  }
});
