// @ts-check
// The admin page's script (admin.html), served as it is: plain JavaScript for any current browser,
// type-checked through JSDoc (tsconfig.json here). One function scope: a global named like
// window.nostr would replace the extension's. The page defines RELAY_PATH before it.
(() => {
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
  const result = $("result");
  let seq = 0;

  /** @param {"pending" | "ok" | "error"} state @param {string} text */
  function show(state, text) {
    result.dataset.state = state;
    result.dataset.seq = String(++seq);
    result.textContent = text;
  }

  // ---- NIP-19: a tiny bech32 decoder (npub / note), checksum verified -------------------------
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
    const expanded = [];
    for (const ch of hrp) expanded.push(ch.charCodeAt(0) >>> 5);
    expanded.push(0);
    for (const ch of hrp) expanded.push(ch.charCodeAt(0) & 31);
    if (polymod(expanded.concat(data)) !== 1) throw new Error("bad checksum");
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

  /** @param {Iterable<number>} bytes */
  const toHex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

  /**
   * 64 hex characters, or a bech32 string with this prefix (npub, note), as lowercase hex.
   * @param {string} field @param {string} prefix
   */
  function hex32(field, prefix) {
    const v = input(field).value.trim();
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

  function extension() {
    if (!window.nostr) throw new Error("no NIP-07 signer found: install or unlock a Nostr browser extension (nos2x, Alby, \u2026)");
    return window.nostr;
  }

  async function connectSigner() {
    signerPubkey = await extension().getPublicKey();
    $("signer-pubkey").textContent = signerPubkey;
    return signerPubkey;
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
  async function rpc(method, params) {
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

  // ---- the page's actions ---------------------------------------------------------------------
  /** @param {unknown} v */
  function describe(v) {
    if (Array.isArray(v)) return v.length + (v.length === 1 ? " item" : " items");
    if (v === true) return "ok";
    return JSON.stringify(v);
  }

  /** A listed entry: a pubkey, event id or IP with its reason, or a kind. @param {any} item @returns {string} */
  function entryText(item) {
    if (typeof item !== "object" || item === null) return String(item);
    const main = item.pubkey || item.id || item.ip || JSON.stringify(item);
    return item.reason ? main + " (" + item.reason + ")" : main;
  }

  /** @param {string} listId @param {unknown} items @param {boolean} [withButtons] */
  function renderList(listId, items, withButtons) {
    const ul = $(listId);
    ul.replaceChildren();
    for (const item of /** @type {any[]} */ (Array.isArray(items) ? items : [])) {
      const li = document.createElement("li");
      li.textContent = entryText(item) + " ";
      const id = item?.id;
      /** @type {[string, string][]} */
      const actions = [
        ["allowevent", "Allow"],
        ["banevent", "Ban"],
      ];
      if (withButtons && id) {
        for (const [method, label] of actions) {
          const b = document.createElement("button");
          b.type = "button";
          b.textContent = label;
          b.dataset.method = method;
          b.dataset.id = id;
          b.addEventListener("click", () =>
            run(
              method,
              () => [id],
              () => li.remove(),
            ),
          );
          li.append(b);
        }
      }
      ul.append(li);
    }
  }

  /** @typedef {(value: unknown) => void} After what to do with a call's result */

  /** @param {string} method @param {() => unknown[]} params @param {After} [after] */
  async function run(method, params, after) {
    let args;
    try {
      args = params();
    } catch (err) {
      return show("error", method + ": " + message(err));
    }
    show("pending", method + "\u2026");
    try {
      const value = await rpc(method, args);
      if (after) after(value);
      show("ok", method + ": " + describe(value));
    } catch (err) {
      show("error", method + " failed: " + message(err));
    }
  }

  const pubkeyArgs = () => [hex32("pubkey-input", "npub"), text("pubkey-reason")];
  const eventArgs = () => [hex32("event-input", "note"), text("event-reason")];
  /** @param {string} id @param {boolean} [buttons] @returns {After} */
  const list = (id, buttons) => (items) => renderList(id, items, buttons);

  /** Button id -> [NIP-86 method, params, what to do with the result]. @type {Record<string, [string, () => unknown[], After?]>} */
  const ACTIONS = {
    "ban-pubkey": ["banpubkey", pubkeyArgs],
    "unban-pubkey": ["unbanpubkey", pubkeyArgs],
    "allow-pubkey": ["allowpubkey", pubkeyArgs],
    "unallow-pubkey": ["unallowpubkey", pubkeyArgs],
    "list-banned-pubkeys": ["listbannedpubkeys", () => [], list("banned-pubkeys")],
    "list-allowed-pubkeys": ["listallowedpubkeys", () => [], list("allowed-pubkeys")],
    "ban-event": ["banevent", eventArgs],
    "allow-event": ["allowevent", eventArgs],
    "list-banned-events": ["listbannedevents", () => [], list("banned-events")],
    "list-moderation": ["listeventsneedingmoderation", () => [], list("moderation-events", true)],
    "change-name": ["changerelayname", () => [required("name-input", "a name")]],
    "change-description": ["changerelaydescription", () => [text("description-input")]],
    "change-icon": ["changerelayicon", () => [text("icon-input")]],
    "allow-kind": ["allowkind", () => [kind()]],
    "disallow-kind": ["disallowkind", () => [kind()]],
    "reset-kind": ["resetkind", () => [kind()]],
    "list-allowed-kinds": ["listallowedkinds", () => [], list("allowed-kinds")],
    "list-disallowed-kinds": ["listdisallowedkinds", () => [], list("disallowed-kinds")],
    "block-ip": ["blockip", () => [required("ip-input", "an IP address"), text("ip-reason")]],
    "unblock-ip": ["unblockip", () => [required("ip-input", "an IP address")]],
    "list-blocked-ips": ["listblockedips", () => [], list("blocked-ips")],
  };

  for (const [id, [method, params, after]] of Object.entries(ACTIONS)) $(id).addEventListener("click", () => run(method, params, after));

  $("connect").addEventListener("click", async () => {
    try {
      show("ok", "signer: " + (await connectSigner()));
    } catch (err) {
      show("error", "signer: " + message(err));
    }
  });

  // The current name, description and icon, to edit rather than retype (NIP-11, no signature needed).
  fetch(RELAY_PATH, { headers: { Accept: "application/nostr+json" } })
    .then((r) => r.json())
    .then((info) => {
      /** @type {[string, string][]} */
      const fields = [
        ["name-input", "name"],
        ["description-input", "description"],
        ["icon-input", "icon"],
      ];
      for (const [field, key] of fields) if (!input(field).value && typeof info[key] === "string") input(field).value = info[key];
    })
    .catch(() => {});

  // NIP-98's payload hash needs WebCrypto, which browsers only offer in a secure context.
  if (!window.crypto || !crypto.subtle) {
    for (const b of document.querySelectorAll("button")) b.disabled = true;
    show(
      "error",
      "This admin page needs https (or http://127.0.0.1 / localhost): the browser offers no crypto.subtle here, so requests cannot be signed.",
    );
  }
})();
