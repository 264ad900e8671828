// @ts-check
// Issue 34: a ban takes away what its target stored, so it asks first. The relay tells what a ban
// would take away (bunstr's NIP-86 previewbanpubkey / previewbanevent: how many stored events, and
// whether they are hidden for [admin] ban_retention or deleted at once), and a modal <dialog> says
// it in words, Cancel focused: Enter, Escape or a click on Cancel bans nothing. The banned lists
// show when what a ban hid is deleted (purgeNote).
import { shortBech } from "./nip19.js";
import { el, message } from "./page.js";
import { profiles, when } from "./render.js";
import { rpc } from "./signer.js";

/** @typedef {{ events: number, action: "hide" | "delete" | "keep", retention: string }} BanPreview */

/** "1 stored event", "1,234 stored events". @param {number} n */
const stored = (n) => n.toLocaleString("en-US") + (n === 1 ? " stored event" : " stored events");

/**
 * What the dialog says of a ban. @param {"banpubkey" | "banevent"} method @param {string} name
 * @param {BanPreview} p @returns {string}
 */
export function banQuestion(method, name, p) {
  const undo = method === "banpubkey" ? "unban" : "allow it again";
  const ask = "Ban " + name + "? ";
  if (method === "banpubkey" && p.action === "keep")
    return ask + "Its new events will be refused; its " + stored(p.events) + " stay served.";
  if (method === "banevent" && p.events === 0) return ask + "It is not stored here; it will be refused if sent.";
  if (p.action === "delete") return ask + stored(p.events) + " will be deleted now; nothing comes back if you " + undo + ".";
  return ask + stored(p.events) + " will be hidden now and deleted after " + p.retention + " unless you " + undo + ".";
}

/** Resolves the question waiting for its answer, if any. @type {((yes: boolean) => void) | undefined} */
let answer;

/** @type {{ dialog: HTMLDialogElement, text: HTMLElement, ok: HTMLButtonElement, cancel: HTMLButtonElement } | undefined} */
let parts;

/** The one dialog, made on first use: a form whose buttons close it with their value. */
function dialogParts() {
  if (parts) return parts;
  const dialog = el("dialog");
  dialog.id = "confirm-ban";
  const form = el("form");
  form.method = "dialog";
  const text = el("p");
  text.id = "confirm-ban-text";
  const cancel = el("button", "", "Cancel");
  cancel.id = "confirm-ban-cancel";
  cancel.value = "cancel";
  cancel.autofocus = true;
  const ok = el("button", "danger", "Ban");
  ok.id = "confirm-ban-ok";
  ok.value = "confirm";
  const row = el("p", "buttons");
  row.append(cancel, ok);
  form.append(text, row);
  dialog.append(form);
  dialog.setAttribute("aria-labelledby", text.id);
  document.body.append(dialog);
  // One listener for every question: it answers the one waiting. A close event is queued after
  // the dialog closes, so one from an earlier question can arrive after the next is shown (a full
  // CI run: the ban was then never sent): while the dialog is open it is not an answer.
  dialog.addEventListener("close", () => {
    if (dialog.open) return;
    answer?.(dialog.returnValue === "confirm");
  });
  parts = { dialog, text, ok, cancel };
  return parts;
}

/** Shows `question`; resolves true only when the ban button closed the dialog. @param {string} question @param {string} label */
function ask(question, label) {
  const { dialog, text, ok, cancel } = dialogParts();
  // A question whose close event has not come yet ends as "no": left waiting, it took the next
  // question's "Ban" as its own (a CI run banned an author whose question had been cancelled).
  answer?.(false);
  text.textContent = question;
  ok.textContent = label;
  dialog.returnValue = "";
  dialog.showModal();
  cancel.focus();
  return new Promise((resolve) => {
    answer = (yes) => {
      answer = undefined;
      resolve(yes);
    };
  });
}

/**
 * Before a ban: asks the relay what it would take away, then the operator. True: go on.
 * @param {"banpubkey" | "banevent"} method @param {string} key hex pubkey or event id
 * @returns {Promise<boolean>}
 */
export async function confirmBan(method, key) {
  const short = shortBech(method === "banpubkey" ? "npub" : "note", key);
  // The author's profile name too, as the live view shows it: the operator checks whom they ban.
  const known = method === "banpubkey" ? profiles.get(key)?.name : "";
  const name = known ? `${known} (${short})` : short;
  let question;
  try {
    const p = /** @type {BanPreview} */ (await rpc(method === "banpubkey" ? "previewbanpubkey" : "previewbanevent", [key]));
    question = banQuestion(method, name, p);
  } catch (err) {
    question = "Ban " + name + "? How many stored events it takes away could not be learned: " + message(err);
  }
  return ask(question, method === "banpubkey" ? "Ban author" : "Ban event");
}

/**
 * A banned list's reason cell: the reason, and while what the ban took away is hidden, when it is
 * deleted (purge_at). @param {{ reason?: unknown, purge_at?: unknown }} item @returns {Node | string}
 */
export function purgeNote(item) {
  const reason = typeof item.reason === "string" ? item.reason : "";
  if (typeof item.purge_at !== "number") return reason;
  const cell = el("span", "", reason);
  const note = el("small", "purge-at muted", "hidden; deleted " + when(item.purge_at));
  note.title = new Date(item.purge_at * 1000).toISOString();
  note.dataset.purgeAt = String(item.purge_at);
  cell.append(note);
  return cell;
}
