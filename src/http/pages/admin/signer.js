// @ts-check
// The NIP-07 signer (the browser's extension) and the NIP-86 calls it authorizes (NIP-98): each
// call is a kind-27235 event with u, method and payload tags, signed by the extension, sent to the
// relay path. What shows who signs (and loads the lists) is main.js's, told through onSigner().
import { toHex } from "./nip19.js";
import { HEX64, RELAY_PATH } from "./page.js";

/** @type {string | undefined} */
let signerPubkey;
/** Signing needs WebCrypto (the NIP-98 payload hash), which browsers only offer in a secure context. */
export const canSign = !!(window.crypto && crypto.subtle);

/** Told who signs each time the extension is asked, and whether that is someone new. @type {(pk: string, changed: boolean) => void} */
let signerConnected = () => {};
/** @param {(pk: string, changed: boolean) => void} listener */
export function onSigner(listener) {
  signerConnected = listener;
}

/** Has the extension told who signs? */
export const connected = () => signerPubkey !== undefined;

function extension() {
  if (!window.nostr) throw new Error("no NIP-07 signer found: install or unlock a Nostr browser extension (nos2x, Alby, \u2026)");
  return window.nostr;
}

/** Asks the extension who signs (and tells onSigner's listener). */
export async function connectSigner() {
  const pk = await extension().getPublicKey();
  if (typeof pk !== "string" || !HEX64.test(pk)) throw new Error("the signer gave no pubkey");
  const changed = pk !== signerPubkey;
  signerPubkey = pk;
  signerConnected(pk, changed);
  return pk;
}

/** @param {Uint8Array<ArrayBuffer>} bytes */
async function sha256Hex(bytes) {
  return toHex(new Uint8Array(await crypto.subtle.digest("SHA-256", bytes)));
}

/** base64 of UTF-8 (btoa alone only takes Latin-1). @param {string} textValue */
function base64(textValue) {
  let binary = "";
  for (const b of new TextEncoder().encode(textValue)) binary += String.fromCharCode(b);
  return btoa(binary);
}

/**
 * One NIP-86 call: resolves with its result, throws with the relay's error text.
 * @param {string} method @param {unknown[]} params @returns {Promise<unknown>}
 */
async function rpcNow(method, params) {
  if (!signerPubkey) await connectSigner();
  const body = JSON.stringify({ method, params });
  const bodyBytes = new TextEncoder().encode(body);
  const unsigned = {
    kind: 27235,
    created_at: Math.floor(Date.now() / 1000),
    // The nonce: the same call twice in one second would otherwise be the same event, refused as a replay.
    tags: [
      ["u", location.origin + RELAY_PATH],
      ["method", "POST"],
      ["payload", await sha256Hex(bodyBytes)],
      ["nonce", crypto.randomUUID()],
    ],
    content: "",
  };
  const signed = await extension().signEvent(unsigned);
  if (!signed || typeof signed.sig !== "string") throw new Error("the signer did not sign the request");
  const res = await fetch(RELAY_PATH, {
    method: "POST",
    headers: { "Content-Type": "application/nostr+json+rpc", Authorization: "Nostr " + base64(JSON.stringify(signed)) },
    body: bodyBytes,
  });
  const raw = await res.text();
  /** @type {any} */
  let data;
  try {
    data = JSON.parse(raw);
  } catch {}
  const error = data && typeof data.error === "string" && data.error ? data.error : undefined;
  if (!res.ok || error || !data) throw new Error("HTTP " + res.status + ": " + (error || raw || res.statusText));
  return data.result;
}

/** Calls go one at a time: an extension asks about one signature at a time, in order. */
let calls = Promise.resolve();
/** @template T @param {() => Promise<T>} task @returns {Promise<T>} */
function queued(task) {
  const p = calls.then(task);
  calls = p.then(
    () => {},
    () => {},
  );
  return p;
}
/** @param {UnsignedEvent} unsigned @returns {Promise<SignedEvent>} */
export const signQueued = (unsigned) => queued(() => extension().signEvent(unsigned));
/** @param {string} method @param {unknown[]} params @returns {Promise<unknown>} */
export const rpc = (method, params) => queued(() => rpcNow(method, params));
