// @ts-check
// The live view: the relay's recent events (the filter form's kinds, author and words), newest
// first, new ones at the top as they arrive, each with buttons to ban the event or its author.
import { confirmBan } from "./confirm.js";
import { act } from "./log.js";
import { hexOf, shortBech } from "./nip19.js";
import { $, el, HEX64, input, message, placeholder, text } from "./page.js";
import { authorEl, events, excerpt, kindText, profiles, when } from "./render.js";
import { subscribe, unsubscribe } from "./socket.js";
import { lockUnlessAdmin } from "./who.js";

/** Stored events the live view asks for; rows it keeps (new ones push the oldest out). */
const LIVE_LIMIT = 50;
const MAX_ROWS = 100;

let liveN = 0;
/** @type {string | undefined} */
let liveSub;
/** Text matched in the page when the relay has no NIP-50 search. */
let clientText = "";
let searchable = false;
/** Does the relay search (NIP-50)? Its NIP-11 document tells. @param {boolean} on */
export function setSearchable(on) {
  searchable = on;
}
/** @type {Set<string>} */
const shown = new Set();
const liveBody = /** @type {HTMLTableSectionElement} */ (/** @type {HTMLTableElement} */ ($("events")).tBodies[0]);

function liveFilter() {
  /** @type {Record<string, unknown>} */
  const f = { limit: LIVE_LIMIT };
  const kinds = text("filter-kinds");
  if (kinds)
    f.kinds = kinds
      .split(/[\s,]+/)
      .filter(Boolean)
      .map((k) => {
        if (!/^[0-9]{1,5}$/.test(k) || Number(k) > 65535) throw new Error("kinds: enter numbers such as 1, 7");
        return Number(k);
      });
  const author = text("filter-author");
  if (author) f.authors = [hexOf(author, "npub")];
  const words = text("filter-text");
  clientText = "";
  if (words && searchable) f.search = words;
  else if (words) clientText = words.toLowerCase();
  return f;
}

/** (Re)starts the live subscription with the filter form's values. */
export function startLive() {
  /** @type {Record<string, unknown>} */
  let f;
  try {
    f = liveFilter();
  } catch (err) {
    $("filter-note").textContent = message(err);
    return;
  }
  if (liveSub) unsubscribe(liveSub);
  shown.clear();
  liveBody.replaceChildren();
  const id = "live-" + ++liveN;
  liveSub = id;
  $("events").dataset.eose = "";
  $("filter-note").textContent =
    "The newest " +
    LIVE_LIMIT +
    " events" +
    (f.search ? " the relay finds for your words (NIP-50)" : "") +
    (clientText ? ", then your words matched in this page (the relay has no NIP-50 search)" : "") +
    "; new ones appear at the top as they arrive.";
  subscribe(id, {
    filters: [f],
    onEvent: addLive,
    onEose: () => {
      $("events").dataset.eose = String(liveN);
      if (liveBody.rows.length === 0)
        liveBody.append(placeholder(/** @type {HTMLTableElement} */ ($("events")), "No event matches.", "empty"));
    },
    onClosed: (why) => ($("filter-note").textContent = "The relay ended the live view: " + why),
  });
}

/** @param {SignedEvent} e */
function addLive(e) {
  if (shown.has(e.id)) return;
  if (e.kind === 0) profiles.offer(e);
  if (clientText && !e.content.toLowerCase().includes(clientText)) return;
  shown.add(e.id);
  liveBody.querySelector("tr.empty")?.remove();
  const row = eventRow(e);
  // Newest first, whatever order they come in (a NIP-50 search answers by relevance); of the
  // same second, the one that came last goes first (a live event above its stored neighbours).
  let before = null;
  for (const r of liveBody.rows)
    if (Number(r.dataset.created) <= e.created_at) {
      before = r;
      break;
    }
  liveBody.insertBefore(row, before);
  while (liveBody.rows.length > MAX_ROWS) {
    const last = liveBody.rows[liveBody.rows.length - 1];
    if (last?.dataset.id) shown.delete(last.dataset.id);
    last?.remove();
  }
}

/** @param {SignedEvent} e */
function eventRow(e) {
  const tr = el("tr");
  tr.dataset.id = e.id;
  tr.dataset.pubkey = e.pubkey;
  tr.dataset.kind = String(e.kind);
  tr.dataset.created = String(e.created_at);
  const time = el("td", "time", when(e.created_at));
  time.title = new Date(e.created_at * 1000).toISOString();
  const author = el("td");
  author.append(authorEl(e.pubkey));
  const content = el("td", "content");
  const note = el("code", "note", shortBech("note", e.id));
  note.title = e.id;
  content.append(el("span", "excerpt", excerpt(e.content)), " ", note);
  const actions = el("td", "actions");
  const outcome = el("span", "outcome");
  const reasonNow = () => text("ban-reason");
  const banEvent = el("button", "small ban-event", "Ban event");
  const banAuthor = el("button", "small ban-author", "Ban author");
  for (const b of [banEvent, banAuthor]) {
    b.type = "button";
    lockUnlessAdmin(b);
  }
  // The row's mark follows from the change (markBans), whichever view made it.
  banEvent.addEventListener("click", async () => {
    if (!(await confirmBan("banevent", e.id))) return;
    // Kept for the log: the relay hides a banned event, so a look-up after would find nothing.
    events.offer(e);
    const error = await act("banevent", [e.id, reasonNow()]);
    if (error) outcome.textContent = "ban failed: " + error;
  });
  banAuthor.addEventListener("click", async () => {
    if (!(await confirmBan("banpubkey", e.pubkey))) return;
    const error = await act("banpubkey", [e.pubkey, reasonNow()]);
    if (error) outcome.textContent = "ban failed: " + error;
  });
  actions.append(banEvent, banAuthor, outcome);
  tr.append(time, el("td", "kind", kindText(e.kind)), author, content, actions);
  return tr;
}

/** What a ban of each kind marks a row with: its flag, its button, and what the row then says. */
const MARKS = {
  event: { button: "button.ban-event", says: "event banned: hidden from the relay and kept out" },
  author: { button: "button.ban-author", says: "author banned: their events hidden, new ones refused" },
};

/**
 * A ban or its undoing went through (from this view, a form or a list): the rows it touches are
 * marked banned, or plain again with their buttons back (an Unban from the Pubkeys tab used to
 * leave the author's rows struck through until a reload).
 * @param {string} method @param {unknown[]} args
 */
export function markBans(method, args) {
  const key = String(args[0] ?? "");
  const change = /** @type {Record<string, ["event" | "author", boolean]>} */ ({
    banevent: ["event", true],
    allowevent: ["event", false],
    banpubkey: ["author", true],
    unbanpubkey: ["author", false],
  })[method];
  if (!change || !HEX64.test(key)) return;
  const [what, on] = change;
  for (const node of liveBody.querySelectorAll(what === "event" ? `tr[data-id="${key}"]` : `tr[data-pubkey="${key}"]`)) {
    const r = /** @type {HTMLTableRowElement} */ (node);
    if (on) r.dataset[what] = "banned";
    else delete r.dataset[what];
    const button = /** @type {HTMLButtonElement | null} */ (r.querySelector(MARKS[what].button));
    if (button) button.disabled = on;
    const marks = /** @type {("event" | "author")[]} */ (["event", "author"]).filter((m) => r.dataset[m] === "banned");
    r.classList.toggle("banned", marks.length > 0);
    const o = r.querySelector(".outcome");
    if (o) o.textContent = marks.map((m) => MARKS[m].says).join("; ");
  }
}

/** Binds the filter form: Apply and Clear start the live view again. */
export function wireLive() {
  $("filter").addEventListener("submit", (ev) => {
    ev.preventDefault();
    startLive();
  });
  $("filter-clear").addEventListener("click", () => {
    for (const f of ["filter-kinds", "filter-author", "filter-text"]) input(f).value = "";
    startLive();
  });
}
