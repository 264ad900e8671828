// The signature verifier of an import: the relay's worker pool, with libsecp256k1 when it loads.
import type { Config } from "../config/schema.ts";
import { nativeLibrary } from "../relay/server.ts";
import { WorkerVerifier } from "../relay/verify.ts";

/** Jobs per message to a worker: an import hands over a thousand at a time. */
const IMPORT_BATCH = 256;

/** [options] verifier and verify_workers, read as the relay reads them. */
export function verifierFor(config: Config): WorkerVerifier {
  return new WorkerVerifier(config.options.verify_workers, nativeLibrary(config), IMPORT_BATCH);
}
