// The payment node as the relay sees it: make an invoice, ask whether one is paid. Two clients
// implement it (lnbits.ts, clnrest.ts). Every call is bounded the same way here: a timeout over
// headers and body, a 64 KiB cap on what is read, the JSON's shape checked by the client; anything
// else is a NodeError, counted and logged at most once a minute (a node that is down would
// otherwise write a line per poll and per join attempt).
import { log, LogLimiter } from "../log.ts";
import { readCapped } from "./capped.ts";

/** What the node says of an invoice. "unknown": it has no such invoice. */
export type InvoiceState = "paid" | "unpaid" | "expired" | "unknown";

export interface NodeInvoice {
  bolt11: string;
  payment_hash: string;
}

export interface NodeStatus {
  state: InvoiceState;
  /** What was received, when the node says (a short payment admits nobody). */
  receivedSats?: number;
}

export interface PaymentNode {
  /** "LNBits" or "ClnRest", for log lines. */
  readonly name: string;
  create(amountSats: number, memo: string, webhookUrl: string | undefined, expiryS: number): Promise<NodeInvoice>;
  check(hash: string): Promise<NodeStatus>;
}

export type NodeCallName = "create" | "check";

/** A node call that did not give a usable answer: unreachable, timed out, too big, not the expected JSON. */
export class NodeError extends Error {
  constructor(
    readonly call: NodeCallName,
    message: string,
  ) {
    super(message);
  }
}

/** The most of a node's answer that is read: invoices and statuses are a few hundred bytes. */
export const MAX_NODE_BODY = 64 * 1024;

export const HASH = /^[0-9a-f]{64}$/;

export interface NodeReply {
  status: number;
  body: unknown;
}

/**
 * One HTTP call to the node: `timeoutMs` bounds connecting, headers and body; redirects are not
 * followed (a node does not move); the body is read up to MAX_NODE_BODY and parsed as JSON.
 */
export async function nodeFetch(call: NodeCallName, url: string, init: RequestInit, timeoutMs: number): Promise<NodeReply> {
  let res: Response;
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    res = await fetch(url, { ...init, signal, redirect: "manual" });
  } catch (err) {
    throw new NodeError(call, signal.aborted ? `no answer in ${timeoutMs} ms` : `unreachable (${errorText(err)})`);
  }
  let text: string;
  try {
    const read = await readCapped(res, MAX_NODE_BODY);
    if (read === undefined) throw new Error(`answer larger than ${MAX_NODE_BODY / 1024} KiB`);
    text = read;
  } catch (err) {
    throw new NodeError(call, signal.aborted ? `no complete answer in ${timeoutMs} ms` : errorText(err));
  }
  if (res.status >= 300 && res.status < 400) throw new NodeError(call, `redirected (HTTP ${res.status}), not followed`);
  try {
    return { status: res.status, body: JSON.parse(text) };
  } catch {
    throw new NodeError(call, `HTTP ${res.status} with a body that is not JSON`);
  }
}

const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** A plain object's field, or undefined. */
export const field = (o: unknown, key: string): unknown =>
  o !== null && typeof o === "object" && !Array.isArray(o) ? (o as Record<string, unknown>)[key] : undefined;

/** A bolt11 payment request as a node gives it (`lnbc…`, `lntb…`, `lnbcrt…`); nothing else is shown to a payer. */
export const isBolt11 = (s: unknown): s is string => typeof s === "string" && /^ln[a-z0-9]{4,2000}$/i.test(s);

/** The node's base URL without its trailing slashes. */
export const baseUrl = (nodeUrl: string): string => nodeUrl.replace(/\/+$/, "");

/**
 * The node's faults, counted per call and logged at most once a minute per call (with how many
 * were held back), so a node that is down costs a few lines an hour.
 */
export class NodeFaults {
  readonly counts: Record<NodeCallName, number> = { create: 0, check: 0 };
  private readonly lines: LogLimiter;

  constructor(
    private readonly nodeName: string,
    private readonly onFault?: (call: NodeCallName) => void,
    intervalMs?: number,
  ) {
    this.lines = new LogLimiter(intervalMs);
  }

  record(call: NodeCallName, err: unknown): void {
    this.counts[call]++;
    this.onFault?.(call);
    const held = this.lines.take(call);
    if (!held) return;
    const more = held.count > 0 ? ` (${held.count} more since the last line)` : "";
    log.warn(`payments: ${this.nodeName} ${call} failed: ${errorText(err)}${more}`);
  }
}
