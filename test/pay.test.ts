// Paid admission over the wire (issue 33): a real relay with [pay_to_relay] against the fake
// LNbits and CLN REST servers (test/fakes/, real HTTP on loopback). The node is the only judge of
// "paid": webhooks are hints, the poller and /join/status ask too, and every path into the node is
// bounded. Each test comes from its own address (X-Forwarded-For from a trusted proxy), so the
// join bucket of one does not spend another's.
import { afterAll, beforeAll, describe, expect, spyOn, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { nip19 } from "nostr-tools";
import { Client, failOnRelayErrors, signer, startTestRelay, waitUntil, type Signer, type TestRelay } from "./helpers.ts";
import { databaseFor, dropDatabase, onPostgres } from "./postgres-env.ts";
import { freePort } from "./process-helpers.ts";
import { startFakeClnRest } from "./fakes/clnrest.ts";
import { startFakeLnbits } from "./fakes/lnbits.ts";

failOnRelayErrors();

const KEY = "invoice-key";
const lnbits = startFakeLnbits({ apiKey: KEY });
const cln = startFakeClnRest({ rune: "rune-1" });
const dir = mkdtempSync(join(tmpdir(), "bunstr-pay-"));
const free = signer();
let nextAddress = 1;
/** A fresh client address for each caller (see the file comment). */
const address = () => `10.33.${nextAddress >> 8}.${nextAddress++ & 255}`;

interface PayRelay {
  relay: TestRelay;
  http: string;
  client: Client;
}

async function payRelay(pay: Record<string, unknown>, extra: Record<string, any> = {}, dir?: string): Promise<PayRelay> {
  const port = freePort();
  const relay = await startTestRelay(
    {
      network: { port, remote_ip_header: "x-forwarded-for", trusted_proxies: ["127.0.0.1"] },
      info: { relay_url: `ws://127.0.0.1:${port}/` },
      pay_to_relay: { enabled: true, node_url: lnbits.url, api_secret: KEY, poll_seconds: 1, node_timeout_ms: 400, ...pay },
      authorization: { pubkey_allowlist: [free.pubkey] },
      ...extra,
    } as any,
    { dir },
  );
  await waitUntil("the balances loaded", () => relay.ctx.access?.ready === true, 5_000);
  return { relay, http: `http://127.0.0.1:${port}`, client: await Client.connect(relay.url) };
}

async function get(r: PayRelay, path: string, from = address()) {
  const res = await fetch(`${r.http}${path}`, { headers: { Accept: "application/json", "X-Forwarded-For": from } });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}
const invoiceOf = (r: PayRelay, pk: string, from?: string) => get(r, `/join/invoice?pubkey=${pk}`, from);
const joinUrl = (r: PayRelay, pk: string) => `${r.http}/join?pubkey=${pk}`;
const refusedText = (r: PayRelay, pk: string) => `restricted: this relay requires payment to publish: join at ${joinUrl(r, pk)}`;

async function publish(r: PayRelay, s: Signer, content = "hello") {
  const e = s.sign({ kind: 1, content: `${content} ${Math.random()}` });
  return (await r.client.publish(e)) as [string, string, boolean, string];
}

/** Publishes until accepted (the poller or a webhook admits in the background); the last OK. */
async function acceptedWithin(r: PayRelay, s: Signer, ms: number) {
  const deadline = Date.now() + ms;
  let ok = await publish(r, s);
  while (!ok[2] && Date.now() < deadline) {
    await Bun.sleep(100);
    ok = await publish(r, s);
  }
  return ok;
}

let main: PayRelay;
beforeAll(async () => {
  main = await payRelay({});
});
afterAll(async () => {
  main.client.close();
  await main.relay.stop();
  await lnbits.close();
  await cln.close();
  rmSync(dir, { recursive: true, force: true });
});

let warn: ReturnType<typeof spyOn>;
beforeAll(() => {
  warn = spyOn(console, "warn").mockImplementation(() => {});
});
afterAll(() => warn.mockRestore());
const warned = (prefix: string) => warn.mock.calls.filter((c: unknown[]) => String(c[0]).startsWith(`warning: ${prefix}`)).length;

/** The webhooks `r` has handled: each is counted (checked, unknown, dropped) once its check ended. */
function webhooksSeen(r: PayRelay): number {
  const w = r.relay.ctx.access!.metrics.webhooks;
  return w.checked + w.unknown + w.dropped;
}
/** Waits until `r` has handled `n` webhooks after the count `from` (webhooksSeen before they were sent). */
const webhooksHandled = (r: PayRelay, from: number, n: number) =>
  waitUntil(`${n} webhooks handled`, () => webhooksSeen(r) >= from + n, 10_000);

describe("LNbits", () => {
  test("paying: invoice JSON, refused before with the join URL, webhook, status true, then OK true", async () => {
    const s = signer();
    const before = await publish(main, s);
    expect(before[2]).toBe(false);
    expect(before[3]).toBe(refusedText(main, s.pubkey));
    const inv = await invoiceOf(main, s.pubkey);
    expect(inv.status).toBe(200);
    expect(inv.headers.get("content-type")).toBe("application/json");
    expect(inv.headers.get("cache-control")).toBe("no-store");
    expect(inv.headers.get("access-control-allow-origin")).toBe("*");
    expect(Object.keys(inv.body).sort()).toEqual(["amount_sats", "invoice", "payment_hash"]);
    expect(inv.body.amount_sats).toBe(4200);
    const fake = lnbits.invoices.get(inv.body.payment_hash)!;
    expect(inv.body.invoice).toBe(fake.bolt11);
    expect(fake.webhook).toBe(`${main.http}/lnbits`);
    expect(fake.memo).toStartWith("bunstr admission ");
    // Asked again: the same invoice, no second node call.
    const creates = lnbits.calls.create;
    expect((await invoiceOf(main, s.pubkey)).body).toEqual(inv.body);
    expect(lnbits.calls.create).toBe(creates);
    expect((await get(main, `/join/status?pubkey=${s.pubkey}`)).body).toEqual({ admitted: false });
    lnbits.markPaid(inv.body.payment_hash);
    expect(await lnbits.sendWebhook(inv.body.payment_hash)).toBe(200);
    let status = await get(main, `/join/status?pubkey=${s.pubkey}`);
    for (let i = 0; i < 30 && !status.body.admitted; i++) {
      await Bun.sleep(100);
      status = await get(main, `/join/status?pubkey=${s.pubkey}`);
    }
    expect(status.body).toEqual({ admitted: true });
    expect((await publish(main, s))[2]).toBe(true);
    expect((await invoiceOf(main, s.pubkey)).body).toEqual({ admitted: true });
  });

  test("not paying: OK false with the exact text and join URL; npub accepted by /join/invoice", async () => {
    const s = signer();
    const ok = await publish(main, s);
    expect(ok[3]).toBe(refusedText(main, s.pubkey));
    const inv = await invoiceOf(main, nip19.npubEncode(s.pubkey));
    expect(inv.status).toBe(200);
    expect(inv.body.amount_sats).toBe(4200);
    const bad = await invoiceOf(main, "npub1notakey");
    expect(bad).toMatchObject({ status: 400, body: { error: "invalid: pubkey must be 64 hex characters or an npub" } });
    expect((await invoiceOf(main, "abc")).status).toBe(400);
  });

  test("paying late: no webhook, the poller admits within poll_seconds", async () => {
    const s = signer();
    const inv = await invoiceOf(main, s.pubkey);
    lnbits.markPaid(inv.body.payment_hash);
    const ok = await acceptedWithin(main, s, 5_000);
    expect(ok[2]).toBe(true);
  });

  test("lost webhook (dropped): the poller admits", async () => {
    const s = signer();
    const inv = await invoiceOf(main, s.pubkey);
    lnbits.markPaid(inv.body.payment_hash);
    expect(await lnbits.sendWebhook(inv.body.payment_hash, { drop: true })).toBe(0);
    expect(lnbits.webhooks.dropped).toBeGreaterThan(0);
    expect((await acceptedWithin(main, s, 5_000))[2]).toBe(true);
  });

  test("forged webhooks: unknown and unpaid hashes admit nobody; the node is asked once for the unpaid one", async () => {
    const s = signer();
    const inv = await invoiceOf(main, s.pubkey);
    const checks = lnbits.checksOf.get(inv.body.payment_hash) ?? 0;
    const hooks = webhooksSeen(main);
    expect(await lnbits.forgeWebhook(`${main.http}/lnbits`, "e".repeat(64))).toBe(200);
    expect(await lnbits.forgeWebhook(`${main.http}/lnbits`, inv.body.payment_hash)).toBe(200);
    await webhooksHandled(main, hooks, 2);
    // An unknown hash never reaches the node; the unpaid one is asked about (once for the hint,
    // perhaps once more by the poller, which runs every second); the forged "paid" is never believed.
    expect(lnbits.checksOf.get("e".repeat(64))).toBeUndefined();
    const asked = (lnbits.checksOf.get(inv.body.payment_hash) ?? 0) - checks;
    expect(asked).toBeGreaterThanOrEqual(1);
    expect(asked).toBeLessThanOrEqual(2);
    const ok = await publish(main, s);
    expect(ok[3]).toBe(refusedText(main, s.pubkey));
    const res = await fetch(`${main.http}/lnbits`, { method: "POST", body: "not json" });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({});
    const big = await fetch(`${main.http}/lnbits`, { method: "POST", body: "x".repeat(9000) });
    expect(big.status).toBe(413);
  });

  test("replayed webhook: admitted once, nothing else changes", async () => {
    const s = signer();
    const inv = await invoiceOf(main, s.pubkey);
    lnbits.markPaid(inv.body.payment_hash);
    const hooks = webhooksSeen(main);
    expect(await lnbits.sendWebhook(inv.body.payment_hash, { delayMs: 300 })).toBe(200);
    expect((await acceptedWithin(main, s, 5_000))[2]).toBe(true);
    const paid = main.relay.ctx.access!.metrics.invoices.paid;
    for (let i = 0; i < 3; i++) expect(await lnbits.sendWebhook(inv.body.payment_hash)).toBe(200);
    await webhooksHandled(main, hooks, 4);
    expect(main.relay.ctx.access!.metrics.invoices.paid).toBe(paid);
    const rows = (await main.relay.ctx.store.admission.rows()).filter((r: any) => r.pubkey === s.pubkey);
    expect(rows.map((r: any) => r.basis)).toEqual(["paid"]);
    expect(JSON.parse(rows[0]!.evidence).payment_hash).toBe(inv.body.payment_hash);
  });

  test("an invoice the node expired is replaced by a new one", async () => {
    const s = signer();
    const from = address();
    const a = await invoiceOf(main, s.pubkey, from);
    lnbits.expire(a.body.payment_hash);
    let b = await invoiceOf(main, s.pubkey, from);
    for (let i = 0; i < 40 && b.body.payment_hash === a.body.payment_hash; i++) {
      await Bun.sleep(100);
      b = await invoiceOf(main, s.pubkey, from);
    }
    expect(b.status).toBe(200);
    expect(b.body.payment_hash).not.toBe(a.body.payment_hash);
    expect((await main.relay.ctx.store.admission.invoice(a.body.payment_hash))?.status).toBe("expired");
  });

  test("bolt11 instead of payment_request from LNbits 1.x: the same answer", async () => {
    lnbits.useBolt11Name = true;
    try {
      const s = signer();
      const inv = await invoiceOf(main, s.pubkey);
      expect(inv.status).toBe(200);
      expect(inv.body.invoice).toBe(lnbits.invoices.get(inv.body.payment_hash)!.bolt11);
    } finally {
      lnbits.useBolt11Name = false;
    }
  });

  test("a free allow-listed pubkey writes without paying", async () => {
    expect((await publish(main, free))[2]).toBe(true);
    expect((await invoiceOf(main, free.pubkey)).body).toEqual({ admitted: true });
  });

  test("a top-up for a pubkey charged nothing per event is refused: its sats could never be spent", async () => {
    const top = await get(main, `/join/invoice?pubkey=${free.pubkey}&amount=25`);
    expect(top).toMatchObject({
      status: 403,
      body: { error: "restricted: this pubkey pays nothing per event here, so a top-up could never be spent" },
    });
    const s = signer();
    await main.relay.ctx.access!.admit(s.pubkey, "paid", {});
    const creates = lnbits.calls.create;
    expect((await get(main, `/join/invoice?pubkey=${s.pubkey}&amount=25`)).status).toBe(403);
    expect(lnbits.calls.create).toBe(creates);
  });

  test("an invoice in its last minute is asked about through the coalesced check and the join bucket, not once per request", async () => {
    const r = await payRelay({ poll_seconds: 3600, join_attempts_per_hour: 1 });
    try {
      const s = signer();
      const from = address();
      const inv = await invoiceOf(r, s.pubkey, from);
      const row = (await r.relay.ctx.store.admission.invoice(inv.body.payment_hash))!;
      await r.relay.ctx.store.admission.putInvoice({ ...row, expires_at: Math.floor(Date.now() / 1000) + 10 });
      const checks = lnbits.calls.check;
      const answers: number[] = [];
      for (let i = 0; i < 200; i++) answers.push((await invoiceOf(r, s.pubkey, from)).status);
      expect(lnbits.calls.check - checks).toBeLessThanOrEqual(1);
      expect(answers.filter((st) => st === 429).length).toBe(200);
    } finally {
      r.client.close();
      await r.relay.stop();
    }
  });

  test("/join/status and /join/invoice tell only of payment and the config allow list, never another basis", async () => {
    const r = await payRelay({}, { membership: { enabled: true } });
    try {
      const member = signer();
      await r.relay.ctx.access!.admit(member.pubkey, "member", { invited_by: free.pubkey });
      expect((await publish(r, member))[2]).toBe(true); // a member writes
      expect((await get(r, `/join/status?pubkey=${member.pubkey}`)).body).toEqual({ admitted: false });
      expect(Object.keys((await invoiceOf(r, member.pubkey)).body).sort()).toEqual(["amount_sats", "invoice", "payment_hash"]);
      expect((await get(r, `/join/status?pubkey=${free.pubkey}`)).body).toEqual({ admitted: true });
      const payer = signer();
      await r.relay.ctx.access!.admit(payer.pubkey, "paid", {});
      expect((await get(r, `/join/status?pubkey=${payer.pubkey}`)).body).toEqual({ admitted: true });
      expect((await invoiceOf(r, payer.pubkey)).body).toEqual({ admitted: true });
    } finally {
      r.client.close();
      await r.relay.stop();
    }
  });

  test("a paid admission whose row is missing (settled by a bunstr that wrote it in a second step) is admitted at start, once", async () => {
    const d = mkdtempSync(join(tmpdir(), "bunstr-pay-reconcile-"));
    const s = signer();
    const gone = signer();
    const now = Math.floor(Date.now() / 1000);
    const paid = (pubkey: string, hash: string) => ({
      payment_hash: hash,
      pubkey,
      purpose: "admission" as const,
      amount_sats: 4200,
      bolt11: "lnbcrt4200x",
      status: "paid" as const,
      created_at: now - 60,
      expires_at: now + 3000,
      paid_at: now - 30,
      checked_at: now - 30,
    });
    let r: PayRelay | undefined;
    const restart = async () => {
      r?.client.close();
      await r?.relay.stop();
      r = await payRelay({ poll_seconds: 3600 }, {}, d);
      return r;
    };
    try {
      await (await restart()).relay.ctx.store.admission.putInvoice(paid(s.pubkey, "1".repeat(64)));
      const relay = (await restart()).relay;
      await waitUntil("the paid admission mended", () => relay.ctx.access!.bits(s.pubkey) !== 0, 5_000);
      expect((await publish(r!, s))[2]).toBe(true);
      expect(JSON.parse((await relay.ctx.store.admission.rows()).find((row) => row.pubkey === s.pubkey)!.evidence)).toMatchObject({
        payment_hash: "1".repeat(64),
        amount_sats: 4200,
      });
      // Mended once: a revoke afterwards holds over the next start.
      await relay.ctx.access!.revoke(s.pubkey, "paid", "");
      await restart();
      expect((await publish(r!, s))[3]).toBe(refusedText(r!, s.pubkey));
      expect((await publish(r!, gone))[2]).toBe(false);
    } finally {
      r?.client.close();
      await r?.relay.stop();
      rmSync(d, { recursive: true, force: true });
      if (onPostgres) await dropDatabase(databaseFor(d));
    }
  }, 30_000);

  test("sign_ups = false: no new admissions, texts on the socket and in JSON", async () => {
    const s = signer();
    main.relay.ctx.config.pay_to_relay.sign_ups = false;
    try {
      expect((await publish(main, s))[3]).toBe("restricted: this relay is not taking new sign-ups");
      expect(await invoiceOf(main, s.pubkey)).toMatchObject({
        status: 403,
        body: { error: "restricted: this relay is not taking new sign-ups" },
      });
    } finally {
      main.relay.ctx.config.pay_to_relay.sign_ups = true;
    }
  });

  test("max_open_invoices reached: 503 with its text, and no node call", async () => {
    const creates = lnbits.calls.create;
    main.relay.ctx.config.pay_to_relay.max_open_invoices = 1;
    try {
      expect(await invoiceOf(main, signer().pubkey)).toMatchObject({
        status: 503,
        body: { error: "error: too many open invoices, try again later" },
      });
    } finally {
      main.relay.ctx.config.pay_to_relay.max_open_invoices = 10_000;
    }
    expect(lnbits.calls.create).toBe(creates);
    expect((await invoiceOf(main, signer().pubkey)).status).toBe(200);
  });

  test.each(["down", "slow", "garbage", "500"] as const)(
    "node %s: 502, nobody admitted, nobody already admitted dropped",
    async (mode) => {
      const paid = signer();
      const inv = await invoiceOf(main, paid.pubkey);
      lnbits.markPaid(inv.body.payment_hash);
      expect((await acceptedWithin(main, paid, 5_000))[2]).toBe(true);
      const s = signer();
      const pending = await invoiceOf(main, s.pubkey);
      lnbits.markPaid(pending.body.payment_hash);
      lnbits.mode = mode;
      const nodeErrors = main.relay.ctx.access!.metrics.nodeErrors;
      const failedChecks = nodeErrors.check;
      try {
        const res = await invoiceOf(main, signer().pubkey);
        expect(res).toMatchObject({ status: 502, body: { error: "error: the payment node did not answer, try again" } });
        await waitUntil("a poll against the failing node", () => nodeErrors.check > failedChecks, 10_000);
        expect((await publish(main, s))[2]).toBe(false);
        expect((await publish(main, paid))[2]).toBe(true);
      } finally {
        lnbits.mode = "ok";
      }
    },
    20_000,
  );

  test("the node's faults above: one log line per call, not one per failure", () => {
    expect(warned("payments: LNBits create failed")).toBe(1);
    expect(warned("payments: LNBits check failed")).toBe(1);
    expect(main.relay.ctx.access!.metrics.nodeErrors.create).toBeGreaterThanOrEqual(4);
  });

  test("10,000 join attempts from one address: at most 20 node calls, the rest 429 with Retry-After", async () => {
    const from = address();
    const creates = lnbits.calls.create;
    const lines = warned("payments: join attempts limited"); // another relay's engine may have limited too
    let limited = 0;
    let retryAfter = "";
    for (let batch = 0; batch < 100; batch++) {
      const answers = await Promise.all(
        Array.from({ length: 100 }, async () => {
          const pk = signer().pubkey;
          const res = await fetch(`${main.http}/join/invoice?pubkey=${pk}`, { headers: { "X-Forwarded-For": from } });
          if (res.status === 429) retryAfter = res.headers.get("retry-after") ?? "";
          const body = (await res.json()) as any;
          return { status: res.status, body };
        }),
      );
      limited += answers.filter((a) => a.status === 429).length;
      if (batch === 99)
        expect(answers.find((a) => a.status === 429)?.body.error).toMatch(/^rate-limited: too many join attempts, try again in \d+ s$/);
    }
    expect(lnbits.calls.create - creates).toBeLessThanOrEqual(20);
    expect(limited).toBeGreaterThanOrEqual(9_980);
    expect(Number(retryAfter)).toBeGreaterThan(0);
    expect(warned("payments: join attempts limited") - lines).toBe(1);
    expect(main.relay.ctx.access!.metrics.joinLimited).toBeGreaterThanOrEqual(9_980);
  }, 60_000);

  test("a webhook flood of 5,000 posts: node checks bounded", async () => {
    const hashes: string[] = [];
    for (let i = 0; i < 10; i++) hashes.push((await invoiceOf(main, signer().pubkey)).body.payment_hash);
    const checks = lnbits.calls.check;
    const hooks = webhooksSeen(main);
    const t0 = Date.now();
    for (let batch = 0; batch < 50; batch++)
      await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          fetch(`${main.http}/lnbits`, { method: "POST", body: JSON.stringify({ payment_hash: hashes[i % 10] }) }).then((r) =>
            r.arrayBuffer(),
          ),
        ),
      );
    const seconds = (Date.now() - t0) / 1000;
    await webhooksHandled(main, hooks, 5_000);
    // 20 hints a second at most, and at most one check per invoice per 2 s; plus the poller's page.
    expect(lnbits.calls.check - checks).toBeLessThanOrEqual(Math.ceil(20 + 20 * seconds) + 20);
    expect(main.relay.ctx.access!.metrics.webhooks.dropped).toBeGreaterThanOrEqual(4_000);
  }, 60_000);
});

describe("per-event cost", () => {
  let r: PayRelay;
  beforeAll(async () => {
    r = await payRelay({ cost_per_event: 10 });
  });
  afterAll(async () => {
    r.client.close();
    await r.relay.stop();
  });

  test("balance, the blocked text, a top-up credited once", async () => {
    const s = signer();
    const inv = await invoiceOf(r, s.pubkey);
    lnbits.markPaid(inv.body.payment_hash);
    await lnbits.sendWebhook(inv.body.payment_hash);
    let ok = await acceptedWithin(r, s, 3_000);
    expect(ok[3]).toBe(`blocked: your balance (0 sats) does not cover this event (10 sats): top up at ${joinUrl(r, s.pubkey)}`);
    const top = await get(r, `/join/invoice?pubkey=${s.pubkey}&amount=25`);
    expect(top.status).toBe(200);
    expect(top.body.amount_sats).toBe(25);
    lnbits.markPaid(top.body.payment_hash);
    for (let i = 0; i < 3; i++) await lnbits.sendWebhook(top.body.payment_hash);
    ok = await acceptedWithin(r, s, 5_000);
    expect(ok[2]).toBe(true);
    expect((await publish(r, s))[2]).toBe(true);
    ok = await publish(r, s);
    expect(ok[3]).toBe(`blocked: your balance (5 sats) does not cover this event (10 sats): top up at ${joinUrl(r, s.pubkey)}`);
    // Replays after the fact credit nothing: past the engine's 2 s between checks of one invoice
    // (time that must pass, not a wait for something), the replay is asked about and counted.
    await Bun.sleep(2_100);
    const hooks = webhooksSeen(r);
    await lnbits.sendWebhook(top.body.payment_hash);
    await webhooksHandled(r, hooks, 1);
    expect((await publish(r, s))[3]).toStartWith("blocked: your balance (5 sats)");
    expect((await publish(r, free))[2]).toBe(true);
  }, 20_000);

  test("a paid top-up is in the store with its invoice's settle, not held in memory until a flush", async () => {
    const s = signer();
    await r.relay.ctx.access!.admit(s.pubkey, "paid", {});
    const top = await get(r, `/join/invoice?pubkey=${s.pubkey}&amount=30`);
    expect(top.status).toBe(200);
    lnbits.markPaid(top.body.payment_hash);
    await lnbits.sendWebhook(top.body.payment_hash);
    const admission = r.relay.ctx.store.admission;
    for (let i = 0; i < 50 && (await admission.invoice(top.body.payment_hash))?.status !== "paid"; i++) await Bun.sleep(20);
    expect((await admission.invoice(top.body.payment_hash))?.status).toBe("paid");
    expect((await admission.balances()).find((b) => b.pubkey === s.pubkey)?.sats).toBe(30);
  });
});

if (onPostgres)
  describe("Postgres: nodes share each balance", () => {
    test("a top-up paid through one node is spent on another, and one event's balance pays one event over both nodes", async () => {
      const d = mkdtempSync(join(tmpdir(), "bunstr-pay-nodes-"));
      const a = await payRelay({ cost_per_event: 10, poll_seconds: 3600 }, {}, d);
      const b = await payRelay({ cost_per_event: 10, poll_seconds: 3600 }, {}, d);
      const s = signer();
      const stored = async () => (await a.relay.ctx.store.admission.balances()).find((x) => x.pubkey === s.pubkey)?.sats;
      try {
        await Bun.sleep(1_500); // B's watch of the admin version has its baseline
        await a.relay.ctx.access!.admit(s.pubkey, "paid", {});
        await waitUntil("node B sees the admission", () => b.relay.ctx.access!.bits(s.pubkey) !== 0, 15_000);
        const top = await get(a, `/join/invoice?pubkey=${s.pubkey}&amount=10`);
        expect(top.status).toBe(200);
        lnbits.markPaid(top.body.payment_hash);
        await lnbits.sendWebhook(top.body.payment_hash);
        for (let i = 0; i < 50 && (await stored()) !== 10; i++) await Bun.sleep(100);
        expect(await stored()).toBe(10);
        expect((await publish(b, s))[2]).toBe(true); // node B sees node A's credit
        expect((await publish(a, s))[3]).toBe(
          `blocked: your balance (0 sats) does not cover this event (10 sats): top up at ${joinUrl(a, s.pubkey)}`,
        );
        await a.relay.ctx.store.admission.addBalances([{ pubkey: s.pubkey, sats: 10 }]);
        const both = await Promise.all([publish(a, s), publish(b, s), publish(a, s), publish(b, s)]);
        expect(both.filter((ok) => ok[2]).length).toBe(1);
        expect(await stored()).toBe(0);
      } finally {
        for (const r of [a, b]) {
          r.client.close();
          await r.relay.stop();
        }
        rmSync(d, { recursive: true, force: true });
        await dropDatabase(databaseFor(d));
      }
    }, 40_000);
  });

describe("CLN REST", () => {
  let r: PayRelay;
  beforeAll(async () => {
    writeFileSync(join(dir, "rune"), "rune-1\n");
    r = await payRelay({ processor: "ClnRest", node_url: cln.url, api_secret: "", rune_path: join(dir, "rune") });
  });
  afterAll(async () => {
    r.client.close();
    await r.relay.stop();
  });

  test("the same happy path (no webhook: the poller and /join/status), unique labels", async () => {
    const a = signer();
    const b = signer();
    const ia = await invoiceOf(r, a.pubkey);
    const ib = await invoiceOf(r, b.pubkey);
    expect(Object.keys(ia.body).sort()).toEqual(["amount_sats", "invoice", "payment_hash"]);
    expect(ia.body.invoice).toBe(cln.invoices.get(ia.body.payment_hash)!.bolt11);
    expect(cln.invoices.get(ib.body.payment_hash)!.amountSats).toBe(4200);
    expect(new Set(cln.labels).size).toBe(cln.labels.length);
    expect((await publish(r, a))[3]).toBe(refusedText(r, a.pubkey));
    cln.markPaid(ia.body.payment_hash);
    cln.markPaid(ib.body.payment_hash);
    expect((await get(r, `/join/status?pubkey=${a.pubkey}`)).body).toEqual({ admitted: true });
    expect((await publish(r, a))[2]).toBe(true);
    expect((await acceptedWithin(r, b, 5_000))[2]).toBe(true);
  }, 20_000);
});
