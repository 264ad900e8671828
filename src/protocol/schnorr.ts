// BIP-340 verification with @noble/curves: portable, pure JS, used inside the verify workers.
import { schnorr } from "@noble/curves/secp256k1.js";

export interface VerifyJob {
  id: string;
  pubkey: string;
  sig: string;
}

const bytes = (hex: string): Uint8Array => Uint8Array.from(Buffer.from(hex, "hex"));

export function verifySchnorr(job: VerifyJob): boolean {
  try {
    return schnorr.verify(bytes(job.sig), bytes(job.id), bytes(job.pubkey));
  } catch {
    return false;
  }
}
