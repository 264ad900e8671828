// @ts-check
// Kind names as both pages show them (the status page's top kinds and refusals, the console's live
// view and kind lists): "1 · note", the number first, for a kind with a common name; the number
// alone otherwise.

const KIND_NAMES = /** @type {Record<number, string>} */ ({
  0: "profile",
  1: "note",
  3: "follows",
  4: "DM",
  5: "deletion",
  6: "repost",
  7: "reaction",
  13: "seal",
  14: "chat message",
  16: "repost",
  1059: "gift wrap",
  1063: "file",
  1111: "comment",
  1984: "report",
  9734: "zap request",
  9735: "zap",
  10000: "mute list",
  10002: "relay list",
  30023: "article",
  30078: "app data",
});

/** @param {number} k */
export const kindText = (k) => (KIND_NAMES[k] ? `${k} · ${KIND_NAMES[k]}` : String(k));
