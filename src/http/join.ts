// Paid admission over HTTP (issue 33), under the relay path like /admin: the /join
// page, /join/invoice, /join/status and POST /lnbits (the node's webhook). Not found while
// [pay_to_relay] is off. This file routes and checks what every answer shares (the pubkey, bans,
// the amount, the client's address group); the invoices, the node, the bounds on both and the
// webhook's hint are the payments engine's (access/payments.ts), reached through
// registry.engines.payments (docs/operations.md, Paid admission).
import type { InvoiceAnswer } from "../access/payments.ts";
import type { AdmissionRegistry } from "../access/registry.ts";
import type { Config } from "../config/schema.ts";
import { pubkeyOf } from "../nips/nip19.ts";
import { ADMISSION_TEXTS } from "../policy/admission.ts";
import { clientAddress, ipGroup } from "../policy/ip.ts";
import { readBody } from "./admin-api.ts";
import { JOIN_CSP, joinPage as joinPageHtml } from "./join-page.ts";

/** What the join routes read (RelayContext has it). */
export interface JoinSource {
  readonly config: Config;
  readonly access?: AdmissionRegistry;
}

/** The paths, under the relay path ("/" -> "/join", "/nostr" -> "/nostr/join"). */
export const joinPaths = (relayPath: string) => {
  const base = relayPath.replace(/\/+$/, "");
  return { page: `${base}/join`, invoice: `${base}/join/invoice`, status: `${base}/join/status`, webhook: `${base}/lnbits` };
};

/** The webhook's body is small (LNbits' payment JSON); larger is refused unread. */
export const MAX_WEBHOOK_BYTES = 8 * 1024;

const JSON_HEADERS = { "Content-Type": "application/json", "Cache-Control": "no-store" };
const CORS_GET = { ...JSON_HEADERS, "Access-Control-Allow-Origin": "*" };
export const jsonAnswer = (body: unknown, status = 200, headers: Record<string, string> = {}): Response =>
  new Response(JSON.stringify(body), { status, headers: { ...CORS_GET, ...headers } });

/** Exact texts of the JSON errors (docs/operations.md; test/pay.test.ts asserts them). */
export const JOIN_TEXTS = {
  badPubkey: "invalid: pubkey must be 64 hex characters or an npub",
  badAmount: "invalid: amount must be a whole number of sats from 1 to 100000000",
  banned: "blocked: this pubkey is banned from this relay",
  closed: `restricted: ${ADMISSION_TEXTS.noSignUps}`,
  noTopUp: "restricted: this pubkey pays nothing per event here, so a top-up could never be spent",
  notRunning: "error: payments are not running on this relay yet",
  full: "error: too many open invoices, try again later",
  node: "error: the payment node did not answer, try again",
  joins: (s: number) => `rate-limited: too many join attempts, try again in ${s} s`,
  checks: (s: number) => `rate-limited: too many status checks, try again in ${s} s`,
} as const;

/** The largest top-up asked for in one invoice (1 BTC). */
const MAX_TOP_UP = 100_000_000;

/**
 * The join routes, matched before the relay-path check (routes.ts): an answer for one of their
 * paths while pay is on, else undefined (the caller's 404).
 */
export function accessRoutes(req: Request, url: URL, src: JoinSource, peer: () => string): Response | Promise<Response> | undefined {
  if (!src.config.pay_to_relay.enabled) return undefined;
  const paths = joinPaths(src.config.network.path);
  switch (url.pathname) {
    case paths.page:
      return onlyGet(req) ?? joinPage(req, url, src);
    case paths.invoice:
      return onlyGet(req) ?? invoice(url, src, group(req, src, peer));
    case paths.status:
      return onlyGet(req) ?? status(url, src, group(req, src, peer));
    case paths.webhook:
      return req.method === "POST" ? webhook(req, src) : new Response("method not allowed", { status: 405, headers: { Allow: "POST" } });
    default:
      return undefined;
  }
}

const onlyGet = (req: Request): Response | undefined =>
  req.method === "GET" || req.method === "HEAD"
    ? undefined
    : new Response("method not allowed", { status: 405, headers: { Allow: "GET, HEAD" } });

/** The asker's address group (policy/ip.ts), behind a trusted proxy the address it names: what the join bounds count by. */
const group = (req: Request, src: JoinSource, peer: () => string): string =>
  ipGroup(clientAddress(peer(), req.headers, src.config.network));

/** The `pubkey` parameter as hex (64 hex or an npub), or the 400 answer. */
function pubkeyParam(url: URL): string | Response {
  const pk = pubkeyOf(url.searchParams.get("pubkey") ?? "");
  return pk ?? jsonAnswer({ error: JOIN_TEXTS.badPubkey }, 400);
}

/** GET /join: the page (http/join-page.ts), prefilled with ?pubkey=. */
function joinPage(_req: Request, url: URL, src: JoinSource): Response {
  const paths = joinPaths(src.config.network.path);
  const html = joinPageHtml({ config: src.config, paths, pubkey: url.searchParams.get("pubkey") ?? "" });
  return new Response(html, {
    headers: {
      "Content-Type": "text/html; charset=utf-8",
      "Cache-Control": "no-store",
      "X-Frame-Options": "DENY",
      "Referrer-Policy": "no-referrer",
      "Content-Security-Policy": JOIN_CSP,
    },
  });
}

/**
 * GET /join/invoice?pubkey=&amount=: 200 {invoice, payment_hash, amount_sats} or {admitted: true}
 * (admitted by payment or the config allow list only: no other basis is told to anyone who asks);
 * 400 bad pubkey or amount, 403 banned, no sign-ups, or a top-up for a pubkey not charged per
 * event; 429 join attempts of the address group (its /48, everyone's); 503 too many open
 * invoices, 502 the node did not answer. `amount` (sats) with an admitted pubkey is a top-up;
 * without, admission at admission_cost.
 */
async function invoice(url: URL, src: JoinSource, from: string): Promise<Response> {
  const pk = pubkeyParam(url);
  if (pk instanceof Response) return pk;
  const amountParam = url.searchParams.get("amount");
  const amount = amountParam === null ? undefined : /^\d{1,9}$/.test(amountParam) ? Number(amountParam) : 0;
  if (amount !== undefined && (amount < 1 || amount > MAX_TOP_UP)) return jsonAnswer({ error: JOIN_TEXTS.badAmount }, 400);
  // The registry's ban (NIP-86 banpubkey, pubkey_denylist): the rule writers hear, in one place.
  if (src.access?.banned(pk)) return jsonAnswer({ error: JOIN_TEXTS.banned }, 403);
  const payments = src.access?.engines.payments;
  if (!payments) return jsonAnswer({ error: JOIN_TEXTS.notRunning }, 503);
  return invoiceAnswer(await payments.invoiceFor(pk, from, amount));
}

/** Each answer of Payments.invoiceFor as its status and body (exactly these keys). */
function invoiceAnswer(a: InvoiceAnswer): Response {
  switch (a.kind) {
    case "admitted":
      return jsonAnswer({ admitted: true });
    case "invoice":
      return jsonAnswer({ invoice: a.invoice, payment_hash: a.payment_hash, amount_sats: a.amount_sats });
    case "closed":
      return jsonAnswer({ error: JOIN_TEXTS.closed }, 403);
    case "no-top-up":
      return jsonAnswer({ error: JOIN_TEXTS.noTopUp }, 403);
    case "limited":
      return jsonAnswer({ error: JOIN_TEXTS.joins(a.retryAfterS) }, 429, { "Retry-After": String(a.retryAfterS) });
    case "full":
      return jsonAnswer({ error: JOIN_TEXTS.full }, 503);
    case "node-error":
      return jsonAnswer({ error: JOIN_TEXTS.node }, 502);
  }
}

/**
 * GET /join/status?pubkey=: 200 {admitted} (by payment or the config allow list); while not, its open invoice is checked at the node
 * (coalesced per invoice), so the page turns "paid" without a webhook. 60 a minute per address group.
 */
async function status(url: URL, src: JoinSource, from: string): Promise<Response> {
  const pk = pubkeyParam(url);
  if (pk instanceof Response) return pk;
  const payments = src.access?.engines.payments;
  if (!payments) return jsonAnswer({ error: JOIN_TEXTS.notRunning }, 503);
  const wait = payments.statusWait(from);
  if (wait > 0) return jsonAnswer({ error: JOIN_TEXTS.checks(wait) }, 429, { "Retry-After": String(wait) });
  return jsonAnswer({ admitted: await payments.status(pk) });
}

/**
 * POST /lnbits: 200 {} at once whatever the body says (a sender learns nothing), 413 past
 * MAX_WEBHOOK_BYTES. The body is a hint: payments asks the node about the invoice it names.
 */
async function webhook(req: Request, src: JoinSource): Promise<Response> {
  // A body that breaks off is an empty hint (200 {} all the same).
  const body = await readBody(req, MAX_WEBHOOK_BYTES).catch(() => new Uint8Array(0));
  if (body === undefined) return new Response("{}", { status: 413, headers: JSON_HEADERS });
  src.access?.engines.payments?.webhook(new TextDecoder().decode(body));
  return new Response("{}", { headers: JSON_HEADERS });
}
