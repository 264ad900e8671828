// @ts-check
// NIP-19: a tiny bech32 codec (npub / note), checksum verified; hex both ways.
import { message } from "./page.js";

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
export function bech32Encode(hrp, bytes) {
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
export const toHex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
/** @param {string} hex */
export const fromHex = (hex) => Array.from({ length: hex.length / 2 }, (_, i) => parseInt(hex.slice(2 * i, 2 * i + 2), 16));
/** @param {string} hex */
export const npub = (hex) => bech32Encode("npub", fromHex(hex));
/** "npub1abcdefg…uvwxyz": enough to tell two apart at a glance. @param {string} hrp @param {string} hex */
export const shortBech = (hrp, hex) => {
  const b = bech32Encode(hrp, fromHex(hex));
  return b.slice(0, hrp.length + 8) + "\u2026" + b.slice(-6);
};

/**
 * 64 hex characters, or a bech32 string with this prefix (npub, note), as lowercase hex.
 * @param {string} v @param {string} prefix
 */
export function hexOf(v, prefix) {
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
