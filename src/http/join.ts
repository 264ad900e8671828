// Paid admission over HTTP (issue 33, design §10), under the relay path like /admin: the /join
// page, /join/invoice, /join/status and POST /lnbits (the node's webhook). Not found while
// [pay_to_relay] is off. This file routes and checks what every answer shares (the pubkey, bans,
// sign-ups, who is admitted already); the invoices, the node and the webhook's hint are the
// payments engine's (access/payments.ts, WP1), reached through registry.engines.payments.
import type { AdmissionRegistry } from "../access/registry.ts";
import type { Config } from "../config/schema.ts";
import { pubkeyOf } from "../nips/nip19.ts";
import { ADMISSION_TEXTS, isAdmitted } from "../policy/admission.ts";
import type { AdminView } from "../policy/rules.ts";

/** What the join routes read (RelayContext has it). */
export interface JoinSource {
  readonly config: Config;
  readonly access?: AdmissionRegistry;
  readonly admin: Pick<AdminView, "bannedPubkeys">;
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

const BAD_PUBKEY = "invalid: pubkey must be 64 hex characters or an npub";
const BANNED = "blocked: this pubkey is banned from this relay";
const NOT_RUNNING = "error: payments are not running on this relay yet";

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
      return onlyGet(req) ?? invoice(url, src, peer);
    case paths.status:
      return onlyGet(req) ?? status(url, src, peer);
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

/** The `pubkey` parameter as hex (64 hex or an npub), or the 400 answer. */
function pubkeyParam(url: URL): string | Response {
  const pk = pubkeyOf(url.searchParams.get("pubkey") ?? "");
  return pk ?? jsonAnswer({ error: BAD_PUBKEY }, 400);
}

/** GET /join: the page (WP5: http/join-page.ts), prefilled with ?pubkey=. */
function joinPage(_req: Request, _url: URL, _src: JoinSource): Response {
  return new Response("<!doctype html><title>Join</title><p>The join page is not built yet.</p>", {
    headers: { "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store" },
  });
}

/**
 * GET /join/invoice?pubkey=&amount=: 200 {invoice, payment_hash, amount_sats} or {admitted: true};
 * 400 bad pubkey, 403 banned or no sign-ups, then (WP1) 429 per address, 503 too many open, 502 node.
 */
async function invoice(url: URL, src: JoinSource, _peer: () => string): Promise<Response> {
  const pk = pubkeyParam(url);
  if (pk instanceof Response) return pk;
  if (src.admin.bannedPubkeys.has(pk)) return jsonAnswer({ error: BANNED }, 403);
  const admitted = src.access !== undefined && isAdmitted(src.config, src.access, pk);
  if (admitted && !url.searchParams.has("amount")) return jsonAnswer({ admitted: true });
  if (!admitted && !src.config.pay_to_relay.sign_ups) return jsonAnswer({ error: `restricted: ${ADMISSION_TEXTS.noSignUps}` }, 403);
  const payments = src.access?.engines.payments;
  if (!payments) return jsonAnswer({ error: NOT_RUNNING }, 503);
  // WP1: the payments engine's invoice (purpose admission, or topup with &amount= for an admitted pubkey).
  return jsonAnswer({ error: NOT_RUNNING }, 503);
}

/** GET /join/status?pubkey=: 200 {admitted}; (WP1) an open invoice is checked at the node meanwhile. */
function status(url: URL, src: JoinSource, _peer: () => string): Response {
  const pk = pubkeyParam(url);
  if (pk instanceof Response) return pk;
  return jsonAnswer({ admitted: src.access !== undefined && isAdmitted(src.config, src.access, pk) });
}

/** POST /lnbits: always 200 {} at once (a sender learns nothing), 413 past MAX_WEBHOOK_BYTES; (WP1) a hint to check the invoice. */
async function webhook(req: Request, _src: JoinSource): Promise<Response> {
  if (Number(req.headers.get("content-length") ?? 0) > MAX_WEBHOOK_BYTES) return new Response("{}", { status: 413, headers: JSON_HEADERS });
  return new Response("{}", { headers: JSON_HEADERS });
}
