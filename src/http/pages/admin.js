// @ts-check
// The admin page's script (admin.html), served as it is: plain JavaScript for any current browser,
// type-checked through JSDoc (tsconfig.json here). One function scope: a global named like
// window.nostr would replace the extension's.
//
// A moderation console: the NIP-86 lists as tables (loaded once the NIP-07 signer is connected,
// reloaded after each change), a live view of the relay's recent events with one-click bans, and a
// log of what each action did. Events and profiles are read from the relay itself over its
// websocket (same origin). Everything that comes from an event is untrusted: it goes into the page
// as text (textContent) only, and a picture only from an https:, http: or data:image/ URL.
(() => {
  /** The relay path: NIP-86 calls and the websocket go there (the page sets it on <body>). */
  const RELAY_PATH = document.body.dataset.relayPath || "/";
  const WS_URL = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + RELAY_PATH;
  /** Stored events the live view asks for; rows it keeps (new ones push the oldest out). */
  const LIVE_LIMIT = 50;
  const MAX_ROWS = 100;
  const LOG_MAX = 50;
  /** Profiles (and events) kept per page: enough for every row on it many times over. */
  const LOOKUP_CAP = 5000;
  const HEX64 = /^[0-9a-f]{64}$/;

  /** The element with this id (the page has them all). @param {string} id */
  const $ = (id) => {
    const el = document.getElementById(id);
    if (!el) throw new Error("the page has no #" + id);
    return el;
  };
  /** An input of the page. @param {string} id */
  const input = (id) => /** @type {HTMLInputElement} */ ($(id));
  /** An error's message, or what was thrown as text. @param {unknown} err */
  const message = (err) => {
    const m = err && /** @type {{ message?: unknown }} */ (err).message;
    return m ? String(m) : String(err);
  };
  /**
   * A new element with a class and text (textContent: never parsed as HTML).
   * @template {keyof HTMLElementTagNameMap} K
   * @param {K} tag @param {string} [cls] @param {string} [textValue]
   * @returns {HTMLElementTagNameMap[K]}
   */
  const el = (tag, cls, textValue) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (textValue !== undefined) e.textContent = textValue;
    return e;
  };
  const result = $("result");
  let seq = 0;

  /** @param {"pending" | "ok" | "error"} state @param {string} text */
  function show(state, text) {
    result.dataset.state = state;
    result.dataset.seq = String(++seq);
    result.textContent = text;
  }

  // ---- NIP-19: a tiny bech32 codec (npub / note), checksum verified ----------------------------
  const CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l";
  const GENERATOR = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3];

  /** @param {number[]} values */
  function polymod(values) {
    let chk = 1;
    for (const v of values) {
      const top = chk >>> 25;
      chk = ((chk & 0x1ffffff) << 5) ^ v;
      GENERATOR.forEach((g, i) => {
        if ((top >>> i) & 1) chk ^= g;
      });
    }
    return chk;
  }

  /** @param {string} hrp */
  function hrpExpand(hrp) {
    const expanded = [];
    for (const ch of hrp) expanded.push(ch.charCodeAt(0) >>> 5);
    expanded.push(0);
    for (const ch of hrp) expanded.push(ch.charCodeAt(0) & 31);
    return expanded;
  }

  /** @param {string} text @returns {{ hrp: string, bytes: number[] }} */
  function bech32Decode(text) {
    if (text !== text.toLowerCase() && text !== text.toUpperCase()) throw new Error("mixed case");
    const s = text.toLowerCase();
    const sep = s.lastIndexOf("1");
    if (sep < 1 || sep + 7 > s.length) throw new Error("no separator");
    const hrp = s.slice(0, sep);
    const data = [];
    for (const ch of s.slice(sep + 1)) {
      const d = CHARSET.indexOf(ch);
      if (d < 0) throw new Error("invalid character " + ch);
      data.push(d);
    }
    if (polymod(hrpExpand(hrp).concat(data)) !== 1) throw new Error("bad checksum");
    // 5-bit words -> bytes; leftover bits must be zero padding.
    let acc = 0,
      bits = 0;
    const bytes = [];
    for (const w of data.slice(0, -6)) {
      acc = (acc << 5) | w;
      bits += 5;
      while (bits >= 8) {
        bits -= 8;
        bytes.push((acc >>> bits) & 255);
      }
      acc &= (1 << bits) - 1;
    }
    if (bits >= 5 || acc !== 0) throw new Error("bad padding");
    return { hrp, bytes };
  }

  /** @param {string} hrp @param {number[]} bytes */
  function bech32Encode(hrp, bytes) {
    const words = [];
    let acc = 0,
      bits = 0;
    for (const b of bytes) {
      acc = (acc << 8) | b;
      bits += 8;
      while (bits >= 5) {
        bits -= 5;
        words.push((acc >>> bits) & 31);
      }
      acc &= (1 << bits) - 1;
    }
    if (bits > 0) words.push((acc << (5 - bits)) & 31);
    const mod = polymod(hrpExpand(hrp).concat(words, [0, 0, 0, 0, 0, 0])) ^ 1;
    for (let i = 0; i < 6; i++) words.push((mod >>> (5 * (5 - i))) & 31);
    return hrp + "1" + words.map((w) => CHARSET.charAt(w)).join("");
  }

  /** @param {Iterable<number>} bytes */
  const toHex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  /** @param {string} hex */
  const fromHex = (hex) => Array.from({ length: hex.length / 2 }, (_, i) => parseInt(hex.slice(2 * i, 2 * i + 2), 16));
  /** @param {string} hex */
  const npub = (hex) => bech32Encode("npub", fromHex(hex));
  /** "npub1abcdefg…uvwxyz": enough to tell two apart at a glance. @param {string} hrp @param {string} hex */
  const shortBech = (hrp, hex) => {
    const b = bech32Encode(hrp, fromHex(hex));
    return b.slice(0, hrp.length + 8) + "\u2026" + b.slice(-6);
  };

  /**
   * 64 hex characters, or a bech32 string with this prefix (npub, note), as lowercase hex.
   * @param {string} v @param {string} prefix
   */
  function hexOf(v, prefix) {
    if (/^[0-9a-fA-F]{64}$/.test(v)) return v.toLowerCase();
    if (v.toLowerCase().startsWith(prefix + "1")) {
      let decoded;
      try {
        decoded = bech32Decode(v);
      } catch (err) {
        throw new Error("not a valid " + prefix + ": " + message(err));
      }
      if (decoded.hrp !== prefix || decoded.bytes.length !== 32) throw new Error("not a valid " + prefix);
      return toHex(decoded.bytes);
    }
    throw new Error("enter 64 hex characters or " + prefix + "1\u2026");
  }

  /** @param {string} field */
  const text = (field) => input(field).value.trim();
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

  // ---- NIP-07 signer and NIP-98 authorization -------------------------------------------------
  /** @type {string | undefined} */
  let signerPubkey;
  /** Signing needs WebCrypto (the NIP-98 payload hash), which browsers only offer in a secure context. */
  const canSign = !!(window.crypto && crypto.subtle);

  function extension() {
    if (!window.nostr) throw new Error("no NIP-07 signer found: install or unlock a Nostr browser extension (nos2x, Alby, \u2026)");
    return window.nostr;
  }

  /** Asks the extension who signs; the lists load the first time (and when the key changed). */
  async function connectSigner() {
    const pk = await extension().getPublicKey();
    if (typeof pk !== "string" || !HEX64.test(pk)) throw new Error("the signer gave no pubkey");
    const changed = pk !== signerPubkey;
    signerPubkey = pk;
    $("signer-pubkey").textContent = pk;
    $("signer-profile").replaceChildren(authorEl(pk));
    if (changed) void refreshAll();
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
  /** @param {UnsignedEvent} unsigned @returns {Promise<SignedEvent>} */
  function signQueued(unsigned) {
    const p = calls.then(() => extension().signEvent(unsigned));
    calls = p.then(
      () => {},
      () => {},
    );
    return p;
  }
  /** @param {string} method @param {unknown[]} params @returns {Promise<unknown>} */
  function rpc(method, params) {
    const p = calls.then(() => rpcNow(method, params));
    calls = p.then(
      () => {},
      () => {},
    );
    return p;
  }

  // ---- the relay's websocket: the live view and profile / event look-ups ----------------------
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

  function openSocket() {
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
  function subscribe(id, sub) {
    subs.set(id, sub);
    send(["REQ", id, ...sub.filters]);
  }

  /** @param {string} id */
  function unsubscribe(id) {
    if (subs.delete(id)) send(["CLOSE", id]);
  }

  /**
   * Events looked up by key (a pubkey's kind 0, an event by id), batched: keys asked for within a
   * few ms go in one REQ; each key is asked once per page, and what came back is kept.
   * @template T
   * @param {string} prefix subscription ids
   * @param {(keys: string[]) => Record<string, unknown>} filterFor
   * @param {(e: SignedEvent) => string} keyOf
   * @param {(e: SignedEvent) => T} parse
   * @param {(key: string) => void} repaint called when a key's answer (or its absence) is known
   */
  function lookup(prefix, filterFor, keyOf, parse, repaint) {
    /** @type {Map<string, { at: number, value: T | null }>} */
    const known = new Map();
    /** @type {Set<string>} */
    const asked = new Set();
    /** @type {string[]} */
    const waiting = [];
    let n = 0;
    /** A page left open for days must not keep every answer: past the cap the oldest go (asked again if shown again). */
    const remember = (/** @type {string} */ key, /** @type {{ at: number, value: T | null }} */ v) => {
      known.delete(key);
      known.set(key, v);
      if (known.size <= LOOKUP_CAP) return;
      for (const old of [...known.keys()].slice(0, known.size - LOOKUP_CAP + LOOKUP_CAP / 10)) {
        known.delete(old);
        asked.delete(old);
      }
    };
    /** @param {SignedEvent} e */
    const offer = (e) => {
      const key = keyOf(e);
      const prev = known.get(key);
      if (prev && prev.value !== null && prev.at >= e.created_at) return false;
      remember(key, { at: e.created_at, value: parse(e) });
      asked.add(key);
      return true;
    };
    function flush() {
      const keys = waiting.splice(0, 100);
      if (waiting.length > 0) setTimeout(flush, 0);
      const id = prefix + ++n;
      const done = () => {
        for (const k of keys) {
          if (!known.has(k)) remember(k, { at: 0, value: null });
          repaint(k);
        }
      };
      subscribe(id, {
        filters: [filterFor(keys)],
        onEvent: (e) => void (keys.includes(keyOf(e)) && offer(e)),
        onEose: () => {
          unsubscribe(id);
          done();
        },
        onClosed: done,
      });
    }
    return {
      /** What is known of a key: its value, null (the relay has none), undefined (not yet). @param {string} key */
      get: (key) => known.get(key)?.value,
      /** @param {string} key */
      want(key) {
        if (asked.has(key)) return;
        asked.add(key);
        if (waiting.push(key) === 1) setTimeout(flush, 20);
      },
      /** An event seen elsewhere (the live view): kept, and shown, if newer. @param {SignedEvent} e */
      offer(e) {
        if (offer(e)) repaint(keyOf(e));
      },
    };
  }

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

  const profiles = lookup(
    "profiles-",
    (authors) => ({ kinds: [0], authors, limit: authors.length }),
    (e) => e.pubkey,
    profileOf,
    (pk) => {
      for (const span of document.querySelectorAll(`[data-profile="${pk}"]`)) paintAuthor(/** @type {HTMLElement} */ (span), pk);
    },
  );
  const events = lookup(
    "events-",
    (ids) => ({ ids, limit: ids.length }),
    (e) => e.id,
    (e) => e,
    (id) => {
      for (const span of document.querySelectorAll(`[data-event="${id}"]`)) paintEvent(/** @type {HTMLElement} */ (span), id);
    },
  );

  // ---- how pubkeys and events look ------------------------------------------------------------
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

  /** A pubkey as its profile name and picture (when the relay has its kind 0), else a short npub. @param {string} pk */
  function authorEl(pk) {
    const span = el("span", "author");
    span.dataset.profile = pk;
    paintAuthor(span, pk);
    profiles.want(pk);
    return span;
  }

  /** @param {string} content */
  const excerpt = (content) => {
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
  function eventEl(id) {
    const span = el("span", "event");
    span.dataset.event = id;
    paintEvent(span, id);
    events.want(id);
    return span;
  }

  const KIND_NAMES = /** @type {Record<number, string>} */ ({
    0: "profile",
    1: "note",
    3: "follows",
    4: "DM",
    5: "deletion",
    6: "repost",
    7: "reaction",
    16: "repost",
    1059: "gift wrap",
    1984: "report",
    9735: "zap",
    10002: "relay list",
    30023: "article",
  });
  /** @param {number} k */
  const kindText = (k) => (KIND_NAMES[k] ? k + " " + KIND_NAMES[k] : String(k));

  /** @param {number} seconds */
  function when(seconds) {
    const d = new Date(seconds * 1000);
    return d.toDateString() === new Date().toDateString() ? d.toLocaleTimeString() : d.toLocaleString();
  }

  // ---- what each action did -------------------------------------------------------------------
  /** What a call acts on, for the log. @param {string} method @param {unknown[]} args @returns {Node | string} */
  function targetOf(method, args) {
    const a = String(args[0] ?? "");
    if (/pubkey$/.test(method) && HEX64.test(a)) return authorEl(a);
    if (/event$/.test(method) && HEX64.test(a)) return eventEl(a);
    if (/kind$/.test(method)) return "kind " + a;
    if (method.startsWith("changerelay")) return JSON.stringify(a.length > 80 ? a.slice(0, 80) + "\u2026" : a);
    return a;
  }

  /** A new row at the top of the log, its outcome still pending. @param {string} method @param {Node | string} target */
  function logEntry(method, target) {
    const body = /** @type {HTMLTableSectionElement} */ ($("log").querySelector("tbody"));
    body.querySelector("tr.empty")?.remove();
    const tr = el("tr");
    tr.dataset.state = "pending";
    tr.dataset.method = method;
    const targetTd = el("td");
    targetTd.append(target);
    tr.append(el("td", "time", new Date().toLocaleTimeString()), el("td", "", method), targetTd, el("td", "outcome", "\u2026"));
    body.prepend(tr);
    while (body.rows.length > LOG_MAX) body.lastElementChild?.remove();
    return tr;
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

  /** @param {unknown} v */
  function describe(v) {
    if (Array.isArray(v)) return v.length + (v.length === 1 ? " item" : " items");
    if (v === true) return "ok";
    return JSON.stringify(v);
  }

  /**
   * A call that changes the relay: shown in #result and in the log, then the tables it changes
   * are loaded again. Resolves with the error text, or undefined when it went through.
   * @param {string} method @param {unknown[]} args @returns {Promise<string | undefined>}
   */
  async function act(method, args) {
    show("pending", method + "\u2026");
    const entry = logEntry(method, targetOf(method, args));
    const outcome = /** @type {HTMLElement} */ (entry.querySelector(".outcome"));
    try {
      const value = await rpc(method, args);
      show("ok", method + ": " + describe(value));
      entry.dataset.state = "ok";
      outcome.textContent = describe(value);
      for (const id of AFFECTS[method] ?? []) loadList(id).catch(() => {});
      return undefined;
    } catch (err) {
      show("error", method + " failed: " + message(err));
      entry.dataset.state = "error";
      outcome.textContent = message(err);
      return message(err);
    }
  }

  // ---- the lists as tables --------------------------------------------------------------------
  /** @typedef {[label: string, method: string, args: unknown[]]} RowAction */
  /** @typedef {{ key: string, cells: (Node | string)[], actions: RowAction[] }} Row */

  /** @param {string} label @param {string} method @param {unknown[]} args @param {HTMLElement} [outcome] */
  function actionButton(label, method, args, outcome) {
    const b = el("button", "small", label);
    b.type = "button";
    b.dataset.method = method;
    b.disabled = !canSign;
    b.addEventListener("click", async () => {
      const error = await act(method, args);
      if (outcome) outcome.textContent = error ? "failed: " + error : "";
    });
    return b;
  }

  /** @param {HTMLTableElement} table @param {string} textValue @param {string} cls */
  function placeholder(table, textValue, cls) {
    const tr = el("tr", cls);
    const td = el("td", "", textValue);
    td.colSpan = table.tHead?.rows[0]?.cells.length ?? 1;
    tr.append(td);
    return tr;
  }

  /** @param {string} id @param {Row[]} rows */
  function fillTable(id, rows) {
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
      .map((i) => ({ key: i.pubkey, cells: [authorEl(i.pubkey), reason(i)], actions: [[unLabel, unMethod, [i.pubkey]]] }));
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
            return { key: i.id, cells: [id, reason(i)], actions: [["Allow again", "allowevent", [i.id]]] };
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
  async function refreshAll() {
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

  // ---- the live view of recent events ---------------------------------------------------------
  let liveN = 0;
  /** @type {string | undefined} */
  let liveSub;
  /** Text matched in the page when the relay has no NIP-50 search. */
  let clientText = "";
  let searchable = false;
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
  function startLive() {
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
      b.disabled = !canSign;
    }
    banEvent.addEventListener("click", async () => {
      // Kept for the log: the relay deletes a banned event, so a look-up after would find nothing.
      events.offer(e);
      const error = await act("banevent", [e.id, reasonNow()]);
      if (error) return void (outcome.textContent = "ban failed: " + error);
      tr.classList.add("banned");
      banEvent.disabled = true;
      outcome.textContent = "event banned: deleted from the relay and kept out";
    });
    banAuthor.addEventListener("click", async () => {
      const error = await act("banpubkey", [e.pubkey, reasonNow()]);
      if (error) return void (outcome.textContent = "ban failed: " + error);
      for (const r of liveBody.querySelectorAll(`tr[data-pubkey="${e.pubkey}"]`)) {
        r.classList.add("banned");
        for (const b of r.querySelectorAll("button.ban-author")) /** @type {HTMLButtonElement} */ (b).disabled = true;
        const o = r.querySelector(".outcome");
        if (o && !o.textContent) o.textContent = "author banned: their new events are refused";
      }
    });
    actions.append(banEvent, banAuthor, outcome);
    tr.append(time, el("td", "kind", kindText(e.kind)), author, content, actions);
    return tr;
  }

  // ---- the forms ------------------------------------------------------------------------------
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
  for (const [id, [method, params]] of Object.entries(ACTIONS))
    $(id).addEventListener("click", () => {
      let args;
      try {
        args = params();
      } catch (err) {
        return show("error", method + ": " + message(err));
      }
      void act(method, args);
    });

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
  for (const [button, table] of Object.entries(RELOADS)) $(button).addEventListener("click", () => void reload(table));

  $("connect").addEventListener("click", async () => {
    try {
      show("ok", "signer: " + (await connectSigner()));
    } catch (err) {
      show("error", "signer: " + message(err));
    }
  });
  $("refresh").addEventListener("click", async () => {
    try {
      if (!signerPubkey) await connectSigner();
      else await refreshAll();
    } catch (err) {
      show("error", "signer: " + message(err));
    }
  });
  $("filter").addEventListener("submit", (ev) => {
    ev.preventDefault();
    startLive();
  });
  input("show-pictures").checked = remotePictures;
  input("show-pictures").addEventListener("change", () => {
    remotePictures = input("show-pictures").checked;
    localStorage.setItem(PICTURES_KEY, remotePictures ? "1" : "0");
    for (const span of document.querySelectorAll("[data-profile]")) {
      const el = /** @type {HTMLElement} */ (span);
      paintAuthor(el, el.dataset.profile || "");
    }
  });
  $("filter-clear").addEventListener("click", () => {
    for (const f of ["filter-kinds", "filter-author", "filter-text"]) input(f).value = "";
    startLive();
  });

  // NIP-11: the current name, description and icon, to edit rather than retype; whether the relay
  // searches (NIP-50). Then the live view starts.
  fetch(RELAY_PATH, { headers: { Accept: "application/nostr+json" } })
    .then((r) => r.json())
    .then((info) => {
      searchable = Array.isArray(info.supported_nips) && info.supported_nips.includes(50);
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
})();
