// Issue 33, paid admission over HTTP, under the relay path like /admin: `GET /join` (the page),
// `GET /join/invoice` and `GET /join/status` (JSON, for the page and for clients that automate
// joining), and `POST /lnbits` (LNbits' webhook: a hint, answered 200 {} whatever it says). 404
// while pay is off. The decisions are access/payments.ts's; this file reads the request, bounds
// what one address can ask, and writes the answers (docs/operations.md, Paid admission).
import type { PaymentsEngine } from "../access/registry.ts";
import type { InvoiceAnswer } from "../access/payments.ts";
import { MAX_WEBHOOK_BYTES } from "../access/payments.ts";
import { setOf, type Config } from "../config/schema.ts";
import { pubkeyOf } from "../nips/nip19.ts";
import { clientAddress, ipGroup } from "../policy/ip.ts";
import { RateLimiter } from "../policy/rate-limit.ts";

/** What the join routes read of the relay. */
export interface JoinSource {
  readonly config: Config;
  readonly admin: { readonly bannedPubkeys: ReadonlyMap<string, unknown> };
  readonly access?: { readonly engines: { readonly payments?: PaymentsEngine } };
}

/** The /join page; WP5's page replaces the plain one below (http/join-page.ts). */
export type JoinPage = (req: Request, src: JoinSource) => Response | Promise<Response>;

/** Exact texts (docs/operations.md; test/pay.test.ts asserts them). */
export const JOIN_TEXTS = {
  badPubkey: "invalid: pubkey must be 64 hex characters or an npub",
  badAmount: "invalid: amount must be a whole number of sats from 1 to 100000000",
  closed: "restricted: this relay is not taking new sign-ups",
  banned: "blocked: this pubkey is banned from this relay",
  full: "error: too many open invoices, try again later",
  node: "error: the payment node did not answer, try again",
  joins: (s: number) => `rate-limited: too many join attempts, try again in ${s} s`,
  checks: (s: number) => `rate-limited: too many status checks, try again in ${s} s`,
} as const;

/** /join/status asks per address group and minute (each may start a node check, coalesced per invoice). */
export const STATUS_PER_MINUTE = 60;
const MAX_TOP_UP = 100_000_000;

const JSON_HEADERS = { "Content-Type": "application/json", "Cache-Control": "no-store" };
const CORS = {
  "Access-Control-Allow-Origin": "*",
  "Access-Control-Allow-Methods": "GET, OPTIONS",
  "Access-Control-Allow-Headers": "Accept",
};

const json = (status: number, body: unknown, headers: Record<string, string> = {}): Response =>
  new Response(JSON.stringify(body), { status, headers: { ...JSON_HEADERS, ...headers } });

/** The join paths under the relay path ("/" -> "/join", "/nostr" -> "/nostr/join"). */
export const joinPaths = (relayPath: string) => {
  const base = relayPath.replace(/\/+$/, "");
  return { page: `${base}/join`, invoice: `${base}/join/invoice`, status: `${base}/join/status`, webhook: `${base}/lnbits` };
};

/**
 * The routes of paid admission: a Response for its paths, undefined for any other path. `page`
 * answers GET /join (WP5's page; a plain one until then).
 */
export function accessRoutes(
  src: JoinSource,
  page: JoinPage = plainPage,
): (req: Request, url: URL, peer: () => string) => Response | Promise<Response> | undefined {
  const paths = joinPaths(src.config.network.path);
  const statusChecks = new RateLimiter({ maxKeys: 10_000 });
  return (req, url, peer) => {
    const p = url.pathname;
    if (p !== paths.page && p !== paths.invoice && p !== paths.status && p !== paths.webhook) return undefined;
    const payments = src.config.pay_to_relay.enabled ? src.access?.engines.payments : undefined;
    if (!payments) return new Response("not found", { status: 404 });
    if (p === paths.webhook) return webhook(req, payments);
    if (req.method === "OPTIONS") return new Response(null, { status: 204, headers: CORS });
    if (req.method !== "GET" && req.method !== "HEAD")
      return new Response("method not allowed", { status: 405, headers: { Allow: "GET, HEAD, OPTIONS" } });
    if (p === paths.page) return page(req, src);
    const group = ipGroup(clientAddress(peer(), req.headers, src.config.network));
    if (p === paths.invoice) return invoice(url, src, payments, group);
    const wait = statusChecks.take([{ key: group, rate: { perMinute: STATUS_PER_MINUTE, burst: STATUS_PER_MINUTE } }]);
    if (wait > 0) {
      const s = Math.ceil(wait / 1000);
      return json(429, { error: JOIN_TEXTS.checks(s) }, { ...CORS, "Retry-After": String(s) });
    }
    return status(url, payments);
  };
}

async function invoice(url: URL, src: JoinSource, payments: PaymentsEngine, group: string): Promise<Response> {
  const pubkey = pubkeyOf(url.searchParams.get("pubkey") ?? "");
  if (!pubkey) return json(400, { error: JOIN_TEXTS.badPubkey }, CORS);
  const amountParam = url.searchParams.get("amount");
  let amount: number | undefined;
  if (amountParam !== null) {
    amount = /^\d{1,9}$/.test(amountParam) ? Number(amountParam) : 0;
    if (amount < 1 || amount > MAX_TOP_UP) return json(400, { error: JOIN_TEXTS.badAmount }, CORS);
  }
  if (src.admin.bannedPubkeys.has(pubkey) || setOf(src.config.authorization.pubkey_denylist).has(pubkey))
    return json(403, { error: JOIN_TEXTS.banned }, CORS);
  return invoiceResponse(await payments.invoiceFor(pubkey, group, amount));
}

/** Each answer of Payments.invoiceFor as the design's status and body (exactly these keys). */
function invoiceResponse(a: InvoiceAnswer): Response {
  switch (a.kind) {
    case "admitted":
      return json(200, { admitted: true }, CORS);
    case "invoice":
      return json(200, { invoice: a.invoice, payment_hash: a.payment_hash, amount_sats: a.amount_sats }, CORS);
    case "closed":
      return json(403, { error: JOIN_TEXTS.closed }, CORS);
    case "limited":
      return json(429, { error: JOIN_TEXTS.joins(a.retryAfterS) }, { ...CORS, "Retry-After": String(a.retryAfterS) });
    case "full":
      return json(503, { error: JOIN_TEXTS.full }, CORS);
    case "node-error":
      return json(502, { error: JOIN_TEXTS.node }, CORS);
  }
}

async function status(url: URL, payments: PaymentsEngine): Promise<Response> {
  const pubkey = pubkeyOf(url.searchParams.get("pubkey") ?? "");
  if (!pubkey) return json(400, { error: JOIN_TEXTS.badPubkey }, CORS);
  return json(200, { admitted: await payments.status(pubkey) }, CORS);
}

/**
 * POST /lnbits: 200 {} for anything (a sender learns nothing), 413 past 8 KiB. The body goes to
 * payments as a hint; the answer does not wait for the node.
 */
async function webhook(req: Request, payments: PaymentsEngine): Promise<Response> {
  if (req.method !== "POST") return new Response("method not allowed", { status: 405, headers: { Allow: "POST" } });
  if (Number(req.headers.get("content-length") ?? 0) > MAX_WEBHOOK_BYTES) return json(413, { error: "invalid: body too large" });
  const body = await readCapped(req);
  if (body === undefined) return json(413, { error: "invalid: body too large" });
  payments.webhook(body);
  return json(200, {});
}

/** The body as text, or undefined past MAX_WEBHOOK_BYTES (not read further). */
async function readCapped(req: Request): Promise<string | undefined> {
  if (!req.body) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for await (const chunk of req.body as unknown as AsyncIterable<Uint8Array>) {
      size += chunk.byteLength;
      if (size > MAX_WEBHOOK_BYTES) return undefined;
      chunks.push(chunk);
    }
  } catch {
    return "";
  }
  return new TextDecoder().decode(Buffer.concat(chunks));
}

/** Until WP5's page: the terms, the cost and where the JSON is, as plain HTML with no script. */
function plainPage(_req: Request, src: JoinSource): Response {
  const pay = src.config.pay_to_relay;
  const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  const html = `<!doctype html><meta charset="utf-8"><title>Join ${esc(src.config.info.name)}</title>
<h1>Join ${esc(src.config.info.name)}</h1><p>${esc(pay.terms_message)}</p>
<p>Admission: ${pay.admission_cost} sats${pay.cost_per_event > 0 ? `, then ${pay.cost_per_event} sats per event` : ""}.</p>
<p>GET <code>join/invoice?pubkey=&lt;hex or npub&gt;</code> with <code>Accept: application/json</code> for an invoice; <code>join/status?pubkey=…</code> says when it is paid.</p>`;
  return new Response(html, {
    headers: { "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store", "Content-Security-Policy": "default-src 'none'" },
  });
}
