// @ts-check
// The console's views as tabs (the WAI-ARIA tabs pattern): one panel shows at a time, chosen by its
// tab or by the URL's #hash (a choice is a history entry: the back button and a reload keep it);
// the arrow keys, Home and End move between the tabs. A view that is off on this relay (groups,
// admission: their panels are `hidden`) hides its tab too. Each tab's label counts what its view
// holds, kept up to date as the tables fill (a view's own modules know nothing of tabs).
import { $ } from "./page.js";

/** The tabs the page shows now (a hidden one is skipped by the keys). */
const tabs = () => /** @type {HTMLButtonElement[]} */ ([...document.querySelectorAll('[role="tab"]')]).filter((t) => !t.hidden);
/** @param {HTMLElement} tab */
const panelOf = (tab) => $(tab.getAttribute("aria-controls") ?? "");
/** @param {string} name */
const tabNamed = (name) => /** @type {HTMLButtonElement | null} */ (document.querySelector(`[role="tab"][data-tab="${CSS.escape(name)}"]`));

/**
 * A view's URL hash: "#/live", "#/log". Never an element's id: a hash that names an element (the
 * table #log, the section #live) makes the browser scroll the page to it when the page opens.
 * @param {string} name
 */
const hashOf = (name) => "#/" + name;

/** The view the URL asks for (it may show later: the groups tab waits for NIP-11). */
let wanted = "live";

/** Shows one view. @param {string} name @param {{ push?: boolean, focus?: boolean }} [how] */
export function selectTab(name, how = {}) {
  const tab = tabNamed(name);
  if (!tab || tab.hidden) return false;
  for (const t of document.querySelectorAll('[role="tab"]')) {
    const on = t === tab;
    t.setAttribute("aria-selected", String(on));
    /** @type {HTMLElement} */ (t).tabIndex = on ? 0 : -1;
    panelOf(/** @type {HTMLElement} */ (t)).classList.toggle("current", on);
  }
  document.body.dataset.tab = name;
  if (how.push && location.hash !== hashOf(name)) history.pushState(null, "", hashOf(name));
  if (how.focus) tab.focus();
  return true;
}

/** The view named in the URL's #hash (#/name; a bare #name as well), else the live events. */
function fromHash() {
  const hash = decodeURIComponent(location.hash.slice(1));
  wanted = hash.replace(/^\//, "") || "live";
  if (!selectTab(wanted)) selectTab("live");
  else if (hash && !hash.startsWith("/")) history.replaceState(null, "", hashOf(wanted));
}

/** Rows a table holds, or undefined while it is not loaded. @param {string} id */
function rows(id) {
  const table = document.getElementById(id);
  if (!table || (table.dataset.state !== "ok" && id !== "events" && id !== "log")) return undefined;
  return table.querySelectorAll("tbody tr[data-key], tbody tr[data-id], tbody tr[data-method]").length;
}

/** Tab -> the tables its count adds up. @type {Record<string, string[]>} */
const COUNTS = {
  live: ["events"],
  reports: ["moderation-events"],
  pubkeys: ["banned-pubkeys", "allowed-pubkeys"],
  events: ["banned-events"],
  kinds: ["allowed-kinds", "disallowed-kinds"],
  ips: ["blocked-ips"],
  admission: ["admissions"],
  groups: ["groups"],
  log: ["log"],
};

function count() {
  for (const [name, ids] of Object.entries(COUNTS)) {
    const each = ids.map(rows);
    const span = document.getElementById(`tab-${name}-count`);
    if (!span) continue;
    if (each.every((n) => n === undefined)) {
      span.textContent = "";
      delete span.dataset.count;
    } else {
      const n = each.reduce((/** @type {number} */ a, b) => a + (b ?? 0), 0);
      span.textContent = String(n);
      span.dataset.count = String(n);
    }
  }
}

/** Binds the tabs: clicks, keys, the hash, the views turned on or off, the counts. */
export function wireTabs() {
  const list = /** @type {HTMLElement} */ (document.querySelector('[role="tablist"]'));
  for (const t of document.querySelectorAll('[role="tab"]')) {
    const tab = /** @type {HTMLButtonElement} */ (t);
    tab.hidden = panelOf(tab).hidden;
    tab.addEventListener("click", () => {
      wanted = tab.dataset.tab ?? "live";
      selectTab(wanted, { push: true });
    });
  }
  list.addEventListener("keydown", (ev) => {
    const all = tabs();
    const at = all.indexOf(/** @type {HTMLButtonElement} */ (document.activeElement));
    if (at < 0) return;
    const to = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: all.length - 1 }[ev.key];
    if (to === undefined) return;
    ev.preventDefault();
    const next = all[(to + all.length) % all.length];
    if (next) {
      wanted = next.dataset.tab ?? "live";
      selectTab(wanted, { push: true, focus: true });
    }
  });
  addEventListener("popstate", fromHash);
  addEventListener("hashchange", fromHash);
  // A panel turned on or off (groups.js, access.js set `hidden`): its tab follows; the view the URL
  // asked for shows once it can.
  new MutationObserver(() => {
    for (const t of document.querySelectorAll('[role="tab"]')) {
      const tab = /** @type {HTMLButtonElement} */ (t);
      // Only a change: setting the same value is a mutation too, and would call this again.
      if (tab.hidden !== panelOf(tab).hidden) tab.hidden = panelOf(tab).hidden;
    }
    const current = tabNamed(document.body.dataset.tab ?? "");
    if (document.body.dataset.tab !== wanted && selectTab(wanted)) return;
    if (!current || current.hidden) selectTab("live");
  }).observe(document.body, { attributes: true, attributeFilter: ["hidden"], subtree: true, childList: false });
  // The counts: again shortly after the tables change (many rows arrive at once).
  let pending = false;
  new MutationObserver(() => {
    if (pending) return;
    pending = true;
    setTimeout(() => {
      pending = false;
      count();
    }, 50);
  }).observe(document.body, { childList: true, subtree: true, attributes: true, attributeFilter: ["data-state"] });
  fromHash();
  count();
}
