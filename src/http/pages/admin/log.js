// @ts-check
// The log: what each action did, newest first. Every call that changes the relay (a form's
// button, a table row's, a ban from the live view) goes through act().
import { $, el, HEX64, message, show } from "./page.js";
import { authorEl, eventEl } from "./render.js";
import { rpc } from "./signer.js";
import { adminReady, whyNot } from "./who.js";

const LOG_MAX = 50;

/** Told of each change that went through (main.js reloads the tables it shows in). @type {(method: string, args: unknown[]) => void} */
let changed = () => {};
/** @param {(method: string, args: unknown[]) => void} listener */
export function onChange(listener) {
  changed = listener;
}

/** What a call acts on, for the log. @param {string} method @param {unknown[]} args @returns {Node | string} */
function targetOf(method, args) {
  const a = String(args[0] ?? "");
  // NIP-29: [group, pubkey?, …]
  if (/group/.test(method)) {
    const b = String(args[1] ?? "");
    const span = el("span", "", "group " + a + " ");
    if (HEX64.test(b)) span.append(authorEl(b));
    return span;
  }
  if (/pubkey$/.test(method) && HEX64.test(a)) return authorEl(a);
  if (/event$/.test(method) && HEX64.test(a)) return eventEl(a);
  if (/kind$/.test(method)) return "kind " + a;
  if (method.startsWith("changerelay")) return JSON.stringify(a.length > 80 ? a.slice(0, 80) + "\u2026" : a);
  return a;
}

/** A new row at the top of the log, its outcome still pending. @param {string} method @param {Node | string} target */
function logEntry(method, target) {
  const body = /** @type {HTMLTableSectionElement} */ ($("log").querySelector("tbody"));
  body.querySelector("tr.empty")?.remove();
  const tr = el("tr");
  tr.dataset.state = "pending";
  tr.dataset.method = method;
  const targetTd = el("td");
  targetTd.append(target);
  tr.append(el("td", "time", new Date().toLocaleTimeString()), el("td", "", method), targetTd, el("td", "outcome", "\u2026"));
  body.prepend(tr);
  while (body.rows.length > LOG_MAX) body.lastElementChild?.remove();
  return tr;
}

/** @param {unknown} v */
export function describe(v) {
  if (Array.isArray(v)) return v.length + (v.length === 1 ? " item" : " items");
  if (v === true) return "ok";
  return JSON.stringify(v);
}

/**
 * A call that changes the relay: shown in #result and in the log, then onChange's listener is
 * told (the tables it changes are loaded again). Resolves with the error text, or undefined when it went through.
 * @param {string} method @param {unknown[]} args @returns {Promise<string | undefined>}
 */
export async function act(method, args) {
  // Nothing is sent for a key the relay does not take as an admin (the top of the page says why).
  try {
    if (!(await adminReady())) {
      show("error", method + ": " + whyNot());
      return whyNot();
    }
  } catch (err) {
    show("error", method + ": " + message(err));
    return message(err);
  }
  show("pending", method + "\u2026");
  const entry = logEntry(method, targetOf(method, args));
  const outcome = /** @type {HTMLElement} */ (entry.querySelector(".outcome"));
  try {
    const value = await rpc(method, args);
    show("ok", method + ": " + describe(value));
    entry.dataset.state = "ok";
    outcome.textContent = describe(value);
    changed(method, args);
    return undefined;
  } catch (err) {
    show("error", method + " failed: " + message(err));
    entry.dataset.state = "error";
    outcome.textContent = message(err);
    return message(err);
  }
}
