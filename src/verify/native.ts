// BIP-340 verification with libsecp256k1 through bun:ffi: ~15x faster than the pure JS verifier.
// The library comes from the system (Debian: libsecp256k1-1, with the schnorrsig module since
// 0.2) or, in a release binary built on a host that has it, from a copy embedded in the binary
// (`build.ts`), written once to a temporary file because dlopen needs a path.
// The main thread picks the library (`findNativeLibrary`); each verify worker loads it by path.
import { dlopen, FFIType } from "bun:ffi";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { VerifyJob } from "../protocol/schnorr.ts";

const SYSTEM_CANDIDATES =
  process.platform === "darwin"
    ? ["libsecp256k1.dylib", "/opt/homebrew/lib/libsecp256k1.dylib", "/usr/local/lib/libsecp256k1.dylib"]
    : ["libsecp256k1.so.2", "libsecp256k1.so.1", "libsecp256k1.so"];
const SECP256K1_CONTEXT_NONE = 1;

const symbols = {
  secp256k1_context_create: { args: [FFIType.u32], returns: FFIType.ptr },
  secp256k1_xonly_pubkey_parse: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
  secp256k1_schnorrsig_verify: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.u64, FFIType.ptr], returns: FFIType.i32 },
} as const;

export interface NativeLibrary {
  /** What dlopen is given: a library name or an absolute path. */
  path: string;
  source: "system" | "embedded";
}

/** Does this library load and have the schnorrsig module? */
function usable(path: string): boolean {
  try {
    dlopen(path, symbols).close();
    return true;
  } catch {
    return false; // not installed, or built without the schnorrsig module
  }
}

/** The bytes of the library embedded by build.ts, if this is such a binary (named libsecp256k1…). */
function embeddedLibrary(): Uint8Array | undefined {
  const file = Bun.embeddedFiles.find((f) => (f as Blob & { name?: string }).name?.startsWith("libsecp256k1")) as
    | (Blob & { name: string })
    | undefined;
  // Embedded files live under /$bunfs/root/ and can be read synchronously there.
  return file ? readFileSync(`/$bunfs/root/${file.name}`) : undefined;
}

/** Is the file at `path` ours, not writable by others, and exactly `bytes`? */
function trusted(path: string, bytes: Uint8Array): boolean {
  const st = statSync(path);
  return st.uid === process.getuid?.() && (st.mode & 0o022) === 0 && Buffer.compare(readFileSync(path), bytes) === 0;
}

/**
 * Writes the embedded library to a file named by its hash (once per machine and user) and
 * returns its path. A file already there is used only if it is ours and byte-identical: the
 * name is predictable, and another user of a shared /tmp must not get us to load their code.
 */
function extract(bytes: Uint8Array): string | undefined {
  const hash = createHash("sha256").update(bytes).digest("hex").slice(0, 16);
  const suffix = process.platform === "darwin" ? "dylib" : "so";
  for (const dir of [process.env.XDG_RUNTIME_DIR, tmpdir()]) {
    if (!dir) continue;
    let path = join(dir, `bunstr-libsecp256k1-${hash}-${process.getuid?.() ?? 0}.${suffix}`);
    try {
      if (existsSync(path) && !trusted(path, bytes)) path = join(mkdtempSync(join(dir, "bunstr-")), `libsecp256k1.${suffix}`);
      if (!existsSync(path)) {
        mkdirSync(dir, { recursive: true });
        const part = `${path}.${process.pid}.part`;
        writeFileSync(part, bytes, { mode: 0o500 });
        renameSync(part, path); // atomic: another process may be doing the same
      }
      if (usable(path)) return path;
    } catch {
      // read-only or noexec directory: try the next one
    }
  }
  return undefined;
}

/** The system's libsecp256k1, else the embedded copy, else undefined (use the JS verifier). */
export function findNativeLibrary(): NativeLibrary | undefined {
  for (const name of SYSTEM_CANDIDATES) if (usable(name)) return { path: name, source: "system" };
  const bytes = embeddedLibrary();
  const path = bytes && extract(bytes);
  return path ? { path, source: "embedded" } : undefined;
}

/** A verify function backed by the library at `path` (from findNativeLibrary), or undefined. */
export function loadNativeVerifier(path: string): ((job: VerifyJob) => boolean) | undefined {
  let lib;
  try {
    lib = dlopen(path, symbols);
  } catch {
    return undefined;
  }
  const f = lib.symbols;
  const ctx = f.secp256k1_context_create(SECP256K1_CONTEXT_NONE);
  if (!ctx) return undefined;
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
