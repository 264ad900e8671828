// The /join page (issue 33): the relay's name and icon, the terms, the admission cost,
// a pubkey field with NIP-07 sign-in, then the invoice as a QR code and as text, and the wait for
// the payment (pages/join/main.js asks /join/status every 2 s). Served by http/join.ts while
// [pay_to_relay] is on. Like the admin page: pages/join.html with its style and script inline,
// embedded in the binary as text, the script bundled (pages/bundle.ts; build.ts bakes it in as
// BUNSTR_JOIN_SCRIPT), both allowed by hash in the page's Content-Security-Policy.
import BASE_CSS from "./pages/base.css" with { type: "text" };
import JOIN_CSS from "./pages/join.css" with { type: "text" };
import joinHtml from "./pages/join.html" with { type: "text" };
import type { Config } from "../config/schema.ts";
import { bundleJoinScript } from "./pages/bundle.ts";
import { fill, text } from "./pages/template.ts";
import { esc, sha256 } from "./landing.ts";

declare const BUNSTR_JOIN_SCRIPT: string | undefined;

const JOIN_SCRIPT: string = typeof BUNSTR_JOIN_SCRIPT === "string" ? BUNSTR_JOIN_SCRIPT : await bundleJoinScript();
const JOIN_HTML = text(joinHtml);
const STYLE = `${BASE_CSS}${JOIN_CSS}`;

/**
 * The page's Content-Security-Policy: its own inline style and script only, fetches to this origin
 * only (the join endpoints), the relay's icon from wherever the operator put it; no framing (a
 * framed page could be dressed up to collect payments for another relay).
 */
export const JOIN_CSP = [
  "default-src 'none'",
  `style-src ${sha256(STYLE)}`,
  `script-src ${sha256(JOIN_SCRIPT)}`,
  "connect-src 'self'",
  "img-src https: http: data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

/** What the page shows, and where its script asks (http/join.ts joinPaths). */
export interface JoinPageView {
  config: Config;
  paths: { invoice: string; status: string };
  /** The ?pubkey= the page was opened with (a refusal's join link), prefilled as typed. */
  pubkey: string;
}

/** The icon as an <img>, only from an http(s) URL or an inline image; none otherwise. */
function iconTag(icon: string): string {
  if (!/^(?:https?:\/\/|data:image\/[a-z0-9.+-]+[;,])/i.test(icon)) return "";
  return `<img id="icon" src="${esc(icon)}" alt="" width="48" height="48" referrerpolicy="no-referrer">`;
}

export function joinPage(v: JoinPageView): string {
  const { info, pay_to_relay: pay } = v.config;
  const name = info.name || "this relay";
  return fill(JOIN_HTML, {
    style: STYLE,
    script: JOIN_SCRIPT,
    name: esc(name),
    icon: iconTag(info.icon),
    terms: esc(pay.terms_message),
    costSats: String(pay.admission_cost),
    cost: esc(`${pay.admission_cost.toLocaleString("en-US")} sats`),
    pubkey: esc(v.pubkey.slice(0, 200)),
    invoicePath: esc(v.paths.invoice),
    statusPath: esc(v.paths.status),
    expirySeconds: String(pay.invoice_expiry_seconds),
  });
}
