// A fake LNbits wallet API (the calls the relay makes, shaped as LNbits answers them): create an
// invoice with the invoice key, check it by hash, and post the payment to the invoice's webhook
// when a test says so (or drops, delays, forges that post).
import { fakeBolt11, isExpired, json, randomHex, startFakeNode, type FakeInvoice, type FakeNodeBase } from "./lightning-node.ts";

export interface WebhookOptions {
  /** The node "sends" nothing (the webhook was lost). */
  drop?: boolean;
  delayMs?: number;
}

export interface FakeLnbits extends FakeNodeBase {
  /** Answer `bolt11` (LNbits 1.x) instead of `payment_request` (0.x) on create. */
  useBolt11Name: boolean;
  /** Webhook posts made (sent or dropped), for assertions. */
  readonly webhooks: { sent: number; dropped: number; status: number[] };
  /** Posts LNbits' payment JSON to the invoice's stored webhook; resolves with the HTTP status (0 = dropped). */
  sendWebhook(hash: string, opts?: WebhookOptions): Promise<number>;
  /** Posts a payment JSON claiming `hash` is paid to any URL: what an attacker can send. */
  forgeWebhook(url: string, hash: string, extra?: Record<string, unknown>): Promise<number>;
}

/** LNbits' Payment object, as its API and its webhook give it (amount in msat). */
function paymentJson(inv: FakeInvoice | undefined, hash: string, paidClaim?: boolean): Record<string, unknown> {
  const paid = paidClaim ?? inv?.paid ?? false;
  return {
    checking_id: hash,
    pending: !paid,
    amount: (inv?.amountSats ?? 1000) * 1000,
    fee: 0,
    memo: inv?.memo ?? "",
    time: inv?.createdAt ?? Math.floor(Date.now() / 1000),
    bolt11: inv?.bolt11 ?? fakeBolt11(1),
    preimage: paid ? randomHex(32) : "0".repeat(64),
    payment_hash: hash,
    expiry: inv ? inv.createdAt + inv.expiry : 0,
    extra: {},
    wallet_id: "fakewallet",
    webhook: inv?.webhook ?? null,
    status: paid ? "success" : "pending",
  };
}

export function startFakeLnbits(opts: { apiKey: string }): FakeLnbits {
  const base = startFakeNode(
    async (req, url, node) => {
      if (req.headers.get("x-api-key") !== opts.apiKey) {
        node.calls.unauthorized++;
        return json({ detail: "Invalid key" }, 401);
      }
      if (req.method === "POST" && url.pathname === "/api/v1/payments") {
        const body = (await req.json().catch(() => null)) as Record<string, unknown> | null;
        if (body?.out !== false || typeof body.amount !== "number" || body.amount <= 0) return json({ detail: "bad request" }, 400);
        const hash = randomHex(32);
        const inv: FakeInvoice = {
          hash,
          bolt11: fakeBolt11(body.amount),
          amountSats: body.amount,
          memo: String(body.memo ?? ""),
          webhook: typeof body.webhook === "string" ? body.webhook : undefined,
          createdAt: Math.floor(Date.now() / 1000),
          expiry: typeof body.expiry === "number" ? body.expiry : 3600,
          paid: false,
          expired: false,
        };
        node.invoices.set(hash, inv);
        const nameOfRequest = fake.useBolt11Name ? "bolt11" : "payment_request";
        return json({ payment_hash: hash, [nameOfRequest]: inv.bolt11, checking_id: hash }, 201);
      }
      const m = /^\/api\/v1\/payments\/([0-9a-f]{64})$/.exec(url.pathname);
      if (req.method === "GET" && m) {
        const inv = node.invoices.get(m[1]!);
        if (!inv) return json({ detail: "Payment does not exist." }, 404);
        const p = paymentJson(inv, inv.hash);
        if (isExpired(inv)) p.status = "failed";
        if (inv.paid) p.amount = (inv.receivedSats ?? inv.amountSats) * 1000;
        return json({ paid: inv.paid, preimage: p.preimage, details: p });
      }
      return json({ detail: "Not Found" }, 404);
    },
    (req, url) =>
      req.method === "POST" && url.pathname === "/api/v1/payments"
        ? "create"
        : url.pathname.startsWith("/api/v1/payments/")
          ? "check"
          : "other",
  );
  const post = async (url: string, body: unknown): Promise<number> => {
    const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    await res.arrayBuffer();
    fake.webhooks.status.push(res.status);
    return res.status;
  };
  const fake: FakeLnbits = Object.assign(base, {
    useBolt11Name: false,
    webhooks: { sent: 0, dropped: 0, status: [] as number[] },
    async sendWebhook(hash: string, o: WebhookOptions = {}): Promise<number> {
      const inv = base.invoices.get(hash);
      if (!inv?.webhook) throw new Error(`fake LNbits: invoice ${hash} has no webhook`);
      if (o.drop) {
        fake.webhooks.dropped++;
        return 0;
      }
      if (o.delayMs) await Bun.sleep(o.delayMs);
      fake.webhooks.sent++;
      return post(inv.webhook, paymentJson(inv, hash));
    },
    async forgeWebhook(url: string, hash: string, extra: Record<string, unknown> = {}): Promise<number> {
      fake.webhooks.sent++;
      return post(url, { ...paymentJson(base.invoices.get(hash), hash, true), ...extra });
    },
  });
  return fake;
}
