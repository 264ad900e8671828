// Core Lightning's REST plugin (clnrest) as a PaymentNode: `invoice` and `listinvoices`, with the
// rune read from rune_path at start. CLN refuses a label it has seen, so each invoice has its own
// (`bunstr-<16 hex>`). CLN sends no webhook: payments are found by the poller and /join/status.
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { baseUrl, field, HASH, isBolt11, NodeError, nodeFetch, type NodeInvoice, type NodeStatus, type PaymentNode } from "./lightning.ts";

export interface ClnRestOptions {
  nodeUrl: string;
  rune: string;
  /** Read at each call (node_timeout_ms is reloadable). */
  timeoutMs: () => number;
}

/** The rune in `path`, trimmed; throws (at start) when the file is missing or empty. */
export function readRune(path: string): string {
  const rune = readFileSync(path, "utf8").trim();
  if (!rune) throw new Error(`pay_to_relay.rune_path ${path} is empty`);
  return rune;
}

export const uniqueLabel = (): string => `bunstr-${randomBytes(8).toString("hex")}`;

export class ClnRest implements PaymentNode {
  readonly name = "ClnRest";
  private readonly base: string;

  constructor(private readonly opts: ClnRestOptions) {
    this.base = baseUrl(opts.nodeUrl);
  }

  private post(call: "create" | "check", method: string, body: unknown) {
    return nodeFetch(
      call,
      `${this.base}/v1/${method}`,
      { method: "POST", headers: { Rune: this.opts.rune, "Content-Type": "application/json" }, body: JSON.stringify(body) },
      this.opts.timeoutMs(),
    );
  }

  async create(amountSats: number, memo: string, _webhookUrl: string | undefined, expiryS: number): Promise<NodeInvoice> {
    const reply = await this.post("create", "invoice", {
      amount_msat: amountSats * 1000,
      label: uniqueLabel(),
      description: memo,
      expiry: expiryS,
    });
    if (reply.status !== 200 && reply.status !== 201) throw new NodeError("create", `HTTP ${reply.status}${detail(reply.body)}`);
    const hash = field(reply.body, "payment_hash");
    const bolt11 = field(reply.body, "bolt11");
    if (typeof hash !== "string" || !HASH.test(hash) || !isBolt11(bolt11))
      throw new NodeError("create", "the answer has no payment_hash or bolt11");
    return { bolt11, payment_hash: hash };
  }

  async check(hash: string): Promise<NodeStatus> {
    if (!HASH.test(hash)) return { state: "unknown" };
    const reply = await this.post("check", "listinvoices", { payment_hash: hash });
    if (reply.status !== 200 && reply.status !== 201) throw new NodeError("check", `HTTP ${reply.status}${detail(reply.body)}`);
    const invoices = field(reply.body, "invoices");
    if (!Array.isArray(invoices)) throw new NodeError("check", "the answer has no invoices list");
    // Only the invoice asked about: a node (or proxy) that ignored the filter must not lend another invoice's "paid".
    const inv = invoices.find((i) => field(i, "payment_hash") === hash);
    if (inv === undefined) return { state: "unknown" };
    const status = field(inv, "status");
    if (status !== "paid" && status !== "unpaid" && status !== "expired") throw new NodeError("check", "an invoice with no known status");
    const msat = msatOf(field(inv, "amount_received_msat"));
    return status === "paid" && msat !== undefined ? { state: "paid", receivedSats: Math.floor(msat / 1000) } : { state: status };
  }
}

/** An msat amount: a number, or a string like "1000msat" (older CLN). */
function msatOf(v: unknown): number | undefined {
  if (typeof v === "number" && v >= 0) return v;
  if (typeof v === "string" && /^\d+(msat)?$/.test(v)) return Number.parseInt(v, 10);
  return undefined;
}

/** CLN's error `code`/`message`, short, for the log line (900: a duplicate label). */
function detail(body: unknown): string {
  const code = field(body, "code");
  const message = field(body, "message");
  return typeof message === "string" ? `: ${typeof code === "number" ? `${code} ` : ""}${message.slice(0, 120)}` : "";
}
