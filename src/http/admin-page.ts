// The /admin page: a form over NIP-86. The browser's NIP-07 extension signs each call (a NIP-98
// kind-27235 event with u, method and payload tags); the relay path answers it (admin-api.ts).
// The page is pages/admin.html with its style and script inline, embedded in the binary as
// text; no inline event handlers, so a strict script CSP would only need this one script's hash.
import ADMIN_CSS from "./pages/admin.css" with { type: "text" };
import adminHtml from "./pages/admin.html" with { type: "text" };
import ADMIN_SCRIPT from "./pages/admin.js" with { type: "text" };
import BASE_CSS from "./pages/base.css" with { type: "text" };
import { fill, text } from "./pages/template.ts";
import { esc } from "./landing.ts";

/** A JSON literal safe inside <script>: no "</script>", no "<!--". */
const scriptLiteral = (v: unknown): string => JSON.stringify(v).replace(/</g, "\\u003c");

const ADMIN_HTML = text(adminHtml);
const STYLE = `${BASE_CSS}${ADMIN_CSS}`;

export function adminPage(relayPath: string): string {
  return fill(ADMIN_HTML, { style: STYLE, relayPath: esc(relayPath), relayPathJson: scriptLiteral(relayPath), script: ADMIN_SCRIPT });
}
