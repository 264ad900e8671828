// @ts-check
// A BOLT-11 invoice as a QR code, drawn as SVG. The encoder is the npm package qrcode-generator
// (Kazuhiko Arase, MIT, one file, no dependencies; bundled into this page only): a QR encoder's
// Reed-Solomon blocks, version tables and mask penalties are where a library kept since 2009 beats
// code written here. What is ours is the drawing: the dark modules as one SVG path, built with DOM
// calls (no markup parsed).
import qrcode from "qrcode-generator";

const SVG = "http://www.w3.org/2000/svg";
/** The quiet zone around the code, in modules (the spec asks for 4). */
const MARGIN = 4;

/**
 * What the QR code holds: the invoice as a `lightning:` URI, upper case. BOLT-11 is bech32 (one
 * case), and upper case fits QR's alphanumeric mode (5.5 bits a character instead of 8), so the
 * code is smaller and easier for a phone to read; wallets accept both cases.
 * @param {string} bolt11
 */
export const qrText = (bolt11) => ("lightning:" + bolt11).toUpperCase();

/** Draws `text` into the <svg>, replacing what it held. @param {SVGSVGElement} svg @param {string} text */
export function drawQr(svg, text) {
  const code = qrcode(0, "M");
  code.addData(text, /^[0-9A-Z $%*+\-./:]*$/.test(text) ? "Alphanumeric" : "Byte");
  code.make();
  const n = code.getModuleCount();
  const size = n + 2 * MARGIN;
  let d = "";
  for (let row = 0; row < n; row++)
    for (let col = 0; col < n; col++) if (code.isDark(row, col)) d += `M${col + MARGIN} ${row + MARGIN}h1v1h-1z`;
  const background = document.createElementNS(SVG, "rect");
  background.setAttribute("width", String(size));
  background.setAttribute("height", String(size));
  background.setAttribute("fill", "#fff");
  const modules = document.createElementNS(SVG, "path");
  modules.setAttribute("d", d);
  modules.setAttribute("fill", "#000");
  svg.setAttribute("viewBox", `0 0 ${size} ${size}`);
  svg.setAttribute("shape-rendering", "crispEdges");
  svg.dataset.modules = String(n);
  svg.replaceChildren(background, modules);
}
