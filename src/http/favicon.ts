// /favicon.ico: every browser tab asks for it, on every page of the relay's origin. A small SVG
// (a white "b" on purple) written here, no binary file: browsers read an
// SVG icon by its content type whatever the name, and the pages link it (rel="icon").
const ICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">
<rect width="32" height="32" rx="7" fill="#6d28d9"/>
<rect x="8" y="5" width="4" height="22" rx="1" fill="#fff"/>
<circle cx="17" cy="20" r="5" fill="none" stroke="#fff" stroke-width="4"/>
</svg>`;

export const FAVICON_PATH = "/favicon.ico";

/** GET or HEAD on /favicon.ico: the icon, cached a day (it changes only with the software). */
export function faviconResponse(req: Request): Response {
  if (req.method !== "GET" && req.method !== "HEAD")
    return new Response("method not allowed", { status: 405, headers: { Allow: "GET, HEAD" } });
  return new Response(req.method === "HEAD" ? null : ICON, {
    headers: { "Content-Type": "image/svg+xml", "Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff" },
  });
}
