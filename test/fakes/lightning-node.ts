// What the fake Lightning nodes (lnbits.ts, clnrest.ts) share: a real HTTP server on 127.0.0.1:0,
// the invoices it made, the fault modes a test switches (down, slow, garbage, 500) and the call
// counters the bounds are asserted with. Tests drive the relay against these, never a mock inside
// the relay's process.
import { randomBytes } from "node:crypto";

export type NodeMode = "ok" | "down" | "slow" | "garbage" | "500";

export interface FakeInvoice {
  hash: string;
  bolt11: string;
  amountSats: number;
  memo: string;
  /** Where the node would post its webhook (LNbits only). */
  webhook?: string;
  label?: string;
  createdAt: number;
  /** Seconds after createdAt. */
  expiry: number;
  paid: boolean;
  expired: boolean;
  /** What the payer actually sent (a short payment is a test case); defaults to amountSats. */
  receivedSats?: number;
}

/** One request the fake answered, in order (what a test can assert on besides the counters). */
export interface NodeCall {
  kind: "create" | "check" | "other";
  at: number;
}

export interface FakeNodeBase {
  readonly url: string;
  readonly port: number;
  mode: NodeMode;
  /** How long "slow" waits before answering (beyond the relay's node_timeout_ms). */
  delayMs: number;
  readonly calls: { create: number; check: number; unauthorized: number };
  /** Checks per payment hash (a test tells the webhook's check from others). */
  readonly checksOf: Map<string, number>;
  readonly log: NodeCall[];
  readonly invoices: Map<string, FakeInvoice>;
  markPaid(hash: string, receivedSats?: number): void;
  expire(hash: string): void;
  /** The newest invoice (what a test usually wants to pay). */
  last(): FakeInvoice | undefined;
  close(): Promise<void>;
}

export const randomHex = (bytes: number): string => randomBytes(bytes).toString("hex");

/** An opaque fake payment request: `lnbcrt<sats>…`, unique per invoice. */
export const fakeBolt11 = (sats: number): string => `lnbcrt${sats}n1p${randomHex(40)}`;

export const json = (body: unknown, status = 200): Response =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });

/**
 * Starts the server; `route` answers requests in mode "ok" (the modes wrap it). "down" closes the
 * listener (connections refused) and listens again on the same port when the mode changes back.
 */
export function startFakeNode(
  route: (req: Request, url: URL, node: FakeNodeBase) => Promise<Response> | Response,
  classify: (req: Request, url: URL) => NodeCall["kind"],
): FakeNodeBase {
  let mode: NodeMode = "ok";
  const slowTimers = new Set<ReturnType<typeof setTimeout>>();
  const handler = async (req: Request): Promise<Response> => {
    const url = new URL(req.url);
    const kind = classify(req, url);
    if (kind !== "other") node.calls[kind]++;
    if (kind === "check") {
      const body = (await req
        .clone()
        .json()
        .catch(() => ({}))) as { payment_hash?: unknown };
      const hash = /[0-9a-f]{64}/.exec(url.pathname)?.[0] ?? body.payment_hash;
      if (typeof hash === "string") node.checksOf.set(hash, (node.checksOf.get(hash) ?? 0) + 1);
    }
    node.log.push({ kind, at: Date.now() });
    if (mode === "500") return json({ detail: "internal error" }, 500);
    if (mode === "garbage") return new Response("<html>502 Bad Gateway</html>{", { status: 200 });
    if (mode === "slow") {
      await new Promise<void>((r) => {
        const t = setTimeout(() => {
          slowTimers.delete(t);
          r();
        }, node.delayMs);
        slowTimers.add(t);
      });
    }
    return route(req, url, node);
  };
  let server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: handler });
  const port = server.port!;
  const node: FakeNodeBase = {
    url: `http://127.0.0.1:${port}`,
    port,
    get mode() {
      return mode;
    },
    set mode(m: NodeMode) {
      if (m === "down" && mode !== "down") server.stop(true);
      if (m !== "down" && mode === "down") server = Bun.serve({ hostname: "127.0.0.1", port, fetch: handler });
      mode = m;
    },
    delayMs: 30_000,
    calls: { create: 0, check: 0, unauthorized: 0 },
    checksOf: new Map(),
    log: [],
    invoices: new Map(),
    markPaid(hash, receivedSats) {
      const inv = node.invoices.get(hash);
      if (!inv) throw new Error(`fake node: no invoice ${hash}`);
      inv.paid = true;
      inv.receivedSats = receivedSats ?? inv.amountSats;
    },
    expire(hash) {
      const inv = node.invoices.get(hash);
      if (!inv) throw new Error(`fake node: no invoice ${hash}`);
      inv.expired = true;
    },
    last() {
      let newest: FakeInvoice | undefined;
      for (const inv of node.invoices.values()) newest = inv;
      return newest;
    },
    async close() {
      for (const t of slowTimers) clearTimeout(t);
      if (mode !== "down") await server.stop(true);
    },
  };
  return node;
}

/** Whether an invoice has expired by the clock or by the test's switch. */
export const isExpired = (inv: FakeInvoice, now = Date.now() / 1000): boolean =>
  !inv.paid && (inv.expired || now > inv.createdAt + inv.expiry);
