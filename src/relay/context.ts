// What the message handlers share: config, store, writer, verifier, fanout.
import type { Config } from "../config/schema.ts";
import type { Policy } from "../policy/rules.ts";
import type { WriterQueue } from "../store/queue.ts";
import type { Store } from "../store/types.ts";
import type { Fanout } from "./fanout.ts";
import type { Verifier } from "./verify.ts";

export interface RelayContext {
  config: Config;
  store: Store;
  writer: WriterQueue;
  verifier: Verifier;
  /** Verifies NIP-42 AUTH events: always a real check, even when event verification is off. */
  authVerifier: Verifier;
  fanout: Fanout;
  policies: Policy[];
  /** EVENTs anywhere in the pipeline; shutdown waits for them. */
  inflight: number;
  /** Refuse new work (set during shutdown). */
  closing: boolean;
}

/** Most signature checks waiting relay-wide before EVENTs are refused as overload. */
export const MAX_VERIFY_BACKLOG = 20000;
