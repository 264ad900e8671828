// @ts-check
// The relay's own websocket (same origin): the live view's subscription and the look-ups of
// profiles and events go over it. Reconnects with backoff and asks again for what is open;
// answers the relay's NIP-42 challenge with the extension when a read needs it.
import { $, HEX64, message, RELAY_PATH } from "./page.js";
import { canSign, signQueued } from "./signer.js";

const WS_URL = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + RELAY_PATH;

/**
 * @typedef {{ filters: Record<string, unknown>[], onEvent: (e: SignedEvent) => void,
 *   onEose?: () => void, onClosed?: (why: string) => void }} Sub
 */
/** @type {Map<string, Sub>} */
const subs = new Map();
/** @type {WebSocket | undefined} */
let socket;
let retryMs = 1000;

/** @param {string} state @param {string} textValue */
function liveState(state, textValue) {
  const s = $("live-state");
  s.dataset.state = state;
  s.textContent = textValue;
}

/** @param {unknown[]} frame */
function send(frame) {
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(frame));
}

/** @param {any} e @returns {e is SignedEvent} */
const isEvent = (e) =>
  !!e &&
  typeof e.id === "string" &&
  HEX64.test(e.id) &&
  typeof e.pubkey === "string" &&
  HEX64.test(e.pubkey) &&
  Number.isInteger(e.kind) &&
  Number.isInteger(e.created_at) &&
  typeof e.content === "string" &&
  Array.isArray(e.tags);

/** @param {unknown} data */
function onFrame(data) {
  /** @type {unknown} */
  let msg;
  try {
    msg = JSON.parse(String(data));
  } catch {
    return;
  }
  if (!Array.isArray(msg)) return;
  const [type, id, payload] = msg;
  const sub = typeof id === "string" ? subs.get(id) : undefined;
  if (type === "EVENT" && sub && isEvent(payload)) sub.onEvent(payload);
  else if (type === "EOSE" && sub) sub.onEose?.();
  else if (type === "CLOSED" && sub && typeof id === "string") {
    const why = String(payload ?? "");
    // A relay that wants to know who reads (NIP-42): sign its challenge, then ask again.
    if (why.startsWith("auth-required:") && !auth.done && auth.challenge && canSign && window.nostr) {
      auth.waiting.add(id);
      void authenticate();
      return;
    }
    subs.delete(id);
    sub.onClosed?.(why);
  } else if (type === "AUTH" && typeof id === "string") auth.challenge = id;
  else if (type === "OK" && auth.eventId && id === auth.eventId) authAnswered(payload === true, String(msg[3] ?? ""));
  else if (type === "NOTICE") $("filter-note").textContent = "The relay says: " + String(id);
}

/** NIP-42 on this connection: the relay's challenge, whether we answered it, who waits for it. */
const auth = {
  challenge: "",
  done: false,
  pending: false,
  eventId: "",
  /** @type {Set<string>} */
  waiting: new Set(),
};

/** Signs the relay's challenge (kind 22242) with the NIP-07 extension and sends it. */
async function authenticate() {
  if (auth.pending) return;
  auth.pending = true;
  try {
    const unsigned = {
      kind: 22242,
      created_at: Math.floor(Date.now() / 1000),
      tags: [
        ["relay", WS_URL],
        ["challenge", auth.challenge],
      ],
      content: "",
    };
    const signed = await signQueued(unsigned);
    if (!signed || typeof signed.id !== "string") throw new Error("the signer did not sign");
    auth.eventId = signed.id;
    send(["AUTH", signed]);
  } catch (err) {
    authAnswered(false, message(err));
  }
}

/** @param {boolean} ok @param {string} why */
function authAnswered(ok, why) {
  auth.pending = false;
  auth.eventId = "";
  auth.done = ok;
  if (ok) liveState("live", "live (authenticated)");
  for (const id of auth.waiting) {
    const sub = subs.get(id);
    if (sub && ok) send(["REQ", id, ...sub.filters]);
    else if (sub) {
      subs.delete(id);
      sub.onClosed?.("auth-required: AUTH failed: " + why);
    }
  }
  auth.waiting.clear();
}

export function openSocket() {
  /** @type {WebSocket} */
  let ws;
  try {
    ws = new WebSocket(WS_URL);
  } catch (err) {
    liveState("error", "cannot connect to " + WS_URL + ": " + message(err));
    return;
  }
  socket = ws;
  ws.onopen = () => {
    retryMs = 1000;
    Object.assign(auth, { challenge: "", done: false, pending: false, eventId: "" });
    auth.waiting.clear();
    liveState("live", "live");
    for (const [id, s] of subs) ws.send(JSON.stringify(["REQ", id, ...s.filters]));
  };
  ws.onmessage = (m) => onFrame(m.data);
  ws.onclose = () => {
    if (socket === ws) socket = undefined;
    liveState("closed", "disconnected from " + WS_URL + "; reconnecting\u2026");
    setTimeout(openSocket, retryMs);
    retryMs = Math.min(retryMs * 2, 30_000);
  };
}

/** @param {string} id @param {Sub} sub */
export function subscribe(id, sub) {
  subs.set(id, sub);
  send(["REQ", id, ...sub.filters]);
}

/** @param {string} id */
export function unsubscribe(id) {
  if (subs.delete(id)) send(["CLOSE", id]);
}
