// What the pages' browser tests share (test/pages.test.ts, test/pages-access.test.ts): a tab whose
// window.nostr is a NIP-07 extension stub signing in this process, a profile picture that needs no
// network, and a screenshot of one element.
import { deflateSync, inflateSync } from "node:zlib";
import { finalizeEvent } from "nostr-tools/pure";
import type { Browser, Page } from "./cdp.ts";
import type { Signer } from "./helpers.ts";

/**
 * window.nostr for the page, installed before its scripts run: each call goes to this process
 * through a DevTools binding and comes back through __nostrAnswer.
 */
export const NIP07_STUB = `(() => {
  const waiting = new Map();
  let next = 0;
  const call = (method, arg) => new Promise((resolve, reject) => {
    const id = ++next;
    waiting.set(id, { resolve, reject });
    window.__nip07(JSON.stringify({ id, method, arg }));
  });
  window.__nostrAnswer = (id, value, error) => {
    const w = waiting.get(id);
    waiting.delete(id);
    if (w) error ? w.reject(new Error(error)) : w.resolve(value);
  };
  window.nostr = { getPublicKey: () => call("getPublicKey"), signEvent: (e) => call("signEvent", e) };
  // What the page's Content-Security-Policy blocked: nothing, on a page that works as built.
  window.__csp = [];
  document.addEventListener("securitypolicyviolation", (e) => window.__csp.push(e.violatedDirective + " " + e.blockedURI));
})();`;

/** A small square PNG of one colour, as a data: URL (a profile picture that needs no network). */
export function pngDataUrl(rgb: [number, number, number], size = 8): string {
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, "latin1"), data]);
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(Bun.hash.crc32(body) >>> 0);
    return Buffer.concat([len, body, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(size, 0);
  header.writeUInt32BE(size, 4);
  header.set([8, 2, 0, 0, 0], 8); // 8-bit RGB
  const row = Buffer.from([0, ...Array.from({ length: size }, () => rgb).flat()]);
  const png = Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", header),
    chunk("IDAT", deflateSync(Buffer.concat(Array.from({ length: size }, () => row)))),
    chunk("IEND", Buffer.alloc(0)),
  ]);
  return `data:image/png;base64,${png.toString("base64")}`;
}

/**
 * A new tab with the NIP-07 stub: getPublicKey answers `who()`'s pubkey, signEvent signs as it
 * (each signed event is pushed to `signed`).
 */
export async function signingPage(browser: Browser, who: () => Signer, signed: unknown[] = []): Promise<Page> {
  const page = await browser.newPage();
  await page.send("Runtime.addBinding", { name: "__nip07" });
  await page.send("Page.addScriptToEvaluateOnNewDocument", { source: NIP07_STUB });
  page.on("Runtime.bindingCalled", (p) => {
    if (p.name !== "__nip07") return;
    const { id, method, arg } = JSON.parse(p.payload);
    const as = who();
    let answer: unknown;
    if (method === "getPublicKey") answer = as.pubkey;
    else {
      // A plain copy: nostr-tools marks its events with a symbol that JSON does not carry.
      answer = JSON.parse(
        JSON.stringify(finalizeEvent({ kind: arg.kind, created_at: arg.created_at, tags: arg.tags, content: arg.content }, as.sk)),
      );
      signed.push(answer);
    }
    void page.evaluate(`window.__nostrAnswer(${id}, ${JSON.stringify(answer)})`).catch(() => {});
  });
  return page;
}

/** A PNG screenshot (base64) of the element with this id, at its place on the page (below the fold too), `scale` device pixels a CSS pixel. */
export async function shotOf(page: Page, id: string, scale = 1): Promise<string> {
  const box = await page.evaluate<any>(`(() => { const r = document.getElementById(${JSON.stringify(id)}).getBoundingClientRect();
    return { x: r.x + scrollX, y: r.y + scrollY, width: r.width, height: r.height, scale: ${scale} }; })()`);
  if (!(box.width > 0 && box.height > 0)) throw new Error(`#${id} is not on screen`);
  return (await page.send("Page.captureScreenshot", { format: "png", clip: box, captureBeyondViewport: true })).data as string;
}

/** A PNG's size and the RGB of one pixel (8-bit RGB or RGBA, not interlaced: what Chromium's screenshots are). */
export function pngPixel(base64: string, x = 0, y = 0): { width: number; height: number; rgb: [number, number, number] } {
  const png = Buffer.from(base64, "base64");
  const width = png.readUInt32BE(16);
  const height = png.readUInt32BE(20);
  const channels = png[25] === 6 ? 4 : 3;
  const idat: Buffer[] = [];
  for (let at = 8; at < png.length; ) {
    const len = png.readUInt32BE(at);
    if (png.toString("latin1", at + 4, at + 8) === "IDAT") idat.push(png.subarray(at + 8, at + 8 + len));
    at += 12 + len;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  let prev = new Uint8Array(stride);
  let row = new Uint8Array(stride);
  for (let r = 0; r <= y; r++) {
    const filter = raw[r * (stride + 1)]!;
    const line = raw.subarray(r * (stride + 1) + 1, (r + 1) * (stride + 1));
    row = new Uint8Array(stride);
    for (let i = 0; i < stride; i++) {
      const a = i >= channels ? row[i - channels]! : 0;
      const b = prev[i]!;
      const c = i >= channels ? prev[i - channels]! : 0;
      const p = a + b - c;
      const paeth =
        Math.abs(p - a) <= Math.abs(p - b) && Math.abs(p - a) <= Math.abs(p - c) ? a : Math.abs(p - b) <= Math.abs(p - c) ? b : c;
      const add = [0, a, b, (a + b) >> 1, paeth][filter]!;
      row[i] = (line[i]! + add) & 0xff;
    }
    prev = row;
  }
  const i = x * channels;
  return { width, height, rgb: [row[i]!, row[i + 1]!, row[i + 2]!] };
}
