// @ts-check
// Admission (issue 33; bunstr's NIP-86 methods, shown while an admission model is on: NIP-11
// limitation.restricted_writes): who may write and why. One table of admitted pubkeys with their
// bases as badges and each basis's evidence (paid: sats, invoice, when; verified: the NIP-05
// address, last check, until when; trusted: the follow path from a seed, as names; member: who
// invited; manual: which allow list), a filter and counts per basis, Revoke per basis; an Admit
// form (allowpubkey, or addmember "as member"); the recent invoices (with pay on) and the NIP-43
// members with Remove and Create invite (with membership on).
import { act, describe } from "./log.js";
import { hexOf } from "./nip19.js";
import { $, el, HEX64, input, message, placeholder, show, text } from "./page.js";
import { authorEl, when } from "./render.js";
import { rpc } from "./signer.js";
import { fillTable } from "./tables.js";

const BASES = ["paid", "verified", "trusted", "member", "manual"];
/** listadmissions answers at most this many a call (http/admin-access.ts ADMISSIONS_PAGE). */
const PAGE = 500;
/** What each allow list is called in the table (manual evidence's `lists`). @type {Record<string, string>} */
const LISTS = { allowpubkey: "allowed here (NIP-86)", pubkey_allowlist: "config allow list", admin: "admin", relay: "the relay's key" };

/** @typedef {{ basis: string, since: number | null, until: number | null, evidence: any }} Basis */
/** @typedef {{ pubkey: string, bases: Basis[] }} Admitted */

/** Every admitted pubkey loaded, by pubkey; the bases each page came full (more exist). */
/** @type {Map<string, Admitted>} */
let admitted = new Map();
/** @type {Set<string>} */
let full = new Set();
let pay = false;
let membership = false;
let loads = 0;

/** @param {unknown} items @returns {any[]} */
const array = (items) => (Array.isArray(items) ? items : []);

/** @param {string} id @param {"loading" | "ok" | "error"} state @param {unknown} [err] */
function tableState(id, state, err) {
  const table = /** @type {HTMLTableElement} */ ($(id));
  table.dataset.state = state;
  if (state === "ok") table.dataset.loaded = String(++loads);
  if (state === "error") table.tBodies[0]?.replaceChildren(placeholder(table, "Not loaded: " + message(err), "empty error"));
}

/** A pubkey (as its profile) or plain text, in a span. @param {(Node | string)[]} parts */
function line(...parts) {
  const span = el("span", "evidence");
  span.append(...parts);
  return span;
}
/** @param {string} hash */
const hashEl = (hash) => {
  const c = el("code", "note", hash.slice(0, 12) + "\u2026");
  c.title = hash;
  return c;
};

/** One basis's evidence in words. @param {Basis} b @returns {Node} */
function evidenceEl(b) {
  const e = b.evidence && typeof b.evidence === "object" ? b.evidence : {};
  switch (b.basis) {
    case "paid":
      return line(
        `paid ${Number(e.amount_sats).toLocaleString("en-US")} sats, invoice `,
        hashEl(String(e.payment_hash ?? "")),
        Number.isFinite(e.paid_at) ? ", " + when(e.paid_at) : "",
      );
    case "verified": {
      const expired = b.until !== null && b.until * 1000 < Date.now();
      const state = expired ? "expired" : "verified";
      const until = b.until !== null ? ` until ${when(b.until)}` : "";
      const checked = Number.isFinite(e.checked_at) ? `, last check ${when(e.checked_at)}` : "";
      return line(el("span", "address", String(e.address ?? "")), ` ${state}${until}${checked}`);
    }
    case "trusted": {
      const path = array(e.path).filter((p) => HEX64.test(String(p)));
      const parts = /** @type {(Node | string)[]} */ (["follows: "]);
      path.forEach((pk, i) => parts.push(...(i > 0 ? [" \u2192 "] : []), authorEl(pk)));
      return line(...parts, ` (depth ${Number(e.depth) || 0})`);
    }
    case "member":
      return HEX64.test(String(e.invited_by))
        ? line(e.via === "admin" ? "added by " : "invited by ", authorEl(e.invited_by))
        : line("member");
    case "manual":
      return line(
        array(e.lists)
          .map((l) => LISTS[String(l)] ?? String(l))
          .join(", "),
      );
    default:
      return line(JSON.stringify(b.evidence));
  }
}

/** What undoes one basis: revokeadmission, or unallowpubkey for the admin allow list; trusted: nothing (ban instead). @param {string} pk @param {Basis} b @returns {import("./tables.js").RowAction[]} */
function undo(pk, b) {
  if (b.basis === "paid" || b.basis === "verified" || b.basis === "member")
    return [["Revoke " + b.basis, "revokeadmission", [pk, b.basis, text("admit-reason")]]];
  if (b.basis === "manual" && array(b.evidence?.lists).includes("allowpubkey")) return [["Unallow", "unallowpubkey", [pk]]];
  return [];
}

/** @param {Admitted} a */
function admissionRow(a) {
  const badges = el("span", "badges");
  const evidence = el("span", "evidences");
  for (const b of a.bases) {
    const badge = el("span", "badge " + b.basis, b.basis);
    badge.dataset.basis = b.basis;
    badges.append(badge);
    evidence.append(evidenceEl(b));
  }
  const since = a.bases.map((b) => b.since).filter((s) => typeof s === "number");
  return {
    key: a.pubkey,
    cells: [authorEl(a.pubkey), badges, evidence, since.length > 0 ? when(Math.min(.../** @type {number[]} */ (since))) : ""],
    actions: a.bases.flatMap((b) => undo(a.pubkey, b)),
  };
}

/** The table, filtered by the basis chosen; counts per basis. */
function draw() {
  const basis = /** @type {HTMLSelectElement} */ ($("access-filter")).value;
  const shown = [...admitted.values()].filter((a) => !basis || a.bases.some((b) => b.basis === basis));
  fillTable("admissions", shown.map(admissionRow));
  const counts = $("access-counts");
  counts.replaceChildren();
  for (const b of BASES) {
    const n = [...admitted.values()].filter((a) => a.bases.some((x) => x.basis === b)).length;
    const span = el("span", "badge " + b, `${b} ${n}${full.has(b) ? "+" : ""}`);
    span.dataset.basis = b;
    span.dataset.count = String(n);
    counts.append(span, " ");
  }
}

/** Adds one listadmissions answer to `into`. @param {Map<string, Admitted>} into @param {unknown} items */
function merge(into, items) {
  for (const a of array(items)) {
    if (!a || !HEX64.test(String(a.pubkey))) continue;
    /** @type {Admitted} */
    const entry = into.get(a.pubkey) ?? { pubkey: a.pubkey, bases: [] };
    for (const b of array(a.bases)) if (b && typeof b.basis === "string") entry.bases.push(b);
    into.set(a.pubkey, entry);
  }
}

/** The admissions: the stored ones (paid, verified, member), the web of trust's and the allow lists, first page of each. */
async function loadAdmissions() {
  tableState("admissions", "loading");
  try {
    /** @type {Map<string, Admitted>} */
    const next = new Map();
    /** @type {Set<string>} */
    const nextFull = new Set();
    for (const basis of ["", "trusted", "manual"]) {
      const items = array(await rpc("listadmissions", [basis, 0]));
      if (items.length >= PAGE) nextFull.add(basis || "stored");
      merge(next, items);
    }
    admitted = next;
    full = nextFull;
    draw();
    tableState("admissions", "ok");
    return [...admitted.values()];
  } catch (err) {
    tableState("admissions", "error", err);
    throw err;
  }
}

/** @param {unknown} items */
const invoiceRows = (items) =>
  array(items)
    .filter((i) => i && HEX64.test(String(i.payment_hash)) && HEX64.test(String(i.pubkey)))
    .map((i) => ({
      key: i.payment_hash,
      cells: [
        when(i.created_at),
        authorEl(i.pubkey),
        `${Number(i.amount_sats).toLocaleString("en-US")} sats${i.purpose === "topup" ? " (top-up)" : ""}`,
        i.status === "paid" && Number.isFinite(i.paid_at) ? "paid " + when(i.paid_at) : String(i.status),
        hashEl(i.payment_hash),
      ],
      actions: [],
    }));

/** @param {unknown} items */
const memberRows = (items) =>
  array(items)
    .filter((m) => m && HEX64.test(String(m.pubkey)))
    .map((m) => ({
      key: m.pubkey,
      cells: [
        authorEl(m.pubkey),
        HEX64.test(String(m.evidence?.invited_by)) ? authorEl(m.evidence.invited_by) : "",
        Number.isFinite(m.since) ? when(m.since) : "",
      ],
      /** @type {import("./tables.js").RowAction[]} */
      actions: [["Remove", "removemember", [m.pubkey, text("admit-reason")]]],
    }));

/** Loads a table from one call. @param {string} id @param {string} method @param {(items: unknown) => import("./tables.js").Row[]} rows */
async function loadTable(id, method, rows) {
  tableState(id, "loading");
  try {
    const items = await rpc(method, []);
    fillTable(id, rows(items));
    tableState(id, "ok");
    return items;
  } catch (err) {
    tableState(id, "error", err);
    throw err;
  }
}

/** The whole view, when it shows: admissions, then invoices and members where their model is on. */
export async function refreshAccess() {
  if ($("access-section").hidden) return [];
  let listed;
  try {
    listed = await loadAdmissions();
  } catch (err) {
    // Writes restricted by an allow list alone: no model, no view.
    if (/no admission model is on/.test(message(err))) $("access-section").hidden = true;
    throw err;
  }
  if (pay) await loadTable("invoices", "listinvoices", invoiceRows).catch(() => {});
  if (membership) await loadTable("members", "listmembers", memberRows).catch(() => {});
  return listed;
}

/** Which changes show here. */
const AFFECTS = /^(revokeadmission|allowpubkey|unallowpubkey|banpubkey|addmember|removemember)$/;
/** A change went through: the view is loaded again when it shows in it. @param {string} method */
export function reloadAccessAffected(method) {
  if (AFFECTS.test(method)) refreshAccess().catch(() => {});
}

/**
 * From NIP-11: the view shows while writes are restricted (an admission model, or an allow list
 * alone: then listadmissions says no model is on and the view hides), the invoices with pay, the
 * members with NIP-43.
 * @param {any} info
 */
export function setAccessEnabled(info) {
  const l = info && typeof info.limitation === "object" && info.limitation ? info.limitation : {};
  pay = l.payment_required === true;
  membership = Array.isArray(info?.supported_nips) && info.supported_nips.includes(43);
  $("access-section").hidden = l.restricted_writes !== true;
  $("invoices-box").hidden = !pay;
  $("members-box").hidden = !membership;
  $("admit-member-box").hidden = !membership;
}

/** Binds Reload, the filter, Admit and Create invite. */
export function wireAccess() {
  $("list-admissions").addEventListener("click", async () => {
    show("pending", "listadmissions\u2026");
    try {
      show("ok", "listadmissions: " + describe(await refreshAccess()));
    } catch (err) {
      show("error", "listadmissions failed: " + message(err));
    }
  });
  $("access-filter").addEventListener("change", draw);
  $("admit").addEventListener("click", () => {
    let pk;
    try {
      pk = hexOf(text("admit-input"), "npub");
    } catch (err) {
      return show("error", "admit: " + message(err));
    }
    const asMember = membership && input("admit-member").checked;
    void act(asMember ? "addmember" : "allowpubkey", [pk, text("admit-reason")]);
  });
  $("create-member-invite").addEventListener("click", async () => {
    show("pending", "createinvitecode\u2026");
    try {
      const made = /** @type {any} */ (await rpc("createinvitecode", []));
      const code = $("member-invite");
      code.textContent = String(made?.code ?? "");
      code.title = Number.isFinite(made?.expires_at) ? "expires " + when(made.expires_at) : "";
      show("ok", "createinvitecode: " + describe(made));
    } catch (err) {
      show("error", "createinvitecode failed: " + message(err));
    }
  });
}
