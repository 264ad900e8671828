// The relay's parts wired together before it listens: its context (store, verifier, writer queue,
// fanout, memory's answers, admin state, plugin, metrics), the store's commit feed to the live
// subscriptions, and what the running relay keeps of its connections (Live).
import { log, LogLimiter } from "../log.ts";
import type { Server } from "bun";
import { AdminState } from "../admin/state.ts";
import type { Config } from "../config/schema.ts";
import { freshRelayKey, type RelayKey } from "../protocol/schnorr.ts";
import { RelayMetrics } from "../observe/metrics.ts";
import type { History } from "../observe/history.ts";
import { GroupState } from "../groups/state.ts";
import { defaultPolicies } from "../policy/defaults.ts";
import { RateLimiter } from "../policy/rate-limit.ts";
import { canRead, gated, groupGated, writeRules } from "../policy/visibility.ts";
import { WriterQueue } from "../store/queue.ts";
import type { Store } from "../store/types.ts";
import { configuredVerifier } from "../verify/configured.ts";
import { inlineVerifier, noVerifier, type Verifier } from "../verify/pool.ts";
import { MemoryAnswers } from "./answers/memory.ts";
import { CLOSING, type Closing, Drain } from "./connection/drain.ts";
import type { FdGuard, WireMeter } from "./connection/fd-guard.ts";
import { InflationBudget } from "./connection/inflation.ts";
import type { Session, Socket } from "./connection/session.ts";
import type { RelayContext } from "./context.ts";
import { Fanout } from "./fanout/fanout.ts";
import { pluginSettings, WritePolicyPlugin } from "./plugin/plugin.ts";
import { GroupRelay } from "./groups.ts";
import { admissionWanted, startAdmission } from "./admission.ts";
import { liveFeed } from "./read/live.ts";

export interface RelayOptions {
  config: Config;
  store: Store;
  verifier?: Verifier;
  /** The relay's own key (NIP-11 `self`; signs NIP-29 group metadata): cli/relay-key.ts. Absent: a fresh one, kept in memory. */
  relayKey?: RelayKey;
  /**
   * The open-files limit in force: connections that are not websockets are then watched and cut
   * before they exhaust it (connection/fd-guard.ts, Linux). Tests running the relay in-process leave it out.
   */
  fileLimit?: number;
}

/** What the pieces of a running relay share besides its context: the sockets and the listener. */
export interface Live {
  readonly ctx: RelayContext;
  /** ctx.config: changed in place by a reload, never copied. */
  readonly config: Config;
  readonly sockets: Set<Socket>;
  /** Open websockets per address group. */
  readonly perIp: Map<string, number>;
  /** Each websocket's peer as the guard knows it (the socket's address and port). */
  readonly peers: WeakMap<Session, string>;
  /** Each websocket by its meter, for the guard to close one holding an unfinished message. */
  readonly metered: WeakMap<WireMeter, Socket>;
  /** What compressed messages inflated to, per address (connection/inflation.ts). */
  readonly inflation: InflationBudget;
  guard?: FdGuard;
  /** The status page's charts (observe/history.ts), sampled while the relay runs. */
  history?: History;
  server?: Server<Session>;
  /** What connections are told while closing. */
  closing: Closing;
  /** While closing: which connections are answered and quiet, so may be closed. */
  readonly drain: Drain;
  /** Whether the warning about proxied connections the config does not read (proxyWarning) was printed. */
  proxyWarned?: boolean;
  /** Relay.ready: the state built from the store at start. */
  ready: Promise<void>;
}

/** No one authenticated. */
const NOBODY: ReadonlySet<string> = new Set();

/** The relay's context: store, verifier, writer queue, fanout, admin state, wired together. */
export function buildContext({ config, store, verifier: given, relayKey }: RelayOptions): Live {
  const verifier = given ?? configuredVerifier(config);
  const sockets = new Set<Socket>();
  const shared: Omit<Live, "ctx"> = {
    config,
    sockets,
    perIp: new Map(),
    peers: new WeakMap(),
    metered: new WeakMap(),
    inflation: new InflationBudget(),
    closing: CLOSING.stop,
    drain: new Drain(),
    ready: Promise.resolve(),
  };
  const fanout = new Fanout({
    publish: (topic, frame) => shared.server!.publish(topic, frame),
    gated: (e) => gated(ctx, e),
    // A public group's event goes to the whole topic: anyone may read it (anonymous readers too).
    restricted: (e) => !canRead(ctx, NOBODY, e),
    canRead: (ws, e) => canRead(ctx, ws.data.authed, e),
  });
  const ctx: RelayContext = {
    config,
    store,
    relayKey: relayKey ?? freshRelayKey(),
    verifier,
    authVerifier: verifier === noVerifier ? inlineVerifier : verifier,
    fanout,
    answers: new MemoryAnswers(fanout.ring, store, config.groups.enabled ? (e) => groupGated(ctx, e) : undefined),
    writer: new WriterQueue(
      store,
      () => writeRules(config),
      undefined,
      () => ({ maxChars: config.limits.max_write_queue_bytes, maxGroupChars: config.limits.max_write_queue_bytes_per_ip }),
    ),
    policies: defaultPolicies,
    ephemeral(e, json) {
      fanout.broadcast(e, json);
      store.shareEphemeral(e, json);
    },
    admin: new AdminState(store, config, {
      disconnectIp(ip) {
        let n = 0;
        for (const ws of sockets)
          if (ws.data.ip === ip) {
            n++;
            ws.close(1008, "blocked");
          }
        return n;
      },
    }),
    // No process runs until the first event that needs one.
    plugin: new WritePolicyPlugin(
      () => pluginSettings(ctx.config),
      () => ctx.closing,
    ),
    metrics: new RelayMetrics(),
    rates: new RateLimiter(),
    clientLines: new LogLimiter(),
    inflight: 0,
    closing: false,
    readCostEstimate: 5,
    countCostEstimate: 5,
    queryGroups: new Map(),
    filterBytes: new Map(),
    counts: new Map(),
    negItems: new Map(),
    negItemsTotal: 0,
    negGroups: new Map(),
    startedAt: Date.now(),
    connections: () => sockets.size,
  };
  const groups = config.groups.enabled ? startGroups(ctx) : undefined;
  const access = admissionWanted(config) ? startAdmission(ctx) : undefined;
  // The store's one feed of what is committed, in commit order, whoever wrote it (on Postgres,
  // any node; with the other nodes' ephemeral events and admin changes): to the live
  // subscriptions and memory's answers (relay/read/live.ts).
  const feed = liveFeed(ctx);
  store.subscribe({
    ...feed,
    // The group state first, so the fanout of a 9000/9001/9002 already sees its members and flags.
    committed(e, json) {
      groups?.committed(e);
      access?.committed(e);
      feed.committed(e, json);
    },
    adminChanged() {
      ctx.admin.load().catch((err) => log.error("could not reload the admin state:", err));
      access?.load().catch((err) => log.error("could not reload the admissions:", err));
    },
    // Postgres: the pubkeys whose admissions any node changed (all when undefined).
    admissionsChanged(pubkeys) {
      access?.reload(pubkeys).catch((err) => log.error("could not reload the admissions:", err));
    },
  });
  // A store that names every change lets memory answer (relay/answers/); one with other nodes
  // writing (Postgres) does not.
  store.changes?.watch(groups ? groups.watch(ctx.answers.changes) : ctx.answers.changes);
  // SQLite answers synchronously; Postgres before Relay.ready (below): what bans hide
  // (Visibility.hidden) must be known before a read is served.
  const adminLoaded = ctx.admin.load().catch((err) => log.error("could not load the admin state:", err));
  ctx.writer.onBatch = (size, seconds) => ctx.metrics.observeWriterBatch(size, seconds);
  // After the subscription: what the feed brings while the rebuild reads is applied after it.
  if (groups) shared.ready = groups.start();
  // Writers are refused "loading" until the rows are read (policy/admission.ts).
  if (access) {
    const loading = access.load().catch((err) => log.error("could not load the admissions:", err));
    shared.ready = Promise.all([shared.ready, loading, ctx.membership?.started]).then(() => {});
  }
  shared.ready = Promise.all([shared.ready, adminLoaded]).then(() => {});
  return Object.assign(shared, { ctx });
}

/** NIP-29 ([groups] enabled): the group state and the relay's side of it (relay/groups.ts). */
function startGroups(ctx: RelayContext): GroupRelay {
  ctx.groups = new GroupState({ config: () => ctx.config, relayPubkey: ctx.relayKey.pubkey });
  const groups = new GroupRelay(ctx);
  ctx.groupRelay = groups;
  return groups;
}
