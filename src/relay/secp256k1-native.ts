// BIP-340 verification with the system's libsecp256k1 through bun:ffi: ~10x faster than the pure
// JS verifier, used when the library is installed (Debian: libsecp256k1-1, with the schnorrsig
// module since 0.2). Loaded inside each verify worker.
import { dlopen, FFIType } from "bun:ffi";
import type { VerifyJob } from "../protocol/schnorr.ts";

const CANDIDATES =
  process.platform === "darwin"
    ? ["libsecp256k1.dylib", "/opt/homebrew/lib/libsecp256k1.dylib", "/usr/local/lib/libsecp256k1.dylib"]
    : ["libsecp256k1.so.2", "libsecp256k1.so.1", "libsecp256k1.so"];
const SECP256K1_CONTEXT_NONE = 1;

const symbols = {
  secp256k1_context_create: { args: [FFIType.u32], returns: FFIType.ptr },
  secp256k1_xonly_pubkey_parse: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
  secp256k1_schnorrsig_verify: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.u64, FFIType.ptr], returns: FFIType.i32 },
} as const;

/** A verify function backed by libsecp256k1, or undefined when no usable library is installed. */
export function loadNativeVerifier(): ((job: VerifyJob) => boolean) | undefined {
  for (const name of CANDIDATES) {
    let lib;
    try {
      lib = dlopen(name, symbols);
    } catch {
      continue; // not installed, or built without the schnorrsig module
    }
    const f = lib.symbols;
    const ctx = f.secp256k1_context_create(SECP256K1_CONTEXT_NONE);
    if (!ctx) continue;
    // Scratch buffers reused for every call: a worker verifies one signature at a time.
    const pubkey = new Uint8Array(64); // secp256k1_xonly_pubkey (opaque)
    const pk = new Uint8Array(32);
    const sig = new Uint8Array(64);
    const msg = new Uint8Array(32);
    return (job) => {
      // The pipeline has already checked these are lowercase hex of the right lengths.
      pk.setFromHex(job.pubkey);
      sig.setFromHex(job.sig);
      msg.setFromHex(job.id);
      if (f.secp256k1_xonly_pubkey_parse(ctx, pubkey, pk) !== 1) return false;
      return f.secp256k1_schnorrsig_verify(ctx, sig, msg, 32, pubkey) === 1;
    };
  }
  return undefined;
}
