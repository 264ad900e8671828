// The /admin page, a moderation console over NIP-86. The browser's NIP-07 extension signs each call
// (a NIP-98 kind-27235 event with u, method and payload tags); the relay path answers it
// (admin-api.ts). The page reads events and profiles from the relay's own websocket.
// The page is pages/admin.html with its style and script inline, embedded in the binary as text;
// its Content-Security-Policy allows that style and script by hash and nothing else inline. The
// script is pages/admin/'s modules bundled (pages/bundle.ts): build.ts bakes the bundle into the
// binary (BUNSTR_ADMIN_SCRIPT); from source it is bundled here, once, as the module loads.
import ADMIN_CSS from "./pages/admin.css" with { type: "text" };
import adminHtml from "./pages/admin.html" with { type: "text" };
import BASE_CSS from "./pages/base.css" with { type: "text" };
import { bundleAdminScript } from "./pages/bundle.ts";
import { fill, text } from "./pages/template.ts";
import { esc, sha256 } from "./landing.ts";

declare const BUNSTR_ADMIN_SCRIPT: string | undefined;

const ADMIN_SCRIPT: string = typeof BUNSTR_ADMIN_SCRIPT === "string" ? BUNSTR_ADMIN_SCRIPT : await bundleAdminScript();
const ADMIN_HTML = text(adminHtml);
const STYLE = `${BASE_CSS}${ADMIN_CSS}`;

/** A Host header fit to name in a CSP source: a name or address with an optional port, nothing else. */
const HOST = /^(?:[a-z0-9.-]+|\[[0-9a-f:.]+\])(?::\d{1,5})?$/i;

/**
 * The admin page's Content-Security-Policy: its own inline style and script only; fetches (NIP-86,
 * NIP-11) and the websocket to this origin only ('self' covers ws: and wss: of the same host in
 * current browsers, CSP Level 3; the host's ws:/wss: origins are named too, for browsers before
 * that); pictures from profiles over https:, http: and data:; no framing (the page drives a signer).
 */
export function adminCsp(host: string | null): string {
  const sockets = host && HOST.test(host) ? ` ws://${host} wss://${host}` : "";
  return [
    "default-src 'none'",
    `style-src ${sha256(STYLE)}`,
    `script-src ${sha256(ADMIN_SCRIPT)}`,
    `connect-src 'self'${sockets}`,
    "img-src https: http: data:",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join("; ");
}

export function adminPage(relayPath: string): string {
  return fill(ADMIN_HTML, { style: STYLE, relayPath: esc(relayPath), script: ADMIN_SCRIPT });
}
