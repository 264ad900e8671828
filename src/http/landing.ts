// The page a browser gets on the relay URL: name, description, URL to copy, live numbers, the
// supported NIPs and the policies in force. Everything from config or the store is escaped.
import type { PolicyRow } from "./status.ts";

export const esc = (s: string): string => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export interface LandingView {
  info: Record<string, unknown>;
  wsUrl: string;
  uptime: string;
  /** undefined when the store could not say. */
  eventsStored: number | undefined;
  connections: number;
  policies: PolicyRow[];
}

export const PAGE_STYLE = `body{font:16px/1.5 system-ui,sans-serif;max-width:46rem;margin:3rem auto;padding:0 1rem;color:#222}
code{background:#f3f3f3;padding:.3rem .5rem;border-radius:4px;word-break:break-all}table{border-collapse:collapse;width:100%}
td,th{text-align:left;vertical-align:top;padding:.25rem .5rem;border-bottom:1px solid #eee}details{font-size:.85em}`;

function policyRow(r: PolicyRow): string {
  const items = r.items ? `<details><summary>show</summary>${r.items.map((i) => `<div><code>${esc(i)}</code></div>`).join("")}</details>` : "";
  return `<tr><th scope="row">${esc(r.label)}</th><td>${esc(r.value)}${items}</td></tr>`;
}

export function landingPage(v: LandingView): string {
  const name = esc(String(v.info.name ?? "bunstr"));
  const nips = ((v.info.supported_nips as number[]) ?? []).map((n) => `<li>NIP-${String(n).padStart(2, "0")}</li>`).join("");
  const stored = v.eventsStored === undefined ? "unknown" : v.eventsStored.toLocaleString("en-US");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${name}</title>
<style>${PAGE_STYLE}
ul.nips{columns:4;padding-left:1.2rem}</style></head>
<body><h1 id="name">${name}</h1>
<p id="description">${esc(String(v.info.description ?? ""))}</p>
<p>Connect your Nostr client to <code id="url">${esc(v.wsUrl)}</code>
<button id="copy" type="button">Copy</button></p>
<h2>Status</h2>
<table><tbody>
<tr><th scope="row">Up for</th><td id="uptime">${esc(v.uptime)}</td></tr>
<tr><th scope="row">Events stored</th><td id="events-stored" data-value="${v.eventsStored ?? ""}">${esc(stored)}</td></tr>
<tr><th scope="row">Open connections</th><td id="connections">${v.connections}</td></tr>
</tbody></table>
<h2>Supported NIPs</h2><ul class="nips" id="nips">${nips}</ul>
<h2>Policies in force</h2>
<table id="policies"><tbody>${v.policies.map(policyRow).join("\n")}</tbody></table>
<p><small>${esc(String(v.info.software ?? ""))} ${esc(String(v.info.version ?? ""))}</small></p>
<script>document.getElementById("copy").addEventListener("click",()=>navigator.clipboard.writeText(document.getElementById("url").textContent))</script>
</body></html>`;
}
