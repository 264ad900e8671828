// @ts-check
// What every view of the admin page uses: the relay path, the page's elements, new elements (text
// only), form fields, and #result, where the outcome of the last call shows.
//
// Everything that comes from an event is untrusted: it goes into the page as text (textContent)
// only, and a picture only from an https:, http: or data:image/ URL (render.js).

/** The relay path: NIP-86 calls and the websocket go there (the page sets it on <body>). */
export const RELAY_PATH = document.body.dataset.relayPath || "/";

export const HEX64 = /^[0-9a-f]{64}$/;

/** The element with this id (the page has them all). @param {string} id */
export const $ = (id) => {
  const el = document.getElementById(id);
  if (!el) throw new Error("the page has no #" + id);
  return el;
};
/** An input of the page. @param {string} id */
export const input = (id) => /** @type {HTMLInputElement} */ ($(id));
/** An error's message, or what was thrown as text. @param {unknown} err */
export const message = (err) => {
  const m = err && /** @type {{ message?: unknown }} */ (err).message;
  return m ? String(m) : String(err);
};
/**
 * A new element with a class and text (textContent: never parsed as HTML).
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag @param {string} [cls] @param {string} [textValue]
 * @returns {HTMLElementTagNameMap[K]}
 */
export const el = (tag, cls, textValue) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (textValue !== undefined) e.textContent = textValue;
  return e;
};
const result = $("result");
let seq = 0;

/** What #result says before any call (the page's own words, admin.html). */
export const IDLE = "Results of your calls show here.";

/** @param {"idle" | "pending" | "ok" | "error"} state @param {string} text */
export function show(state, text) {
  result.dataset.state = state;
  result.dataset.seq = String(++seq);
  result.textContent = text;
}

/** A form field's text, trimmed. @param {string} field */
export const text = (field) => input(field).value.trim();

/** A table's one row saying it is empty (or why it is). @param {HTMLTableElement} table @param {string} textValue @param {string} cls */
export function placeholder(table, textValue, cls) {
  const tr = el("tr", cls);
  const td = el("td", "", textValue);
  td.colSpan = table.tHead?.rows[0]?.cells.length ?? 1;
  tr.append(td);
  return tr;
}
