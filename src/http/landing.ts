// The page a browser gets on the relay URL: name, description, URL to copy, live numbers, the
// supported NIPs and the policies in force. Everything from config or the store is escaped.
// The page is pages/status.html with its style and script inline, embedded in the binary as text;
// the script is pages/status/ bundled (pages/bundle.ts; build.ts bakes it in as BUNSTR_STATUS_SCRIPT).
import BASE_CSS from "./pages/base.css" with { type: "text" };
import STATUS_CSS from "./pages/status.css" with { type: "text" };
import statusHtml from "./pages/status.html" with { type: "text" };
import { createHash } from "node:crypto";
import { bundleStatusScript } from "./pages/bundle.ts";
import { fill, text } from "./pages/template.ts";
import type { PolicyRow } from "./status.ts";

export const esc = (s: string): string => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

interface LandingView {
  info: Record<string, unknown>;
  wsUrl: string;
  uptime: string;
  /** undefined when the store could not say. */
  eventsStored: number | undefined;
  connections: number;
  policies: PolicyRow[];
  /** Where the page's script reads its live numbers (routes.ts statusJsonPath). */
  statusJson: string;
}

declare const BUNSTR_STATUS_SCRIPT: string | undefined;

const STATUS_SCRIPT: string = typeof BUNSTR_STATUS_SCRIPT === "string" ? BUNSTR_STATUS_SCRIPT : await bundleStatusScript();
const STATUS_HTML = text(statusHtml);
const STYLE = `${BASE_CSS}${STATUS_CSS}`;
/** An inline style's or script's CSP source: its hash (the join page's CSP too). */
export const sha256 = (s: string) => `'sha256-${createHash("sha256").update(s).digest("base64")}'`;
/** The page's Content-Security-Policy: its own inline style and script only, fetches and the icon (/favicon.ico) from this origin only. */
export const STATUS_CSP = [
  "default-src 'none'",
  `style-src ${sha256(STYLE)}`,
  `script-src ${sha256(STATUS_SCRIPT)}`,
  "connect-src 'self'",
  "img-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
].join("; ");

function policyRow(r: PolicyRow): string {
  const items = r.items
    ? `<details><summary>show</summary>${r.items.map((i) => `<div><code>${esc(i)}</code></div>`).join("")}</details>`
    : "";
  return `<tr><th scope="row">${esc(r.label)}</th><td>${esc(r.value)}${items}</td></tr>`;
}

export function landingPage(v: LandingView): string {
  const name = esc(String(v.info.name ?? "bunstr"));
  const nips = ((v.info.supported_nips as number[]) ?? []).map((n) => `<li>NIP-${String(n).padStart(2, "0")}</li>`).join("");
  return fill(STATUS_HTML, {
    style: STYLE,
    script: STATUS_SCRIPT,
    name,
    description: esc(String(v.info.description ?? "")),
    wsUrl: esc(v.wsUrl),
    uptime: esc(v.uptime),
    eventsStoredValue: `${v.eventsStored ?? ""}`,
    eventsStored: esc(v.eventsStored === undefined ? "unknown" : v.eventsStored.toLocaleString("en-US")),
    connections: `${v.connections}`,
    nips,
    policies: v.policies.map(policyRow).join("\n"),
    statusJson: esc(v.statusJson),
    software: esc(String(v.info.software ?? "")),
    version: esc(String(v.info.version ?? "")),
  });
}
