// @ts-check
// The forms: each button acts on what its form holds (a pubkey, an event, a kind, an address, the
// relay's name, description or icon), checked here before anything is signed.
import { confirmBan } from "./confirm.js";
import { act } from "./log.js";
import { hexOf } from "./nip19.js";
import { $, message, show, text } from "./page.js";

/** @param {string} field @param {string} prefix */
const hex32 = (field, prefix) => hexOf(text(field), prefix);

/** @param {string} field @param {string} what */
function required(field, what) {
  const v = text(field);
  if (!v) throw new Error("enter " + what);
  return v;
}

function kind() {
  const v = text("kind-input");
  if (!/^[0-9]+$/.test(v) || !Number.isSafeInteger(Number(v))) throw new Error("enter a kind number");
  return Number(v);
}

const pubkeyArgs = () => [hex32("pubkey-input", "npub"), text("pubkey-reason")];
const eventArgs = () => [hex32("event-input", "note"), text("event-reason")];

/** Button id -> [NIP-86 method, its params from the form]. @type {Record<string, [string, () => unknown[]]>} */
const ACTIONS = {
  "ban-pubkey": ["banpubkey", pubkeyArgs],
  "unban-pubkey": ["unbanpubkey", pubkeyArgs],
  "allow-pubkey": ["allowpubkey", pubkeyArgs],
  "unallow-pubkey": ["unallowpubkey", pubkeyArgs],
  "ban-event": ["banevent", eventArgs],
  "allow-event": ["allowevent", eventArgs],
  "change-name": ["changerelayname", () => [required("name-input", "a name")]],
  "change-description": ["changerelaydescription", () => [text("description-input")]],
  "change-icon": ["changerelayicon", () => [text("icon-input")]],
  "allow-kind": ["allowkind", () => [kind()]],
  "disallow-kind": ["disallowkind", () => [kind()]],
  "reset-kind": ["resetkind", () => [kind()]],
  "block-ip": ["blockip", () => [required("ip-input", "an IP address"), text("ip-reason")]],
  "unblock-ip": ["unblockip", () => [required("ip-input", "an IP address")]],
};

/** Binds each form's buttons. */
export function wireForms() {
  for (const [id, [method, params]] of Object.entries(ACTIONS))
    $(id).addEventListener("click", async () => {
      let args;
      try {
        args = params();
      } catch (err) {
        return show("error", method + ": " + message(err));
      }
      if ((method === "banpubkey" || method === "banevent") && !(await confirmBan(method, String(args[0])))) return;
      void act(method, args);
    });
}
