// @ts-check
// How pubkeys and events look wherever the page shows them (tables, live view, log, signer): a
// pubkey as its profile's name and picture when the relay has its kind 0, else a short npub; an
// event id with its kind, author and an excerpt. What arrives later is painted in place.
import { lookup } from "./lookup.js";
import { bech32Encode, fromHex, npub, shortBech } from "./nip19.js";
import { el, input } from "./page.js";

/** @typedef {{ name: string, picture: string | undefined }} Profile */
/** A kind 0's name and picture, if it has them (its content is JSON; anything else is ignored). @param {SignedEvent} e @returns {Profile} */
function profileOf(e) {
  /** @type {any} */
  let c;
  try {
    c = JSON.parse(e.content);
  } catch {}
  if (!c || typeof c !== "object") return { name: "", picture: undefined };
  const name = [c.display_name, c.displayName, c.name].find((v) => typeof v === "string" && v.trim());
  return { name: name ? String(name).trim().slice(0, 64) : "", picture: safePicture(c.picture) };
}

/** A picture URL the page may load: https:, http: or an inline image; anything else none. @param {unknown} url */
function safePicture(url) {
  if (typeof url !== "string") return undefined;
  const u = url.trim();
  if (/^data:image\/[a-z0-9.+-]+[;,]/i.test(u)) return u;
  try {
    const parsed = new URL(u);
    return parsed.protocol === "https:" || parsed.protocol === "http:" ? parsed.href : undefined;
  } catch {
    return undefined;
  }
}

export const profiles = lookup(
  "profiles-",
  (authors) => ({ kinds: [0], authors, limit: authors.length }),
  (e) => e.pubkey,
  profileOf,
  (pk) => {
    for (const span of document.querySelectorAll(`[data-profile="${pk}"]`)) paintAuthor(/** @type {HTMLElement} */ (span), pk);
  },
);
export const events = lookup(
  "events-",
  (ids) => ({ ids, limit: ids.length }),
  (e) => e.id,
  (e) => e,
  (id) => {
    for (const span of document.querySelectorAll(`[data-event="${id}"]`)) paintEvent(/** @type {HTMLElement} */ (span), id);
  },
);

/** A letter in a circle, in place of a picture. @param {string} label */
function initial(label) {
  const first = Array.from(label.replace(/^npub1/, ""))[0] || "?";
  return el("span", "avatar initial", first.toUpperCase());
}

/** @param {string} src @param {string} label */
function avatar(src, label) {
  const img = el("img", "avatar");
  img.alt = "";
  img.width = 24;
  img.height = 24;
  img.referrerPolicy = "no-referrer";
  img.decoding = "async";
  img.addEventListener("error", () => img.replaceWith(initial(label)), { once: true });
  img.src = src;
  return img;
}

// A picture at a URL its author chose tells that server the moderator's address and when they
// look: loaded only when asked for (remembered in this browser). Inline (data:) ones always.
const PICTURES_KEY = "bunstr-admin-pictures";
let remotePictures = localStorage.getItem(PICTURES_KEY) === "1";
/** @param {string | undefined} src */
const showable = (src) => (src && (remotePictures || src.startsWith("data:")) ? src : undefined);

/** @param {HTMLElement} span @param {string} pk */
function paintAuthor(span, pk) {
  const p = profiles.get(pk);
  const name = p ? p.name : "";
  const short = shortBech("npub", pk);
  const picture = showable(p?.picture);
  span.replaceChildren(picture ? avatar(picture, name || short) : initial(name || short));
  if (name) span.append(el("span", "name", name));
  span.append(el("code", "npub", short));
  span.title = npub(pk) + "\n" + pk;
}

/** A picture (a group's) where the page may show it (as for profiles), else the label's initial. @param {string} src @param {string} label */
export function pictureEl(src, label) {
  const shown = showable(safePicture(src));
  return shown ? avatar(shown, label) : initial(label);
}

/** A pubkey as its profile name and picture (when the relay has its kind 0), else a short npub. @param {string} pk */
export function authorEl(pk) {
  const span = el("span", "author");
  span.dataset.profile = pk;
  paintAuthor(span, pk);
  profiles.want(pk);
  return span;
}

/** @param {string} content */
export const excerpt = (content) => {
  const flat = content.replace(/\s+/g, " ").trim();
  return flat.length > 200 ? flat.slice(0, 200) + "\u2026" : flat || "(empty)";
};

/** @param {HTMLElement} span @param {string} id */
function paintEvent(span, id) {
  const e = events.get(id);
  span.replaceChildren(el("code", "note", shortBech("note", id)));
  span.title = bech32Encode("note", fromHex(id)) + "\n" + id;
  if (e) span.append(" kind " + e.kind + " by ", authorEl(e.pubkey), el("span", "excerpt", excerpt(e.content)));
  else if (e === null) span.append(el("span", "muted", " (not on this relay)"));
}

/** An event id, with its author and an excerpt when the relay has it. @param {string} id */
export function eventEl(id) {
  const span = el("span", "event");
  span.dataset.event = id;
  paintEvent(span, id);
  events.want(id);
  return span;
}

/** Kind names: the status page's too ("1 · note"). */
export { kindText } from "../shared/kinds.js";

/** @param {number} seconds */
export function when(seconds) {
  const d = new Date(seconds * 1000);
  return d.toDateString() === new Date().toDateString() ? d.toLocaleTimeString() : d.toLocaleString();
}

/** The "Load profile pictures" box: remembered in this browser; every author shown is painted again. */
export function wirePictureToggle() {
  input("show-pictures").checked = remotePictures;
  input("show-pictures").addEventListener("change", () => {
    remotePictures = input("show-pictures").checked;
    localStorage.setItem(PICTURES_KEY, remotePictures ? "1" : "0");
    for (const span of document.querySelectorAll("[data-profile]")) {
      const el = /** @type {HTMLElement} */ (span);
      paintAuthor(el, el.dataset.profile || "");
    }
  });
}
