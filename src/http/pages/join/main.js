// @ts-check
// The /join page's script (join.html): paid admission from a browser. pages/bundle.ts bundles it
// with qr.js (and the QR encoder) into one script inline in the page, type-checked through JSDoc
// (../tsconfig.json).
//
// The visitor's pubkey (typed as hex or npub, or asked of a NIP-07 extension: getPublicKey only,
// nothing is signed) goes to /join/invoice; the invoice shows as a QR code and as text to copy;
// then /join/status is asked every 2 s until the relay says the pubkey is admitted (the relay asks
// its Lightning node each time, so this works without the node's webhook), at most for the
// invoice's lifetime ([pay_to_relay] invoice_expiry_seconds). Where the page is shows in #join's
// data-state: idle, loading, invoice, paid, admitted (before paying), expired, error.
import { drawQr, qrText } from "./qr.js";

/** @param {string} id */
const $ = (id) => {
  const e = document.getElementById(id);
  if (!e) throw new Error("the page has no #" + id);
  return e;
};
const form = /** @type {HTMLFormElement} */ ($("pubkey-form"));
const field = /** @type {HTMLInputElement} */ ($("pubkey"));
const join = $("join");
const box = $("invoice-box");
const INVOICE_PATH = document.body.dataset.invoicePath || "/join/invoice";
const STATUS_PATH = document.body.dataset.statusPath || "/join/status";
const POLL_MS = 2000;

const PUBKEY = /^(?:[0-9a-f]{64}|npub1[02-9ac-hj-np-z]{58})$/;
/** Each invoice asked for; a newer one (or another pubkey) makes the older's polling stop. */
let round = 0;
/** @type {ReturnType<typeof setTimeout> | undefined} */
let timer;

/** @typedef {"idle" | "loading" | "invoice" | "paid" | "admitted" | "expired" | "error"} State */
/** @param {State} state @param {string} text */
function show(state, text) {
  join.dataset.state = state;
  $("message").textContent = text;
}

/** An error's message, or what was thrown as text. @param {unknown} err */
const message = (err) => String((err && /** @type {{ message?: unknown }} */ (err).message) || err);

/**
 * A GET of one of the join endpoints: its JSON, or an Error with the relay's `error` text (these
 * are sentences: "rate-limited: too many join attempts, try again in 60 s", …).
 * @param {string} path @param {string} pubkey @returns {Promise<any>}
 */
async function ask(path, pubkey) {
  const res = await fetch(path + "?pubkey=" + encodeURIComponent(pubkey), { headers: { Accept: "application/json" }, cache: "no-store" });
  /** @type {any} */
  let body;
  try {
    body = await res.json();
  } catch {}
  if (body && typeof body.error === "string") throw new Error(body.error);
  if (!res.ok || !body) throw new Error("the relay answered HTTP " + res.status);
  return body;
}

/** Stops asking about an invoice shown before. */
function stop() {
  round++;
  clearTimeout(timer);
}

/** @param {string} pubkey */
async function getInvoice(pubkey) {
  stop();
  const mine = round;
  box.hidden = true;
  if (!PUBKEY.test(pubkey)) return show("error", "That is not a pubkey: enter an npub1… or 64 hex characters.");
  show("loading", "Asking the relay for an invoice\u2026");
  let answer;
  try {
    answer = await ask(INVOICE_PATH, pubkey);
  } catch (err) {
    if (mine === round) show("error", "No invoice: " + message(err));
    return;
  }
  if (mine !== round) return;
  if (answer.admitted === true) return show("admitted", "This pubkey is already admitted: you can publish now.");
  if (typeof answer.invoice !== "string") return show("error", "No invoice: the relay's answer had none.");
  const invoice = answer.invoice;
  drawQr(/** @type {SVGSVGElement} */ (/** @type {unknown} */ ($("qr"))), qrText(invoice));
  /** @type {HTMLAnchorElement} */ ($("qr-link")).href = "lightning:" + invoice;
  $("invoice").textContent = invoice;
  $("copied").textContent = "";
  box.hidden = false;
  const sats = typeof answer.amount_sats === "number" ? answer.amount_sats.toLocaleString("en-US") + " sats" : "the amount shown";
  show("invoice", "Pay " + sats + " with a Lightning wallet: scan the code or copy the invoice.");
  // The relay may hand out an invoice made earlier: it expires at the latest a lifetime from now.
  const expires = Date.now() + 1000 * (Number(document.body.dataset.expirySeconds) || 3600);
  timer = setTimeout(() => void poll(pubkey, mine, expires), POLL_MS);
}

/**
 * One status check; again in 2 s until admitted, the invoice expired, or another round began.
 * @param {string} pubkey @param {number} mine @param {number} expires
 */
async function poll(pubkey, mine, expires) {
  let note = "";
  try {
    const answer = await ask(STATUS_PATH, pubkey);
    if (mine !== round) return;
    if (answer.admitted === true) {
      box.hidden = true;
      return show("paid", "Paid \u2014 you can publish now.");
    }
  } catch (err) {
    // Not fatal: the invoice stays up and the page asks again (a busy relay, a dropped connection).
    note = " (the last check failed: " + message(err) + ")";
  }
  if (mine !== round) return;
  if (Date.now() > expires) {
    box.hidden = true;
    return show("expired", "This invoice has expired without a payment: get a new one.");
  }
  const text = $("message").textContent || "";
  $("message").textContent = text.replace(/ \(the last check failed: .*\)$/, "") + note;
  timer = setTimeout(() => void poll(pubkey, mine, expires), POLL_MS);
}

form.addEventListener("submit", (e) => {
  e.preventDefault();
  void getInvoice(field.value.trim());
});

// Another pubkey typed: the invoice shown is not for it.
field.addEventListener("input", () => {
  if (join.dataset.state === "idle") return;
  stop();
  box.hidden = true;
  show("idle", "");
});

$("sign-in").addEventListener("click", async () => {
  if (!window.nostr) return show("error", "No Nostr extension found: install or unlock one (nos2x, Alby, \u2026), or type your pubkey.");
  try {
    const pk = await window.nostr.getPublicKey();
    if (typeof pk !== "string" || !/^[0-9a-f]{64}$/.test(pk)) throw new Error("the extension gave no pubkey");
    stop();
    field.value = pk;
    box.hidden = true;
    show("idle", "Signed in: this is your extension's pubkey. Get the invoice when ready.");
  } catch (err) {
    show("error", "The extension did not tell the pubkey: " + message(err));
  }
});

$("copy").addEventListener("click", async () => {
  const invoice = $("invoice").textContent || "";
  try {
    await navigator.clipboard.writeText(invoice);
    $("copied").textContent = "Copied.";
  } catch {
    // No clipboard (http to a non-local name, or denied): select the text for the visitor to copy.
    const range = document.createRange();
    range.selectNodeContents($("invoice"));
    getSelection()?.removeAllRanges();
    getSelection()?.addRange(range);
    $("copied").textContent = "Selected: copy it with your keyboard.";
  }
});
