// The /admin page: a form over NIP-86. The browser's NIP-07 extension signs each call (a NIP-98
// kind-27235 event with u, method and payload tags); the relay path answers it (admin-api.ts).
// Everything is inline so the single binary carries it; no inline event handlers, so a strict
// script CSP would only need this one script's hash.
import { ADMIN_SCRIPT } from "./admin-script.ts";
import { esc, PAGE_STYLE } from "./landing.ts";

/** A JSON literal safe inside <script>: no "</script>", no "<!--". */
const scriptLiteral = (v: unknown): string => JSON.stringify(v).replace(/</g, "\\u003c");

const STYLE = `${PAGE_STYLE}
section{border:1px solid #ddd;border-radius:6px;padding:.5rem 1rem;margin:1rem 0}h2{font-size:1.1rem}
input{font:inherit;padding:.2rem .4rem;margin:.15rem 0;width:100%;box-sizing:border-box}button{font:inherit;margin:.15rem .3rem .15rem 0}
#result{padding:.5rem;border-radius:4px;background:#f3f3f3;white-space:pre-wrap;word-break:break-all}
#result[data-state=ok]{background:#e6f6e6}#result[data-state=error]{background:#fbe4e4}
ul.out{padding-left:1.2rem;font-size:.9em;word-break:break-all}ul.out:empty{display:none}`;

const section = (title: string, body: string) => `<section><h2>${title}</h2>${body}</section>`;
const button = (id: string, text: string) => `<button type="button" id="${id}">${text}</button>`;
const input = (id: string, placeholder: string, type = "text") => `<input id="${id}" type="${type}" placeholder="${placeholder}" autocomplete="off">`;

const BODY = [
  section("Signer", `<p>Signed in as <code id="signer-pubkey">not connected</code></p>${button("connect", "Connect NIP-07 signer")}`),
  `<p id="result" data-state="idle" data-seq="0" role="status">Results of your calls show here.</p>`,
  section(
    "Pubkeys",
    `${input("pubkey-input", "hex pubkey or npub1…")}${input("pubkey-reason", "reason (optional)")}
${button("ban-pubkey", "Ban")}${button("unban-pubkey", "Unban")}${button("allow-pubkey", "Allow")}${button("unallow-pubkey", "Unallow")}
${button("list-banned-pubkeys", "List banned")}${button("list-allowed-pubkeys", "List allowed")}
<ul class="out" id="banned-pubkeys"></ul><ul class="out" id="allowed-pubkeys"></ul>`,
  ),
  section(
    "Events",
    `${input("event-input", "hex event id or note1…")}${input("event-reason", "reason (optional)")}
${button("ban-event", "Ban")}${button("allow-event", "Allow")}${button("list-banned-events", "List banned")}${button("list-moderation", "List needing moderation")}
<ul class="out" id="banned-events"></ul><ul class="out" id="moderation-events"></ul>`,
  ),
  section(
    "Relay information",
    `${input("name-input", "name")}${button("change-name", "Change name")}
${input("description-input", "description")}${button("change-description", "Change description")}
${input("icon-input", "icon URL")}${button("change-icon", "Change icon")}`,
  ),
  section(
    "Kinds",
    `<p>Allowing a kind makes the relay accept only allowed kinds; Reset takes a kind off both lists (no kind allowed: every kind not disallowed is accepted again).</p>
${input("kind-input", "kind number", "number")}${button("allow-kind", "Allow")}${button("disallow-kind", "Disallow")}${button("reset-kind", "Reset")}${button("list-allowed-kinds", "List allowed")}${button("list-disallowed-kinds", "List disallowed")}
<ul class="out" id="allowed-kinds"></ul><ul class="out" id="disallowed-kinds"></ul>`,
  ),
  section(
    "IP addresses",
    `${input("ip-input", "IP address")}${input("ip-reason", "reason (optional)")}
${button("block-ip", "Block")}${button("unblock-ip", "Unblock")}${button("list-blocked-ips", "List blocked")}
<ul class="out" id="blocked-ips"></ul>`,
  ),
].join("\n");

export function adminPage(relayPath: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Relay administration</title><style>${STYLE}</style></head>
<body><h1>Relay administration</h1>
<p>Calls are signed by your NIP-07 browser extension (NIP-98) and sent to <code>${esc(relayPath)}</code> (NIP-86).</p>
${BODY}
<script>const RELAY_PATH = ${scriptLiteral(relayPath)};
${ADMIN_SCRIPT}</script>
</body></html>`;
}
