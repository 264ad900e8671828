// @ts-check
// NIP-29 groups (bunstr's own NIP-86 methods, shown while the relay has groups on: NIP-11 lists
// 29): every group with its picture, name, flags and member count; one group's members (names
// and pictures from their kind 0, as everywhere on the page) with their roles, and its invite
// codes. Remove, Delete group and Create invite are calls the relay answers by publishing its own
// 9001, 9008 or 9009, so they are in the group's history like a moderator's.
import { act, describe } from "./log.js";
import { $, el, HEX64, message, placeholder, show, text } from "./page.js";
import { authorEl, pictureEl } from "./render.js";
import { rpc } from "./signer.js";
import { fillTable } from "./tables.js";

/** The group whose members and invites show; "" none. */
let selected = "";
let loads = 0;

/** @param {unknown} items @returns {any[]} */
const array = (items) => (Array.isArray(items) ? items : []);

/** Loads a table with a method's answer; the table says its state (loading, ok, error) and how many loads it had. @param {string} id @param {string} method @param {unknown[]} args @param {(items: unknown) => import("./tables.js").Row[]} rows */
async function load(id, method, args, rows) {
  const table = /** @type {HTMLTableElement} */ ($(id));
  table.dataset.state = "loading";
  try {
    const items = await rpc(method, args);
    fillTable(id, rows(items));
    table.dataset.state = "ok";
    table.dataset.loaded = String(++loads);
    return items;
  } catch (err) {
    table.dataset.state = "error";
    table.tBodies[0]?.replaceChildren(placeholder(table, "Not loaded: " + message(err), "empty error"));
    throw err;
  }
}

/** @param {any} g */
const flags = (g) => ["private", "restricted", "hidden", "closed"].filter((f) => g[f] === true).join(", ") || "open";

/** The group's picture and name, as the button that shows its members. @param {any} g */
function groupButton(g) {
  const b = el("button", "group-name");
  b.type = "button";
  b.dataset.local = "";
  b.dataset.group = g.id;
  const label = g.name || g.id;
  b.append(pictureEl(g.picture || "", label), el("span", "name", label));
  b.addEventListener("click", () => void selectGroup(g.id, label));
  return b;
}

/** @param {unknown} items */
const groupRows = (items) =>
  array(items)
    .filter((g) => g && typeof g.id === "string")
    .sort((a, b) => b.members - a.members || String(a.id).localeCompare(String(b.id)))
    .map((g) => ({
      key: g.id,
      cells: [groupButton(g), el("code", "", g.id), flags(g), String(g.members)],
      /** @type {import("./tables.js").RowAction[]} */
      actions: [["Delete group", "deletegroup", [g.id]]],
    }));

/** @param {string} group @returns {(items: unknown) => import("./tables.js").Row[]} */
const memberRows = (group) => (items) =>
  array(items)
    .filter((m) => m && HEX64.test(String(m.pubkey)))
    .map((m) => ({
      key: m.pubkey,
      cells: [authorEl(m.pubkey), array(m.roles).join(", ") || "member"],
      actions: [["Remove", "removegroupmember", [group, m.pubkey]]],
    }));

/** @param {unknown} items */
const inviteRows = (items) =>
  array(items)
    .filter((c) => typeof c === "string")
    .map((c) => ({ key: c, cells: [el("code", "", c)], actions: [] }));

/** Shows one group's members and invite codes. @param {string} id @param {string} label */
async function selectGroup(id, label) {
  selected = id;
  $("group-detail").hidden = false;
  $("group-detail-name").textContent = label;
  await loadDetail();
}

async function loadDetail() {
  if (!selected) return;
  const group = selected;
  await load("group-members", "listgroupmembers", [group], memberRows(group)).catch(() => {});
  await load("group-invites", "listgroupinvites", [group], inviteRows).catch(() => {});
}

/** The groups table (and the open group's detail); the groups listed. @returns {Promise<unknown>} */
export async function refreshGroups() {
  if ($("groups-section").hidden) return [];
  const items = await load("groups", "listgroups", [], groupRows);
  if (selected && !array(items).some((g) => g && g.id === selected)) {
    selected = "";
    $("group-detail").hidden = true;
  } else await loadDetail();
  return items;
}

/** A change went through: the groups view is loaded again when it shows in it. @param {string} method */
export function reloadGroupsAffected(method) {
  if (/group/.test(method)) refreshGroups().catch(() => {});
}

/** Whether the relay has groups (NIP-11 supported_nips has 29): the section shows only then. @param {boolean} on */
export function setGroupsEnabled(on) {
  $("groups-section").hidden = !on;
}

/** Binds Reload and Create invite. */
export function wireGroups() {
  $("list-groups").addEventListener("click", async () => {
    show("pending", "listgroups\u2026");
    try {
      show("ok", "listgroups: " + describe(await refreshGroups()));
    } catch (err) {
      show("error", "listgroups failed: " + message(err));
    }
  });
  $("create-invite").addEventListener("click", () => {
    if (selected) void act("creategroupinvite", text("invite-code") ? [selected, text("invite-code")] : [selected]);
  });
}
