// LNbits' wallet API as a PaymentNode: invoices made and checked with the wallet's invoice key
// (`X-Api-Key`). The key never appears in a log line or an error.
import { baseUrl, field, HASH, isBolt11, NodeError, nodeFetch, type NodeInvoice, type NodeStatus, type PaymentNode } from "./lightning.ts";

export interface LnbitsOptions {
  nodeUrl: string;
  apiKey: string;
  /** Read at each call (node_timeout_ms is reloadable). */
  timeoutMs: () => number;
}

export class Lnbits implements PaymentNode {
  readonly name = "LNBits";
  private readonly base: string;

  constructor(private readonly opts: LnbitsOptions) {
    this.base = baseUrl(opts.nodeUrl);
  }

  async create(amountSats: number, memo: string, webhookUrl: string | undefined, expiryS: number): Promise<NodeInvoice> {
    const body: Record<string, unknown> = { out: false, amount: amountSats, unit: "sat", memo };
    if (webhookUrl) body.webhook = webhookUrl;
    body.expiry = expiryS;
    const reply = await nodeFetch(
      "create",
      `${this.base}/api/v1/payments`,
      { method: "POST", headers: { "X-Api-Key": this.opts.apiKey, "Content-Type": "application/json" }, body: JSON.stringify(body) },
      this.opts.timeoutMs(),
    );
    if (reply.status !== 200 && reply.status !== 201) throw new NodeError("create", `HTTP ${reply.status}${detail(reply.body)}`);
    const hash = field(reply.body, "payment_hash");
    // The field's name changed across LNbits versions (0.x payment_request, 1.x bolt11).
    const bolt11 = field(reply.body, "payment_request") ?? field(reply.body, "bolt11");
    if (typeof hash !== "string" || !HASH.test(hash) || !isBolt11(bolt11))
      throw new NodeError("create", "the answer has no payment_hash or payment request");
    return { bolt11, payment_hash: hash };
  }

  async check(hash: string): Promise<NodeStatus> {
    if (!HASH.test(hash)) return { state: "unknown" };
    const reply = await nodeFetch(
      "check",
      `${this.base}/api/v1/payments/${hash}`,
      { headers: { "X-Api-Key": this.opts.apiKey } },
      this.opts.timeoutMs(),
    );
    if (reply.status === 404) return { state: "unknown" };
    if (reply.status !== 200) throw new NodeError("check", `HTTP ${reply.status}${detail(reply.body)}`);
    const paid = field(reply.body, "paid");
    if (typeof paid !== "boolean") throw new NodeError("check", "the answer has no paid field");
    const details = field(reply.body, "details");
    if (paid) {
      const msat = field(details, "amount");
      return typeof msat === "number" && msat > 0 ? { state: "paid", receivedSats: Math.floor(msat / 1000) } : { state: "paid" };
    }
    if (field(details, "status") === "failed") return { state: "expired" };
    const expiry = expiresAt(field(details, "expiry"));
    return { state: expiry !== undefined && expiry < Date.now() / 1000 ? "expired" : "unpaid" };
  }
}

/** details.expiry: unix seconds in 0.x, an ISO date in 1.x. */
function expiresAt(v: unknown): number | undefined {
  if (typeof v === "number" && v > 0) return v;
  if (typeof v === "string") {
    const ms = Date.parse(v);
    if (Number.isFinite(ms)) return ms / 1000;
  }
  return undefined;
}

/** LNbits' `detail`, short, for the log line. */
function detail(body: unknown): string {
  const d = field(body, "detail");
  return typeof d === "string" ? `: ${d.slice(0, 120)}` : "";
}
