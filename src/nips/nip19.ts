// NIP-19, the part the relay reads: a pubkey given as `npub1…` (bech32, BIP-173 checksum) or as
// 64 hex, e.g. `/join?pubkey=`. Pure; the admin page has its own copy for the browser
// (http/pages/admin/nip19.js).
import { isHex64 } from "../protocol/event.ts";

const CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l";
const GENERATOR = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3];

function polymod(values: readonly number[]): number {
  let chk = 1;
  for (const v of values) {
    const top = chk >>> 25;
    chk = ((chk & 0x1ffffff) << 5) ^ v;
    for (let i = 0; i < 5; i++) if ((top >>> i) & 1) chk ^= GENERATOR[i]!;
  }
  return chk;
}

function hrpExpand(hrp: string): number[] {
  const out: number[] = [];
  for (const ch of hrp) out.push(ch.charCodeAt(0) >>> 5);
  out.push(0);
  for (const ch of hrp) out.push(ch.charCodeAt(0) & 31);
  return out;
}

/** 5-bit words <-> 8-bit bytes; undefined when the padding is not zero. */
function regroup(words: readonly number[], from: number, to: number, pad: boolean): number[] | undefined {
  let acc = 0;
  let bits = 0;
  const out: number[] = [];
  for (const w of words) {
    acc = (acc << from) | w;
    bits += from;
    while (bits >= to) {
      bits -= to;
      out.push((acc >>> bits) & ((1 << to) - 1));
    }
    acc &= (1 << bits) - 1;
  }
  if (pad) {
    if (bits > 0) out.push((acc << (to - bits)) & ((1 << to) - 1));
  } else if (bits >= from || acc !== 0) return undefined;
  return out;
}

/** The hex pubkey of an `npub1…`; undefined for anything else (another prefix, a bad checksum, not 32 bytes). */
export function decodeNpub(text: string): string | undefined {
  if (text.length > 90 || (text !== text.toLowerCase() && text !== text.toUpperCase())) return undefined;
  const s = text.toLowerCase();
  const sep = s.lastIndexOf("1");
  if (s.slice(0, sep) !== "npub" || sep + 7 > s.length) return undefined;
  const data: number[] = [];
  for (const ch of s.slice(sep + 1)) {
    const d = CHARSET.indexOf(ch);
    if (d < 0) return undefined;
    data.push(d);
  }
  if (polymod([...hrpExpand("npub"), ...data]) !== 1) return undefined;
  const bytes = regroup(data.slice(0, -6), 5, 8, false);
  if (bytes?.length !== 32) return undefined;
  return bytes!.map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** `npub1…` of a 64-hex pubkey. */
export function encodeNpub(hex: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < 64; i += 2) bytes.push(parseInt(hex.slice(i, i + 2), 16));
  const words = regroup(bytes, 8, 5, true)!;
  const mod = polymod([...hrpExpand("npub"), ...words, 0, 0, 0, 0, 0, 0]) ^ 1;
  for (let i = 0; i < 6; i++) words.push((mod >>> (5 * (5 - i))) & 31);
  return `npub1${words.map((w) => CHARSET[w]).join("")}`;
}

/** A pubkey as a person gives it: 64 hex (any case) or an npub; the lowercase hex, or undefined. */
export function pubkeyOf(text: string): string | undefined {
  const t = text.trim();
  if (isHex64(t.toLowerCase())) return t.toLowerCase();
  return decodeNpub(t);
}
