// NIP-13 proof of work: leading zero bits of the id, and the target the miner committed to.
import type { NostrEvent } from "../protocol/event.ts";

export function difficulty(idHex: string): number {
  let bits = 0;
  for (let i = 0; i < idHex.length; i++) {
    const nibble = parseInt(idHex[i]!, 16);
    if (nibble === 0) {
      bits += 4;
      continue;
    }
    return bits + Math.clz32(nibble) - 28;
  }
  return bits;
}

/** The third value of the `nonce` tag, when it is a number. */
export function committedTarget(e: NostrEvent): number | undefined {
  const nonce = e.tags.find((t) => t[0] === "nonce");
  const target = nonce?.[2];
  return target !== undefined && /^\d{1,3}$/.test(target) ? Number(target) : undefined;
}
