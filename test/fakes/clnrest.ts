// A fake Core Lightning REST API (the clnrest plugin's `/v1/<method>`): `invoice` and
// `listinvoices`, authorised by a `Rune` header, with CLN's rule that a label is used once (the
// reason the relay makes a unique label per invoice). No webhook: CLN has none.
import { fakeBolt11, isExpired, json, startFakeNode, randomHex, type FakeInvoice, type FakeNodeBase } from "./lightning-node.ts";

export interface FakeClnRest extends FakeNodeBase {
  /** Labels seen by `invoice`, duplicates included (the test of unique labels reads them). */
  readonly labels: string[];
  /** A node (or proxy) that ignores listinvoices' filter: it answers with its newest invoice whatever was asked. */
  ignoreFilter: boolean;
}

export function startFakeClnRest(opts: { rune: string }): FakeClnRest {
  const labels: string[] = [];
  const byLabel = new Set<string>();
  // The route reads the switch on the object returned below.
  let fake: FakeClnRest | undefined;
  const base = startFakeNode(
    async (req, url, node) => {
      if (req.headers.get("rune") !== opts.rune) {
        node.calls.unauthorized++;
        return json({ code: 1501, message: "Not authorized: Not derived from master" }, 401);
      }
      const body = (await req.json().catch(() => null)) as Record<string, unknown> | null;
      if (req.method === "POST" && url.pathname === "/v1/invoice") {
        if (!body || typeof body.amount_msat !== "number" || typeof body.label !== "string")
          return json({ code: -32602, message: "missing amount_msat or label" }, 400);
        labels.push(body.label);
        if (byLabel.has(body.label)) return json({ code: 900, message: "Duplicate label" }, 500);
        byLabel.add(body.label);
        const sats = Math.floor(body.amount_msat / 1000);
        const hash = randomHex(32);
        const createdAt = Math.floor(Date.now() / 1000);
        const expiry = typeof body.expiry === "number" ? body.expiry : 604800;
        const inv: FakeInvoice = {
          hash,
          bolt11: fakeBolt11(sats),
          amountSats: sats,
          memo: String(body.description ?? ""),
          label: body.label,
          createdAt,
          expiry,
          paid: false,
          expired: false,
        };
        node.invoices.set(hash, inv);
        return json({ payment_hash: hash, expires_at: createdAt + expiry, bolt11: inv.bolt11, payment_secret: randomHex(32) }, 201);
      }
      if (req.method === "POST" && url.pathname === "/v1/listinvoices") {
        const inv = fake?.ignoreFilter
          ? [...node.invoices.values()].at(-1)
          : typeof body?.payment_hash === "string"
            ? node.invoices.get(body.payment_hash)
            : undefined;
        if (!inv) return json({ invoices: [] });
        const status = inv.paid ? "paid" : isExpired(inv) ? "expired" : "unpaid";
        return json({
          invoices: [
            {
              label: inv.label,
              bolt11: inv.bolt11,
              payment_hash: inv.hash,
              amount_msat: inv.amountSats * 1000,
              status,
              description: inv.memo,
              expires_at: inv.createdAt + inv.expiry,
              ...(inv.paid ? { amount_received_msat: (inv.receivedSats ?? inv.amountSats) * 1000, paid_at: createdAtNow() } : {}),
            },
          ],
        });
      }
      return json({ code: -32601, message: "Unknown command" }, 404);
    },
    (_req, url) => (url.pathname === "/v1/invoice" ? "create" : url.pathname === "/v1/listinvoices" ? "check" : "other"),
  );
  fake = Object.assign(base, { labels, ignoreFilter: false });
  return fake;
}

const createdAtNow = () => Math.floor(Date.now() / 1000);
