// What the message handlers share: config, store, writer, verifier, fanout, memory's answers, admin state, the
// write-policy plugin and the metrics. The interface only: the decisions made from it live with
// their subject (policy/visibility.ts, connection/budget.ts, write/policy-context.ts).
import type { AdmissionRegistry } from "../access/registry.ts";
import type { Source } from "../admit/admit.ts";
import type { AdminState } from "../admin/state.ts";
import type { LogLimiter } from "../log.ts";
import type { Config } from "../config/schema.ts";
import type { GroupState } from "../groups/state.ts";
import type { RateLimiter } from "../policy/rate-limit.ts";
import type { Reader } from "../policy/visibility.ts";
import type { Policy } from "../policy/rules.ts";
import type { NostrEvent } from "../protocol/event.ts";
import type { Refusal } from "../protocol/reasons.ts";
import type { RelayKey } from "../protocol/schnorr.ts";
import type { WriterQueue } from "../store/queue.ts";
import type { Store, WriteOutcome } from "../store/types.ts";
import type { Verifier } from "../verify/pool.ts";
import type { MemoryAnswers } from "./answers/memory.ts";
import type { BudgetState } from "./connection/budget.ts";
import type { Fanout } from "./fanout/fanout.ts";
import type { RelayMetrics } from "../observe/metrics.ts";
import type { WritePolicyPlugin } from "./plugin/plugin.ts";

/** Query time budgets (readCostEstimate, queryGroups, negGroups) are in BudgetState (budget.ts). */
export interface RelayContext extends BudgetState {
  /**
   * Changed in place by a config reload (config/reload.ts): read a value when it is used, never
   * copy it at start. What Bun or a timer holds is re-applied by Relay.reconfigure().
   */
  config: Config;
  store: Store;
  /** The relay's own key: NIP-11 `self`, the signer of what the relay publishes (NIP-29). */
  readonly relayKey: RelayKey;
  writer: WriterQueue;
  verifier: Verifier;
  /** Verifies NIP-42 AUTH events: always a real check, even when event verification is off. */
  authVerifier: Verifier;
  fanout: Fanout;
  /** The store's answers memory holds for some REQs (ring, replaceable events, tag values: answers/memory.ts). */
  answers: MemoryAnswers;
  policies: Policy[];
  /** Sends an ephemeral event to live subscribers: here, and on the other nodes (Postgres). */
  ephemeral(e: NostrEvent, json: string): void;
  /** NIP-29 group state (groups/state.ts), present while [groups] enabled. */
  groups?: GroupState;
  /** NIP-29, the relay's side (relay/groups.ts GroupRelay), present while [groups] enabled. */
  groupRelay?: GroupPublisher;
  /** NIP-86 admin state: bans, allow lists, kinds, blocked IPs, relay info (admin/state.ts). */
  admin: AdminState;
  /** Issue 33: who is admitted and why (access/registry.ts), present while an admission model is on or read = "members". */
  access?: AdmissionRegistry;
  /** Issue 33, paid per event (access/ledger.ts): admit's reserve and settle; absent while nothing is charged. */
  ledger?: Source["ledger"];
  /** Issue 33, NIP-43 (relay/membership.ts): the relay's side of its members, present while [membership] enabled. */
  membership?: MembershipHooks;
  /** The [options] write_policy_plugin of this relay, started on the first event that needs it (plugin/plugin.ts). */
  plugin: WritePolicyPlugin;
  /** This relay's counters and histograms for /metrics (observe/metrics.ts). */
  metrics: RelayMetrics;
  /** [rate_limits] buckets per IP and per pubkey, for connections, EVENT, REQ, COUNT, NEG-OPEN and AUTH. */
  rates: RateLimiter;
  /** Log lines a client can cause without end, held to one a minute per kind (http/admin-api.ts). */
  clientLines: LogLimiter;
  /** EVENTs anywhere in the pipeline; shutdown waits for them. */
  inflight: number;
  /** Refuse new work (set during shutdown). */
  closing: boolean;
  /** Filter bytes held by the live subscriptions of each address group (relay/read/subscriptions.ts). */
  filterBytes: Map<string, number>;
  /** COUNTs running for each address group (relay/read/req.ts, max_counts_per_ip). */
  counts: Map<string, number>;
  /** NIP-77 items held by the open negentropy sessions of each address group (relay/read/neg.ts). */
  negItems: Map<string, number>;
  /** And of all addresses together (max_negentropy_items_total). */
  negItemsTotal: number;
  /** When this relay started (ms since the epoch), for the status page and metrics. */
  readonly startedAt: number;
  /** Open websocket connections. */
  connections(): number;
}

/** What the handlers ask of relay/membership.ts (NIP-43; the type only, as GroupPublisher). */
export interface MembershipHooks {
  /** Its start (members read, the member list mended): Relay.ready waits for it. */
  readonly started: Promise<void>;
  /**
   * A join (28934) or leave (28936) request, after its signature: the OK's answer (admit's fate
   * "answered"; never fanned out); undefined for any other event. `authed`: the sender's AUTH.
   */
  relayRequest(e: NostrEvent, authed: ReadonlySet<string>): Promise<{ accepted: boolean; message: string }> | undefined;
  /**
   * A REQ whose filters ask for kind 28935, once admitted: the relay-signed invite to send as an
   * EVENT of the subscription before the normal read, or the CLOSED text (not authenticated, no
   * invites left).
   */
  inviteFor(reader: Reader): Promise<NostrEvent | string>;
}

/** An event the relay signs (NIP-29): created_at is set when it is signed. */
export interface GroupTemplate {
  kind: number;
  content: string;
  tags: string[][];
}

/** What the handlers ask of relay/groups.ts GroupRelay (the type only: that file imports this one). */
export interface GroupPublisher {
  /**
   * After this node stored a group moderation, join or leave event: what follows from it, written
   * and committed; or, when its commit changed nothing (admitted on a stale view), why (the OK's text).
   */
  accepted(e: NostrEvent): Promise<Refusal | undefined>;
  /** A relay-signed moderation event (the console, NIP-86): written, then what follows from it. */
  act(t: GroupTemplate): Promise<WriteOutcome>;
  /** Writes again every relay-signed 39xxx whose stored tags differ from the state's; how many. */
  reconcile(): Promise<number>;
}
