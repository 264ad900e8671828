// NIP-86 over HTTP: POST on the relay URL with Content-Type application/nostr+json+rpc,
// authorized by a NIP-98 token of an [admin] pubkey. The order: body (bounded) -> token shape ->
// NIP-98 checks (kind, time, u, method, payload hash) -> id -> signature -> admin? -> not a
// replay -> call -> log. Any failure of authorization is 401 with WWW-Authenticate: Nostr.
import { isAccessCall, isGroupCall, parseAdminCall, RPC_CONTENT_TYPE } from "../nips/nip86.ts";
import { checkHttpAuth, parseAuthorization, relayUrlForms } from "../nips/nip98.ts";
import { AdminError, type AdminState } from "../admin/state.ts";
import type { Config } from "../config/schema.ts";
import type { LogLimiter } from "../log.ts";
import { hasValidId, nowSeconds } from "../protocol/event.ts";
import type { Store } from "../store/types.ts";
import type { Verifier } from "../verify/pool.ts";
import { accessCall, type AccessAdminSource } from "./admin-access.ts";
import { groupCall, type GroupAdminSource } from "./admin-groups.ts";

/** What the admin API reads and changes of the relay (RelayContext has it). */
export interface AdminApiSource extends GroupAdminSource, AccessAdminSource {
  readonly config: Config;
  readonly store: Store;
  readonly authVerifier: Verifier;
  readonly admin: AdminState;
  /**
   * Lines a client can cause without end: a refused call of a valid token from a pubkey that is
   * not an admin (anyone can sign one and send it in a loop; a line each was 8 MB in 15 s) is
   * logged at most once a minute, with how many were held back.
   */
  readonly clientLines: LogLimiter;
}

/** Admin calls are small; a larger body is refused before it is read further. */
const MAX_BODY = 64 * 1024;

// No Access-Control-Allow-Origin: the admin page calls from the relay's own origin, scripts and
// native clients need no CORS, and a page on another origin must not drive the API through an
// admin's browser signer (routes.ts's preflight does not allow these calls either).
const json = (body: unknown, status = 200, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "Content-Type": RPC_CONTENT_TYPE, ...headers } });

const unauthorized = (why: string) => json({ error: `unauthorized: ${why}` }, 401, { "WWW-Authenticate": "Nostr" });

export const isAdminRequest = (req: Request): boolean =>
  req.method === "POST" && (req.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase() === RPC_CONTENT_TYPE;

/**
 * The URLs a token's `u` may name: the configured public URL (info.relay_url) in its ws and
 * http spellings; without one, this request's URL by its Host header, over http or https (a TLS
 * proxy in front), in both spellings too.
 */
function acceptedUrls(ctx: AdminApiSource, url: URL): string[] {
  if (ctx.config.info.relay_url) {
    const configured = new URL(ctx.config.info.relay_url);
    return relayUrlForms(`${configured.protocol}//${configured.host}${configured.pathname}${url.search}`);
  }
  const tail = `//${url.host}${url.pathname}${url.search}`;
  return [...relayUrlForms(`http:${tail}`), ...relayUrlForms(`https:${tail}`)];
}

/** The body, read no further than `max` bytes (a chunked upload has no Content-Length to refuse by); undefined past it. */
export async function readBody(req: Request, max = MAX_BODY): Promise<Uint8Array | undefined> {
  if (Number(req.headers.get("content-length") ?? 0) > max) return undefined;
  if (!req.body) return new Uint8Array(0);
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of req.body) {
    size += chunk.byteLength;
    if (size > max) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

export async function handleAdminRequest(req: Request, ctx: AdminApiSource): Promise<Response> {
  const url = new URL(req.url);
  const body = await readBody(req);
  if (!body) return json({ error: `request body is larger than ${MAX_BODY} bytes` }, 413);
  const token = parseAuthorization(req.headers.get("authorization"));
  if (typeof token === "string") return unauthorized(token);
  const now = nowSeconds();
  const window = ctx.config.admin.auth_window_seconds;
  const payload = new Bun.CryptoHasher("sha256").update(body).digest("hex");
  const wrong = checkHttpAuth(token, { method: req.method, urls: acceptedUrls(ctx, url), now, windowSeconds: window, payload });
  if (wrong) return unauthorized(wrong);
  if (!hasValidId(token)) return unauthorized("auth event id does not match the event");
  if (!(await ctx.authVerifier.verify(token))) return unauthorized("auth event signature is invalid");
  if (!ctx.config.admin.pubkeys.includes(token.pubkey)) {
    const held = ctx.clientLines.take("admin: not an admin");
    if (held)
      console.warn(
        `admin: refused ${token.pubkey}: not in [admin] pubkeys${held.count > 0 ? `; ${held.count} more such refusals not logged` : ""}; ` +
          `more are counted and logged at most every ${ctx.clientLines.intervalMs / 1000} s`,
      );
    // No admin at all is no secret (NIP-11 lists 86 only with one); the /admin page tells the operator apart.
    return unauthorized(
      ctx.config.admin.pubkeys.length === 0
        ? "this relay has no admin: [admin] pubkeys is empty"
        : "this pubkey is not an admin of this relay",
    );
  }
  // Once only: the id is kept until the token could no longer pass the time check anyway.
  if (!(await ctx.store.admin.useToken(token.id, token.created_at + window, now))) return unauthorized("this auth event was already used");

  const call = parseAdminCall(new TextDecoder().decode(body));
  if ("error" in call) return logged(ctx, token.pubkey, "?", [], json({ error: call.error }, 400), call.error);
  const params = Object.fromEntries(Object.entries(call).filter(([k]) => k !== "method"));
  try {
    const result = isGroupCall(call)
      ? await groupCall(ctx, call)
      : isAccessCall(call)
        ? await accessCall(ctx, call, token.pubkey)
        : await ctx.admin.apply(call);
    return logged(ctx, token.pubkey, call.method, params, json({ result }), "ok");
  } catch (err) {
    if (!(err instanceof AdminError)) console.error(`admin ${call.method} failed:`, err);
    const error = err instanceof AdminError ? err.message : `${call.method} failed`;
    return logged(ctx, token.pubkey, call.method, params, json({ error }, err instanceof AdminError ? 400 : 500), error);
  }
}

/** Each call is logged (stdout and the admin_log table) with who, what and how it ended. */
async function logged(
  ctx: AdminApiSource,
  pubkey: string,
  method: string,
  params: unknown,
  res: Response,
  result: string,
): Promise<Response> {
  const p = JSON.stringify(params);
  console.log(`admin: ${pubkey} ${method} ${p} -> ${result}`);
  try {
    await ctx.store.admin.log({ at: nowSeconds(), pubkey, method, params: p, result });
  } catch (err) {
    console.error("admin log write failed:", err);
  }
  return res;
}
