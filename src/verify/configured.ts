// The verifier the config asks for ([options] verify_signatures, verifier, verify_workers): the
// worker pool, with libsecp256k1 when it loads. The relay and the bulk commands (import, sync,
// stream) choose theirs here, so neither has to load the other's modules.
import { ConfigError } from "../config/load.ts";
import type { Config } from "../config/schema.ts";
import { findNativeLibrary, type NativeLibrary } from "./native.ts";
import { noVerifier, WorkerVerifier, type Verifier } from "./pool.ts";

/** Jobs per message to a worker: an import hands over a thousand at a time. */
const IMPORT_BATCH = 256;

/** The libsecp256k1 to verify with, if any: `native` insists, `auto` takes it when it loads. */
function nativeLibrary(config: Config): NativeLibrary | undefined {
  if (config.options.verifier === "noble") return undefined;
  const found = findNativeLibrary();
  if (config.options.verifier === "native" && !found)
    throw new ConfigError(
      '[options] verifier = "native" but libsecp256k1 (with schnorrsig) was not found; install it (Debian: libsecp256k1-1) or use "auto"',
    );
  return found;
}

/** The relay's verifier (its worker threads start now). */
export function configuredVerifier(config: Config): Verifier {
  return config.options.verify_signatures ? new WorkerVerifier(config.options.verify_workers, nativeLibrary(config)) : noVerifier;
}

/** The verifier of an import, sync or stream: the same pool, fed bigger batches. */
export function importVerifier(config: Config): WorkerVerifier {
  return new WorkerVerifier(config.options.verify_workers, nativeLibrary(config), IMPORT_BATCH);
}
