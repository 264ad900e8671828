// @ts-check
// Who signs, and whether the relay takes that key as an admin. The page asks once per key, before
// any list loads or any action is sent: a signed `supportedmethods` call (NIP-86's own), which the
// relay answers only for a key in [admin] pubkeys; any other key gets 401 and nothing more (NIP-11
// already says whether the relay has an admin at all: it lists 86 only then). Until the answer is
// yes the actions are disabled, the tables say they are for admins, and the banner at the top (#who)
// says what is wrong and the exact fix: the line for the config file, the `bunstr admin add`
// command, and how the running relay picks the change up.
import { npub } from "./nip19.js";
import { $, message, placeholder } from "./page.js";
import { canSign, connected, connectSigner, rpc } from "./signer.js";

/** @typedef {"unknown" | "no-signer" | "checking" | "admin" | "not-admin" | "no-admins" | "refused"} WhoState */
/** @type {WhoState} */
let state = "unknown";
/** The key checked (hex), and the relay's refusal when it refused for another reason. */
let key = "";
let refusal = "";
/** From NIP-11 (86 listed): does the relay have any admin? undefined until it answered. */
/** @type {boolean | undefined} */
let anyAdmin;
/** The check under way or done, for `key`: true when the relay takes it as an admin. */
/** @type {Promise<boolean> | undefined} */
let check;

/** States in which nothing is sent: the relay would refuse it, or there is no signer. */
const BLOCKED = new Set(["no-signer", "not-admin", "no-admins", "refused"]);
/** May the page send calls that change the relay? */
export const mayAct = () => canSign && !BLOCKED.has(state);
/** The signed check said yes. */
export const isAdmin = () => state === "admin";

/** Where the shipped systemd unit keeps the config (packaging/bunstr.service); the page cannot know the real path. */
const CONFIG = "/etc/bunstr/config.toml";

/** An action button as the page's state allows: disabled (and marked, to be enabled again) while blocked. @param {HTMLButtonElement} b */
export function lockUnlessAdmin(b) {
  b.disabled = !mayAct();
  if (b.disabled && canSign) b.dataset.locked = "";
}

/** Every button that signs a call, off while blocked (Connect and Refresh stay: they check again). */
function sweep() {
  if (!canSign) return;
  const off = !mayAct();
  for (const node of document.querySelectorAll("button:not([data-local]):not([data-signer])")) {
    const b = /** @type {HTMLButtonElement} */ (node);
    if (off && !b.disabled) {
      b.disabled = true;
      b.dataset.locked = "";
    } else if (!off && b.dataset.locked !== undefined) {
      b.disabled = false;
      delete b.dataset.locked;
    }
  }
}

/** The lists are an admin's: while blocked each table says so (not as an error). */
function lockTables() {
  for (const node of document.querySelectorAll("table.grid[id]:not(#events):not(#log)")) {
    const table = /** @type {HTMLTableElement} */ (node);
    table.dataset.state = "locked";
    table.tBodies[0]?.replaceChildren(placeholder(table, "Shown to admins of this relay only (see the top of the page).", "empty"));
    const count = document.getElementById(table.id + "-count");
    if (count) count.textContent = "";
  }
}

/** The fix for a key: the config line and the command. @param {string} pk @param {boolean} first */
function showFix(pk, first) {
  $("who-fix").hidden = false;
  $("who-toml-note").textContent = first
    ? "Make it the first admin: put these lines in the relay's config file (hex, as the config takes pubkeys):"
    : "Add it to the list in the relay's config file, in the [admin] table (hex, as the config takes pubkeys):";
  $("who-toml").textContent = first ? `[admin]\npubkeys = ["${pk}"]` : `"${pk}",`;
  $("who-command").textContent = `bunstr admin add ${npub(pk)} --config ${CONFIG}`;
}

/** The banner at the top says the state in words. */
function render() {
  const box = $("who");
  box.dataset.state = state;
  const title = $("who-title");
  $("who-fix").hidden = true;
  const noAdmin = anyAdmin === false ? " This relay has no admin yet: [admin] pubkeys is empty in its config." : "";
  const who = key ? npub(key) : "";
  switch (state) {
    case "unknown":
      title.textContent = canSign
        ? "Connect your NIP-07 signer: the page then asks the relay whether its key is an admin." + noAdmin
        : "This page cannot sign here: open it over https (or http://127.0.0.1 / localhost).";
      break;
    case "no-signer":
      title.textContent =
        "No NIP-07 signer in this browser: install a Nostr signing extension (nos2x, Alby, \u2026), put the key you administer with in it (or let it make one), then reload this page." +
        noAdmin;
      break;
    case "checking":
      title.textContent = `Asking the relay whether ${who} is an admin\u2026`;
      break;
    case "admin":
      title.textContent = `${who} is an admin of this relay.`;
      break;
    case "not-admin":
      title.textContent = `This key is not an admin of this relay: ${who} is not in [admin] pubkeys. The actions are off.`;
      showFix(key, false);
      break;
    case "no-admins":
      title.textContent = `This relay has no admin yet: [admin] pubkeys is empty in its config. Your key ${who} can be its first. The actions are off.`;
      showFix(key, true);
      break;
    case "refused":
      title.textContent = `The relay refused the page's signed check of ${who}: ${refusal}. The actions are off; Refresh lists checks again.`;
      break;
  }
  sweep();
  if (BLOCKED.has(state) && state !== "no-signer") lockTables();
}

/** @param {WhoState} next */
function set(next) {
  state = next;
  render();
}

/** From NIP-11: whether the relay lists NIP-86 (it has an admin). @param {boolean} on */
export function setAdminsConfigured(on) {
  anyAdmin = on;
  render();
}

/**
 * Asks the relay whether `pk` is an admin (once per key; `again` asks anew, after the config
 * changed). Resolves with the answer.
 * @param {string} pk @param {boolean} [again]
 */
export function checkAdmin(pk, again = false) {
  if (check && pk === key && !again) return check;
  key = pk;
  set("checking");
  check = rpc("supportedmethods", []).then(
    () => (set("admin"), true),
    (err) => {
      const why = message(err);
      if (/no admin/.test(why)) set("no-admins");
      else if (/not an admin/.test(why)) set("not-admin");
      else {
        refusal = why;
        set("refused");
      }
      return false;
    },
  );
  return check;
}

/** Before a call that changes the relay: the signer connected and the check done. True to go ahead. */
export async function adminReady() {
  if (!connected()) await connectSigner();
  return check ? check : false;
}

/** Why nothing is sent, for #result. */
export const whyNot = () =>
  state === "no-signer"
    ? "no NIP-07 signer in this browser"
    : `not sent: ${npub(key)} is not an admin of this relay (see the top of the page)`;

/** A signer that is not there: said at the top (extensions may add window.nostr a moment after the page's script runs). */
export function noSigner() {
  set("no-signer");
}

/** Binds the Copy buttons; looks for the extension once the page settled. */
export function wireWho() {
  for (const node of document.querySelectorAll("button[data-copy]")) {
    const b = /** @type {HTMLButtonElement} */ (node);
    b.addEventListener("click", () => {
      const text = $(b.dataset.copy ?? "").textContent ?? "";
      navigator.clipboard?.writeText(text).then(
        () => (b.textContent = "Copied"),
        () => (b.textContent = "Select and copy"),
      );
    });
  }
  render();
  setTimeout(() => {
    if (!window.nostr && state === "unknown") noSigner();
  }, 1000);
}
