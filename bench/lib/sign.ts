// BIP-340 Schnorr signing for the bench corpus: libsecp256k1 through bun:ffi when the system
// library loads (as the relay's verifier finds it, see src/verify/native.ts), else
// @noble/curves. BIP-340 signing is a pure function of (secret key, message, aux_rand32), so both
// backends give the same 64 bytes for the same inputs; `selfCheck` asserts it.
//
//   const signer = createSigner();            // native if possible, else noble
//   const key = signer.key(secretKey);        // x-only pubkey + a signing function
//   const sig = key.sign(msg32, aux32);       // 64 bytes
import { schnorr } from "@noble/curves/secp256k1.js";
import { dlopen, FFIType } from "bun:ffi";

export type SignerBackend = "native" | "noble";

export interface SigningKey {
  /** BIP-340 x-only public key, 32 bytes. */
  readonly publicKey: Uint8Array;
  /** The signature of a 32-byte message with the given 32 bytes of aux randomness (a fresh array). */
  sign(msg32: Uint8Array, aux32: Uint8Array): Uint8Array;
}

export interface Signer {
  readonly backend: SignerBackend;
  /** Prepares a secret key (32 bytes, in range) for signing. */
  key(secretKey: Uint8Array): SigningKey;
}

const CANDIDATES =
  process.platform === "darwin"
    ? ["libsecp256k1.dylib", "/opt/homebrew/lib/libsecp256k1.dylib", "/usr/local/lib/libsecp256k1.dylib"]
    : ["libsecp256k1.so.2", "libsecp256k1.so.1", "libsecp256k1.so"];
/** SECP256K1_CONTEXT_SIGN | SECP256K1_CONTEXT_VERIFY: accepted by every version (ignored since 0.2). */
const CONTEXT_FLAGS = 0x0201 | 0x0101;

const common = {
  secp256k1_context_create: { args: [FFIType.u32], returns: FFIType.ptr },
  secp256k1_keypair_create: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
  secp256k1_keypair_xonly_pub: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
  secp256k1_xonly_pubkey_serialize: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
} as const;
const SIGN = { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 } as const;

interface Native {
  secp256k1_context_create: (flags: number) => unknown;
  secp256k1_keypair_create: (ctx: unknown, keypair: Uint8Array, sk: Uint8Array) => number;
  secp256k1_keypair_xonly_pub: (ctx: unknown, xonly: Uint8Array, parity: Uint8Array, keypair: Uint8Array) => number;
  secp256k1_xonly_pubkey_serialize: (ctx: unknown, out: Uint8Array, xonly: Uint8Array) => number;
  sign: (ctx: unknown, sig: Uint8Array, msg: Uint8Array, keypair: Uint8Array, aux: Uint8Array) => number;
}

/** The library's functions, or undefined. secp256k1_schnorrsig_sign32 is 0.2+; 0.1 called it secp256k1_schnorrsig_sign. */
function open(name: string): Native | undefined {
  for (const signName of ["secp256k1_schnorrsig_sign32", "secp256k1_schnorrsig_sign"]) {
    try {
      const lib = dlopen(name, { ...common, [signName]: SIGN });
      const f = lib.symbols as unknown as Record<string, unknown>;
      return { ...(f as unknown as Omit<Native, "sign">), sign: f[signName] as Native["sign"] };
    } catch {
      // not installed, or built without the extrakeys/schnorrsig modules
    }
  }
  return undefined;
}

/** @noble/curves: pure JS, always available (~1 ms per signature). */
export function nobleSigner(): Signer {
  return {
    backend: "noble",
    key(secretKey) {
      const sk = Uint8Array.from(secretKey);
      return { publicKey: schnorr.getPublicKey(sk), sign: (msg, aux) => schnorr.sign(msg, sk, aux) };
    },
  };
}

/** libsecp256k1 through bun:ffi (~20x faster than noble), or undefined when no usable library loads. */
export function nativeSigner(): Signer | undefined {
  for (const name of CANDIDATES) {
    const f = open(name);
    if (!f) continue;
    const ctx = f.secp256k1_context_create(CONTEXT_FLAGS);
    if (!ctx) continue;
    const xonly = new Uint8Array(64); // secp256k1_xonly_pubkey (opaque)
    const parity = new Uint8Array(4);
    const sig = new Uint8Array(64);
    return {
      backend: "native",
      key(secretKey) {
        const keypair = new Uint8Array(96); // secp256k1_keypair (opaque)
        if (f.secp256k1_keypair_create(ctx, keypair, secretKey) !== 1)
          throw new Error("secp256k1_keypair_create failed: secret key out of range");
        const publicKey = new Uint8Array(32);
        if (
          f.secp256k1_keypair_xonly_pub(ctx, xonly, parity, keypair) !== 1 ||
          f.secp256k1_xonly_pubkey_serialize(ctx, publicKey, xonly) !== 1
        )
          throw new Error("secp256k1: could not derive the x-only public key");
        return {
          publicKey,
          sign(msg, aux) {
            if (msg.length !== 32 || aux.length !== 32) throw new Error("sign: message and aux must be 32 bytes");
            if (f.sign(ctx, sig, msg, keypair, aux) !== 1) throw new Error("secp256k1_schnorrsig_sign32 failed");
            return sig.slice();
          },
        };
      },
    };
  }
  return undefined;
}

/** The native signer when the library loads (unless BUNSTR_BENCH_SIGNER=noble), else noble. */
export function createSigner(
  prefer: "auto" | SignerBackend = (process.env.BUNSTR_BENCH_SIGNER as SignerBackend | undefined) ?? "auto",
): Signer {
  if (prefer === "noble") return nobleSigner();
  const native = nativeSigner();
  if (native) return native;
  if (prefer === "native") throw new Error("libsecp256k1 (with the schnorrsig module) could not be loaded");
  return nobleSigner();
}

/** BIP-340 verification with @noble/curves (the independent check of what we signed). */
export const verifySignature = (sig: Uint8Array, msg: Uint8Array, publicKey: Uint8Array): boolean => schnorr.verify(sig, msg, publicKey);

/**
 * Signs `samples` (secret key, message, aux) with `signer` and with noble, and checks the
 * signatures are identical and verify. Throws on any difference.
 */
export function selfCheck(signer: Signer, samples: { secretKey: Uint8Array; msg: Uint8Array; aux: Uint8Array }[]): void {
  const noble = nobleSigner();
  for (const [i, s] of samples.entries()) {
    const a = signer.key(s.secretKey);
    const b = noble.key(s.secretKey);
    if (a.publicKey.toHex() !== b.publicKey.toHex())
      throw new Error(`signer self-check ${i}: ${signer.backend} and noble derive different public keys`);
    const sa = a.sign(s.msg, s.aux);
    const sb = b.sign(s.msg, s.aux);
    if (sa.toHex() !== sb.toHex())
      throw new Error(`signer self-check ${i}: ${signer.backend} and noble signatures differ (${sa.toHex()} vs ${sb.toHex()})`);
    if (!verifySignature(sa, s.msg, a.publicKey)) throw new Error(`signer self-check ${i}: the signature does not verify`);
  }
}
