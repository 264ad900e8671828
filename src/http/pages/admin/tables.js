// @ts-check
// The NIP-86 lists as tables: loaded once the signer is connected, one after the other, and again
// after a change that shows in them; each row has the button that undoes its entry.
import { confirmBan, purgeNote } from "./confirm.js";
import { act, describe } from "./log.js";
import { shortBech } from "./nip19.js";
import { $, el, HEX64, message, placeholder, show } from "./page.js";
import { authorEl, eventEl, kindText } from "./render.js";
import { rpc } from "./signer.js";
import { lockUnlessAdmin } from "./who.js";

/** @typedef {[label: string, method: string, args: unknown[]]} RowAction */
/** @typedef {{ key: string, cells: (Node | string)[], actions: RowAction[] }} Row */

/** @param {string} label @param {string} method @param {unknown[]} args @param {HTMLElement} [outcome] */
function actionButton(label, method, args, outcome) {
  const b = el("button", "small", label);
  b.type = "button";
  b.dataset.method = method;
  lockUnlessAdmin(b);
  b.addEventListener("click", async () => {
    if ((method === "banevent" || method === "banpubkey") && !(await confirmBan(method, String(args[0])))) return;
    const error = await act(method, args);
    if (outcome) outcome.textContent = error ? "failed: " + error : "";
  });
  return b;
}

/** A table's rows (the groups view fills its tables the same way). @param {string} id @param {Row[]} rows */
export function fillTable(id, rows) {
  const table = /** @type {HTMLTableElement} */ ($(id));
  const trs = rows.map((r) => {
    const tr = el("tr");
    tr.dataset.key = r.key;
    for (const c of r.cells) {
      const td = el("td");
      td.append(c);
      tr.append(td);
    }
    const td = el("td", "actions");
    const outcome = el("span", "outcome");
    for (const [label, method, args] of r.actions) td.append(actionButton(label, method, args, outcome));
    td.append(outcome);
    tr.append(td);
    return tr;
  });
  table.tBodies[0]?.replaceChildren(...(trs.length > 0 ? trs : [placeholder(table, table.dataset.empty ?? "", "empty")]));
  const count = document.getElementById(id + "-count");
  if (count) count.textContent = "(" + rows.length + ")";
}

/** @param {unknown} items @returns {any[]} */
const array = (items) => (Array.isArray(items) ? items : []);
/** @param {any} item */
const reason = (item) => (typeof item.reason === "string" ? item.reason : "");

/** @param {string} unLabel @param {string} unMethod @returns {(items: unknown) => Row[]} */
const pubkeyRows = (unLabel, unMethod) => (items) =>
  array(items)
    .filter((i) => i && HEX64.test(String(i.pubkey)))
    .map((i) => ({ key: i.pubkey, cells: [authorEl(i.pubkey), purgeNote(i)], actions: [[unLabel, unMethod, [i.pubkey]]] }));
/** @param {unknown} items @returns {Row[]} */
const kindRows = (items) =>
  array(items)
    .filter((k) => Number.isInteger(k))
    .map((k) => ({ key: String(k), cells: [kindText(k)], actions: [["Reset", "resetkind", [k]]] }));

/** Table id -> [the NIP-86 method that lists it, its rows]. @type {Record<string, [string, (items: unknown) => Row[]]>} */
const LISTS = {
  "banned-pubkeys": ["listbannedpubkeys", pubkeyRows("Unban", "unbanpubkey")],
  "allowed-pubkeys": ["listallowedpubkeys", pubkeyRows("Unallow", "unallowpubkey")],
  "moderation-events": [
    "listeventsneedingmoderation",
    (items) =>
      array(items)
        .filter((i) => i && HEX64.test(String(i.id)))
        .map((i) => ({
          key: i.id,
          cells: [eventEl(i.id), reason(i)],
          actions: [
            ["Allow", "allowevent", [i.id]],
            ["Ban", "banevent", [i.id]],
          ],
        })),
  ],
  "banned-events": [
    "listbannedevents",
    (items) =>
      array(items)
        .filter((i) => i && HEX64.test(String(i.id)))
        .map((i) => {
          const id = el("code", "note", shortBech("note", i.id));
          id.title = i.id;
          return { key: i.id, cells: [id, purgeNote(i)], actions: [["Allow again", "allowevent", [i.id]]] };
        }),
  ],
  "allowed-kinds": ["listallowedkinds", kindRows],
  "disallowed-kinds": ["listdisallowedkinds", kindRows],
  "blocked-ips": [
    "listblockedips",
    (items) =>
      array(items)
        .filter((i) => i && typeof i.ip === "string")
        .map((i) => ({ key: i.ip, cells: [i.ip, reason(i)], actions: [["Unblock", "unblockip", [i.ip]]] })),
  ],
};

/** @type {Map<string, Promise<unknown>>} */
const loading = new Map();
let loads = 0;

/** Loads one table; a load already waiting is not asked twice. @param {string} id @returns {Promise<unknown>} */
function loadList(id) {
  const def = LISTS[id];
  if (!def) return Promise.reject(new Error("no list " + id));
  let p = loading.get(id);
  if (p) return p;
  const table = $(id);
  table.dataset.state = "loading";
  p = rpc(def[0], [])
    .then(
      (items) => {
        fillTable(id, def[1](items));
        table.dataset.state = "ok";
        table.dataset.loaded = String(++loads);
        return items;
      },
      (err) => {
        failTable(id, err);
        throw err;
      },
    )
    .finally(() => loading.delete(id));
  loading.set(id, p);
  return p;
}

/** @param {string} id @param {unknown} err */
function failTable(id, err) {
  const table = /** @type {HTMLTableElement} */ ($(id));
  table.dataset.state = "error";
  table.tBodies[0]?.replaceChildren(placeholder(table, "Not loaded: " + message(err), "empty error"));
}

/** Every table, one after the other; after a refusal (not an admin) the others are not asked. */
export async function refreshAll() {
  const ids = Object.keys(LISTS);
  for (const [i, id] of ids.entries()) {
    try {
      await loadList(id);
    } catch (err) {
      for (const rest of ids.slice(i + 1)) failTable(rest, err);
      return;
    }
  }
}

/** A list's Reload button: the answer also shows in #result. @param {string} id */
async function reload(id) {
  const method = LISTS[id]?.[0] ?? id;
  show("pending", method + "\u2026");
  try {
    show("ok", method + ": " + describe(await loadList(id)));
  } catch (err) {
    show("error", method + " failed: " + message(err));
  }
}

/** Which tables a change shows in. @type {Record<string, string[]>} */
const AFFECTS = {
  banpubkey: ["banned-pubkeys", "moderation-events"],
  unbanpubkey: ["banned-pubkeys"],
  allowpubkey: ["allowed-pubkeys"],
  unallowpubkey: ["allowed-pubkeys"],
  banevent: ["banned-events", "moderation-events"],
  allowevent: ["banned-events", "moderation-events"],
  allowkind: ["allowed-kinds", "disallowed-kinds"],
  disallowkind: ["allowed-kinds", "disallowed-kinds"],
  resetkind: ["allowed-kinds", "disallowed-kinds"],
  blockip: ["blocked-ips"],
  unblockip: ["blocked-ips"],
};

/** A change went through: the tables it shows in are loaded again. @param {string} method */
export function reloadAffected(method) {
  for (const id of AFFECTS[method] ?? []) loadList(id).catch(() => {});
}

/** Reload button id -> table id. */
const RELOADS = {
  "list-banned-pubkeys": "banned-pubkeys",
  "list-allowed-pubkeys": "allowed-pubkeys",
  "list-moderation": "moderation-events",
  "list-banned-events": "banned-events",
  "list-allowed-kinds": "allowed-kinds",
  "list-disallowed-kinds": "disallowed-kinds",
  "list-blocked-ips": "blocked-ips",
};

/** Binds each list's Reload button. */
export function wireTables() {
  for (const [button, table] of Object.entries(RELOADS)) $(button).addEventListener("click", () => void reload(table));
}
