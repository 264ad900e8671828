// @ts-check
// The admin page's script (admin.html): its entry module. pages/bundle.ts bundles it with the
// modules it imports into one script inline in the page (a function scope of its own: a global
// named like window.nostr would replace the extension's); type-checked through JSDoc
// (../tsconfig.json).
//
// A moderation console: the NIP-86 lists as tables (tables.js; loaded once the NIP-07 signer is
// connected, reloaded after each change), a live view of the relay's recent events with one-click
// bans (live.js), and a log of what each action did (log.js). Calls are signed by the extension
// (signer.js); events and profiles are read from the relay itself over its websocket (socket.js).
// The groups (groups.js) and admission (access.js) views show while their models are on. Each
// view is a tab (tabs.js). Before any list loads, the relay is asked whether the signer's key is
// an admin (who.js): if not, the top of the page says how to make it one and the actions are off.
// This module binds them: who signs shows in the bar, a change reloads its tables, and the page
// starts once it knows the relay (NIP-11).
import { refreshAccess, reloadAccessAffected, setAccessEnabled, wireAccess } from "./access.js";
import { wireForms } from "./forms.js";
import { refreshGroups, reloadGroupsAffected, setGroupsEnabled, wireGroups } from "./groups.js";
import { markBans, setSearchable, startLive, wireLive } from "./live.js";
import { onChange } from "./log.js";
import { $, IDLE, input, message, RELAY_PATH, show } from "./page.js";
import { authorEl, wirePictureToggle } from "./render.js";
import { canSign, connected, connectSigner, onSigner } from "./signer.js";
import { openSocket } from "./socket.js";
import { refreshAll, reloadAffected, wireTables } from "./tables.js";
import { wireTabs } from "./tabs.js";
import { checkAdmin, isAdmin, noSigner, setAdminsConfigured, wireWho } from "./who.js";

// The lists load the first time the extension tells who signs (and when the key changed), once
// the relay said that key is an admin.
onSigner((pk, changed) => {
  $("signer-pubkey").textContent = pk;
  $("signer-profile").replaceChildren(authorEl(pk));
  if (changed) void loadAsAdmin(pk);
});

/** Checks the key; the lists load for an admin. @param {string} pk */
async function loadAsAdmin(pk) {
  const ok = await checkAdmin(pk);
  if (ok) await refreshAll().then(refreshViews);
  return ok;
}
onChange((method, args) => {
  markBans(method, args);
  reloadAffected(method);
  reloadGroupsAffected(method);
  reloadAccessAffected(method);
});

/** The views after the lists: groups, then admission (each shows only while on). */
async function refreshViews() {
  await refreshGroups().catch(() => {});
  await refreshAccess().catch(() => {});
}

wireTabs();
wireWho();
wireForms();
wireTables();
wireGroups();
wireAccess();
/**
 * The relay's answer for the signer's key: the banner at the top says it (who.js), once; the
 * result line goes back to waiting for a call rather than saying it a second time.
 * @param {string} pk @param {boolean} [again] ask anew (the config may have changed)
 */
async function say(pk, again = false) {
  const ok = await checkAdmin(pk, again);
  show("idle", IDLE);
  return ok;
}
$("connect").addEventListener("click", async () => {
  try {
    await say(await connectSigner());
  } catch (err) {
    if (!window.nostr) noSigner();
    show("error", "signer: " + message(err));
  }
});
// Refresh: the lists again; for a key the relay refused, the check again (the config may have changed).
$("refresh").addEventListener("click", async () => {
  try {
    if (!connected()) await say(await connectSigner());
    else if (!isAdmin()) {
      if (await say($("signer-pubkey").textContent ?? "", true)) await refreshAll().then(refreshViews);
    } else await refreshAll().then(refreshViews);
  } catch (err) {
    if (!window.nostr) noSigner();
    show("error", "signer: " + message(err));
  }
});
wireLive();
wirePictureToggle();

// NIP-11: the current name, description and icon, to edit rather than retype; whether the relay
// searches (NIP-50). Then the live view starts.
fetch(RELAY_PATH, { headers: { Accept: "application/nostr+json" } })
  .then((r) => r.json())
  .then((info) => {
    setSearchable(Array.isArray(info.supported_nips) && info.supported_nips.includes(50));
    setGroupsEnabled(Array.isArray(info.supported_nips) && info.supported_nips.includes(29));
    setAccessEnabled(info);
    setAdminsConfigured(Array.isArray(info.supported_nips) && info.supported_nips.includes(86));
    // The signer may have connected before this answer: the groups and admissions load now.
    if (connected() && isAdmin()) void refreshViews();
    /** @type {[string, string][]} */
    const fields = [
      ["name-input", "name"],
      ["description-input", "description"],
      ["icon-input", "icon"],
    ];
    for (const [field, key] of fields) if (!input(field).value && typeof info[key] === "string") input(field).value = info[key];
  })
  .catch(() => {})
  .finally(() => {
    startLive();
    openSocket();
  });

if (!canSign) {
  for (const b of document.querySelectorAll("button:not([data-local])")) /** @type {HTMLButtonElement} */ (b).disabled = true;
  show(
    "error",
    "This admin page needs https (or http://127.0.0.1 / localhost): the browser offers no crypto.subtle here, so requests cannot be signed.",
  );
}
