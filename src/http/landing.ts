// The page a browser gets on the relay URL: name, description, URL to copy, supported NIPs.
const esc = (s: string): string => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export function landingPage(info: Record<string, unknown>, wsUrl: string): string {
  const name = esc(String(info.name ?? "bunstr"));
  const nips = (info.supported_nips as number[]).map((n) => `<li>NIP-${String(n).padStart(2, "0")}</li>`).join("");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${name}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;color:#222}
code{background:#f3f3f3;padding:.3rem .5rem;border-radius:4px}ul{columns:4;padding-left:1.2rem}</style></head>
<body><h1>${name}</h1>
<p>${esc(String(info.description ?? ""))}</p>
<p>Connect your Nostr client to <code id="url">${esc(wsUrl)}</code>
<button onclick="navigator.clipboard.writeText(document.getElementById('url').textContent)">Copy</button></p>
<h2>Supported NIPs</h2><ul>${nips}</ul>
<p><small>${esc(String(info.software ?? ""))} ${esc(String(info.version ?? ""))}</small></p>
</body></html>`;
}
