// What the message handlers share: config, store, writer, verifier, fanout — and the few
// derived views of config that several handlers need.
import type { Config } from "../config/schema.ts";
import { matchesSearch, searchTerms } from "../nips/nip50.ts";
import type { RateLimiter } from "../policy/rate-limit.ts";
import { setOf, type Policy, type PolicyContext } from "../policy/rules.ts";
import type { NostrEvent } from "../protocol/event.ts";
import type { FilterLimits } from "../protocol/filter.ts";
import type { WriterQueue } from "../store/queue.ts";
import { QueryTimeoutError, ReaderBusyError, ReadStoppedError, StoreClosedError, type Store, type Visibility, type WriteRules } from "../store/types.ts";
import type { AdminState } from "./admin.ts";
import type { Bucket } from "./budget.ts";
import type { Fanout } from "./fanout.ts";
import type { Session } from "./session.ts";
import type { Verifier } from "./verify.ts";

export interface RelayContext {
  /**
   * Changed in place by a config reload (config/reload.ts): read a value when it is used, never
   * copy it at start. What Bun or a timer holds is re-applied by Relay.reconfigure().
   */
  config: Config;
  store: Store;
  writer: WriterQueue;
  verifier: Verifier;
  /** Verifies NIP-42 AUTH events: always a real check, even when event verification is off. */
  authVerifier: Verifier;
  fanout: Fanout;
  policies: Policy[];
  /** Sends an ephemeral event to live subscribers: here, and on the other nodes (Postgres). */
  ephemeral(e: NostrEvent, json: string): void;
  /** NIP-86 admin state: bans, allow lists, kinds, blocked IPs, relay info (relay/admin.ts). */
  admin: AdminState;
  /** [rate_limits] buckets per IP and per pubkey, for connections, EVENT, REQ, COUNT and NEG-OPEN. */
  rates: RateLimiter;
  /** EVENTs anywhere in the pipeline; shutdown waits for them. */
  inflight: number;
  /** Refuse new work (set during shutdown). */
  closing: boolean;
  /** Running average of what one read costs (worker ms), the first guess for a new connection. */
  readCostEstimate: number;
  /** Query time left per address group (relay/budget.ts). */
  queryGroups: Map<string, Bucket>;
  /** Filter bytes held by the live subscriptions of each address group (relay/req.ts). */
  filterBytes: Map<string, number>;
  /** NIP-77 items held by the open negentropy sessions of each address group (relay/neg.ts). */
  negItems: Map<string, number>;
  /** Main-thread reconciliation time left per address group (relay/budget.ts). */
  negGroups: Map<string, Bucket>;
  /** When this relay started (ms since the epoch), for the status page and metrics. */
  readonly startedAt: number;
  /** Open websocket connections. */
  connections(): number;
}

/** Most signature checks waiting relay-wide before EVENTs are refused as overload. */
export const MAX_VERIFY_BACKLOG = 20000;

export const nowSeconds = (): number => Math.floor(Date.now() / 1000);

/** This relay's URL as a client on this connection sees it (for NIP-42 and NIP-62). */
export const relayUrlFor = (config: Config, s: Session): string => config.info.relay_url || `ws://${s.host}${config.network.path}`;

/** What the policies see of an EVENT from this connection (or, without one, from a mirror). */
export const policyContext = (ctx: RelayContext, s?: Session): PolicyContext => ({
  config: ctx.config,
  now: nowSeconds(),
  authed: s?.authed ?? new Set<string>(),
  relayUrl: s ? relayUrlFor(ctx.config, s) : ctx.config.info.relay_url,
  ip: s?.ip,
  group: s?.group,
  rates: s ? ctx.rates : undefined,
  admin: ctx.admin,
});

export const restrictedKinds = (config: Config): ReadonlySet<number> => setOf(config.authorization.restricted_read_kinds);

export function writeRules(config: Config): WriteRules {
  return { deletion: config.nips.nip09, vanish: config.nips.nip62, search: config.nips.nip50, searchSkipKinds: restrictedKinds(config) };
}

export function filterLimits(config: Config): FilterLimits {
  const skip = restrictedKinds(config);
  return {
    maxValues: config.limits.max_filter_values,
    maxValueLength: config.limits.max_filter_value_length,
    compileSearch: config.nips.nip50
      ? (q) => {
          const terms = searchTerms(q);
          return (e: NostrEvent) => matchesSearch(terms, e, skip);
        }
      : undefined,
  };
}

export const visibilityFor = (config: Config, s: Session): Visibility => ({
  restrictedKinds: config.authorization.restricted_read_kinds,
  viewers: [...s.authed],
});

/** The refusal text for a failed read. */
export function readFailure(err: unknown, what: string): string {
  if (err instanceof QueryTimeoutError) return `error: ${what} took too long and was stopped`;
  if (err instanceof ReadStoppedError) return err.message;
  if (err instanceof ReaderBusyError) return "rate-limited: the relay is busy, try again shortly";
  if (err instanceof StoreClosedError) return "error: the relay is shutting down";
  console.error(`${what} failed:`, err);
  return `error: could not run the ${what}`;
}

/** May this connection read this event? Restricted kinds only by their author or a p-tagged recipient. */
export function canRead(config: Config, s: Session, e: NostrEvent): boolean {
  if (!restrictedKinds(config).has(e.kind)) return true;
  if (s.authed.has(e.pubkey)) return true;
  for (const t of e.tags) if (t[0] === "p" && t[1] !== undefined && s.authed.has(t[1])) return true;
  return false;
}
