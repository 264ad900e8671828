// NIP-45 HyperLogLog: 256 one-byte registers over the counted events' pubkeys, at an offset
// derived from the filter so results from many relays can be merged.
import { createHash } from "node:crypto";
import type { Filter } from "../protocol/filter.ts";

const HEX64 = /^[0-9a-f]{64}$/;

/** The register offset for a filter, or undefined when NIP-45 defines none (no tag condition). */
export function hllOffset(filter: Filter): number | undefined {
  const key = Object.keys(filter).find((k) => k[0] === "#");
  const first = key ? (filter[key as `#${string}`] as string[] | undefined)?.[0] : undefined;
  if (first === undefined) return undefined;
  let hex: string;
  if (HEX64.test(first)) hex = first;
  else {
    const parts = first.split(":");
    hex = parts.length >= 3 && HEX64.test(parts[1]!) ? parts[1]! : createHash("sha256").update(first).digest("hex");
  }
  return parseInt(hex[32]!, 16) + 8;
}

export class Hll {
  readonly registers = new Uint8Array(256);
  constructor(readonly offset: number) {}

  add(pubkey: Uint8Array): void {
    const ri = pubkey[this.offset]!;
    // Leading zero bits from byte offset+1 onwards, plus one.
    let zeros = 0;
    for (let i = this.offset + 1; i < pubkey.length; i++) {
      const b = pubkey[i]!;
      if (b === 0) {
        zeros += 8;
        continue;
      }
      zeros += Math.clz32(b) - 24;
      break;
    }
    const rank = zeros + 1;
    if (rank > this.registers[ri]!) this.registers[ri] = rank;
  }

  hex(): string {
    return Buffer.from(this.registers).toString("hex");
  }
}
