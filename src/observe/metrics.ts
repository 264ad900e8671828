// The relay's Prometheus metrics. Each relay counts in its own RelayMetrics (ctx.metrics), and
// every hot-path hook is a plain number increment on a pre-created slot: no label strings are
// built until a scrape. Gauges are read from existing state at scrape time rather than
// maintained on the way. Names follow strfry's where they overlap (nostr_client_messages_total,
// nostr_relay_messages_total).
import type { AccessMetrics } from "../access/metrics.ts";
import { Exposition, Histogram } from "../http/exposition.ts";
import { eventsStored, STORED_COUNT_TTL_MS } from "../http/status.ts";
import { readResidentKib } from "./proc-status.ts";
import type { Store } from "../store/types.ts";
import type { Outcome } from "../admit/outcome.ts";
import { isGroupActionKind, isRelayGroupKind } from "../nips/nip29.ts";
import type { NostrEvent } from "../protocol/event.ts";

const CLIENT_VERBS = ["EVENT", "REQ", "CLOSE", "COUNT", "AUTH", "NEG-OPEN", "NEG-MSG", "NEG-CLOSE", "invalid"] as const;
const RELAY_VERBS = ["EVENT", "EOSE", "OK", "CLOSED", "NOTICE"] as const;
type Tally<K extends string> = Record<K, number>;
const tally = <K extends string>(keys: readonly K[]) => Object.fromEntries(keys.map((k) => [k, 0])) as Tally<K>;

// EVENT outcomes: result x reason, per kind. "" = no reason (accepted); "other" = unprefixed.
const RESULTS = ["accepted", "duplicate", "refused"] as const;
const REASONS = [
  "",
  "invalid",
  "pow",
  "blocked",
  "rate-limited",
  "restricted",
  "auth-required",
  "mute",
  "error",
  "duplicate",
  "other",
] as const;
const R = REASONS.length;
const DUPLICATE = REASONS.indexOf("duplicate");
const OTHER = REASONS.indexOf("other");
/**
 * Kinds that get their own label value; later ones share kind="other", so series stay bounded.
 * Exported for tests: test/metrics.test.ts goes past it.
 */
export const MAX_KIND_LABELS = 50;

/** REASONS indexes by first letter: the prefixes that start with it (at most two). */
const byFirstLetter: number[][] = [];
for (let i = 1; i < OTHER; i++) (byFirstLetter[REASONS[i]!.charCodeAt(0)] ??= []).push(i);

/** The index of the message's NIP-01 prefix ("invalid: …") in REASONS; no allocation. */
function reasonOf(message: string): number {
  if (message === "") return 0;
  const candidates = byFirstLetter[message.charCodeAt(0)];
  if (candidates)
    for (const i of candidates) {
      const p = REASONS[i]!;
      if (message.charCodeAt(p.length) === 58 && message.startsWith(p)) return i;
    }
  return OTHER;
}

const REASON_INDEX = new Map<string, number>(REASONS.map((r, i) => [r, i]));
/**
 * The reasons a refusal can have, in the order refusedByReason() counts them. "duplicate" too: an
 * older version of a stored replaceable event is refused with it (OK false), and the status page
 * lists those refusals, so its chart of refusals counts them (a duplicate answered OK true is no
 * refusal: acceptedTotals() counts it).
 */
export const REFUSAL_REASONS = REASONS.slice(1);
const REFUSAL_INDEXES = REFUSAL_REASONS.map((r) => REASON_INDEX.get(r)!);
/**
 * Refusals the status page lists (the newest last): a fixed ring, no allocation per refusal.
 * Exported for tests: src/http/status.test.ts fills the ring.
 */
export const RECENT_REFUSALS = 50;

interface RecentRefusal {
  /** ms since the epoch. */
  at: number;
  /** null when the event never parsed. */
  kind: number | null;
  reason: string;
  /** The OK text, cut to 200 characters. */
  message: string;
}

/** A NIP-29 group's event: a moderation, join or leave kind, the relay's 39000-39009, or one with an h tag. */
const isGroupEvent = (e: NostrEvent): boolean => isGroupActionKind(e.kind) || isRelayGroupKind(e.kind) || e.tags.some((t) => t[0] === "h");

/** One relay's counters. */
export class RelayMetrics {
  /** Client frames by verb; `invalid` = unparseable, binary, oversize or of an unknown verb. */
  readonly received = tally(CLIENT_VERBS);
  /** Per-connection frames sent. Live EVENTs fanned out are nostr_fanout_deliveries_total instead. */
  readonly sent = tally(RELAY_VERBS);
  readonly byKind = new Map<number, Float64Array>();
  readonly otherKinds = new Float64Array(RESULTS.length * R);
  /** Events refused before they had a readable kind (bad shape, oversize frame). */
  readonly noKind = new Float64Array(RESULTS.length * R);
  /** Writer batches (events per transaction) and how long each took to commit. */
  readonly writerBatchSize = new Histogram([1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000]);
  readonly writerCommitSeconds = new Histogram([0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]);
  /**
   * REQ -> EOSE on the relay's side: from the REQ's frame to its EOSE, the stored events read and
   * sent (what a client's latency is less the network and its own delays). Bounds fine enough
   * for a p99 in the milliseconds.
   */
  readonly reqSeconds = new Histogram([
    0.0005, 0.001, 0.0015, 0.002, 0.003, 0.004, 0.006, 0.008, 0.012, 0.016, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
  ]);
  /**
   * REQs whose stored events came from memory, not the store: the fanout's ring
   * (relay/answers/feeds.ts), replaceable events by author and kind (relay/answers/replaceable.ts),
   * answers to one tag value kept (relay/answers/tag.ts).
   */
  readonly memoryAnswers = { ring: 0, replaceable: 0, tag: 0 };
  /** Messages waiting for their address's turn on the main thread (relay/connection/fair.ts). */
  readonly messageQueue = { bytes: 0, connections: 0, deferred: 0 };
  // The last RECENT_REFUSALS refusals, in parallel arrays written in a circle.
  private readonly refusedAt = new Float64Array(RECENT_REFUSALS);
  private readonly refusedKind = new Float64Array(RECENT_REFUSALS);
  private readonly refusedReason = new Uint8Array(RECENT_REFUSALS);
  private readonly refusedText: string[] = new Array<string>(RECENT_REFUSALS).fill("");
  private refusals = 0;
  /** Refusals of group events (NIP-29), by REASONS index: counted on the refusal path only. */
  readonly groupRefusals = new Float64Array(R);

  /** Counts one OK answer to an EVENT whose text is all there is (a write-policy plugin's, a refusal before the pipeline); kind undefined when the event never parsed. */
  countEventResult(kind: number | undefined, accepted: boolean, message: string): void {
    const reason = reasonOf(message);
    // An accepted event with a message that is no NIP-01 prefix (a plugin's note) is just accepted.
    const result = !accepted ? 2 : reason === DUPLICATE ? 1 : 0;
    if (result === 2) this.noteRefusal(kind, reason, message);
    this.count(kind, result, accepted && reason === OTHER ? 0 : reason);
  }

  /** Counts the OK answer to an EVENT from the pipeline's outcome. */
  countOutcome(kind: number | undefined, o: Outcome): void {
    if ("refusal" in o) {
      const reason = REASON_INDEX.get(o.refusal.prefix)!;
      this.noteRefusal(kind, reason, o.refusal.message);
      if (o.event && isGroupEvent(o.event)) this.groupRefusals[reason]!++;
      return this.count(kind, 2, reason);
    }
    if (o.fate === "plugin" || o.fate === "answered") return this.countEventResult(kind, o.accepted, o.message);
    if (o.fate === "duplicate") return this.count(kind, 1, DUPLICATE);
    this.count(kind, 0, 0);
  }

  private count(kind: number | undefined, result: number, reason: number): void {
    let row = kind === undefined ? this.noKind : this.byKind.get(kind);
    if (!row) {
      if (this.byKind.size < MAX_KIND_LABELS) this.byKind.set(kind!, (row = new Float64Array(RESULTS.length * R)));
      else row = this.otherKinds;
    }
    row[result * R + reason]!++;
  }

  private noteRefusal(kind: number | undefined, reason: number, message: string): void {
    const i = this.refusals++ % RECENT_REFUSALS;
    this.refusedAt[i] = Date.now();
    this.refusedKind[i] = kind ?? -1;
    this.refusedReason[i] = reason;
    this.refusedText[i] = message;
  }

  /** The last refusals, oldest first. */
  recentRefusals(): RecentRefusal[] {
    const out: RecentRefusal[] = [];
    for (let n = Math.max(0, this.refusals - RECENT_REFUSALS); n < this.refusals; n++) {
      const i = n % RECENT_REFUSALS;
      const reason = REASONS[this.refusedReason[i]!]!;
      let message = this.refusedText[i]!;
      // The pipeline's refusals carry the text after the prefix; a plugin's the whole OK text.
      if (reason !== "other" && !message.startsWith(`${reason}:`)) message = `${reason}: ${message}`;
      out.push({
        at: this.refusedAt[i]!,
        kind: this.refusedKind[i]! < 0 ? null : this.refusedKind[i]!,
        reason,
        message: message.slice(0, 200),
      });
    }
    return out;
  }

  /** Events accepted and answered duplicate since start, all kinds. */
  acceptedTotals(): { accepted: number; duplicate: number } {
    let accepted = 0;
    let duplicate = 0;
    for (const row of this.rows()) {
      accepted += row[0]!;
      duplicate += row[R + DUPLICATE]!;
    }
    return { accepted, duplicate };
  }

  /** Refusals since start by reason (REFUSAL_REASONS order), all kinds. */
  refusedByReason(): number[] {
    const out = REFUSAL_INDEXES.map(() => 0);
    for (const row of this.rows()) REFUSAL_INDEXES.forEach((reason, j) => (out[j]! += row[2 * R + reason]!));
    return out;
  }

  /** Kinds by events accepted since start, most first (the first MAX_KIND_LABELS kinds seen). */
  topKinds(n: number): { kind: number; accepted: number }[] {
    return [...this.byKind]
      .map(([kind, row]) => ({ kind, accepted: row[0]! }))
      .filter((k) => k.accepted > 0)
      .sort((a, b) => b.accepted - a.accepted || a.kind - b.kind)
      .slice(0, n);
  }

  private rows(): Float64Array[] {
    return [...this.byKind.values(), this.otherKinds, this.noKind];
  }

  observeWriterBatch(size: number, seconds: number): void {
    this.writerBatchSize.observe(size);
    this.writerCommitSeconds.observe(seconds);
  }
}

/** What a scrape reads of the relay (RelayContext has it). */
export interface MetricsSource {
  readonly metrics: RelayMetrics;
  readonly store: Store;
  readonly fanout: { readonly deliveries: number; readonly groupCount: number };
  readonly writer: { readonly depth: number };
  readonly verifier: { readonly depth: number };
  readonly inflight: number;
  readonly startedAt: number;
  connections(): number;
  /** The NIP-29 group state, while [groups] enabled. */
  readonly groups?: { stats(): { groups: number; members: number; deleted: number } };
  /** Issue 33: the admission registry, while a model is on (access/registry.ts). */
  readonly access?: { counts(): Record<string, number>; readonly metrics: AccessMetrics };
}

/** What only the running relay can see (relay/server.ts). */
interface LiveState {
  subscriptions(): number;
}

/** Returns the scrape renderer for one relay. */
export function metricsRenderer(ctx: MetricsSource, live: LiveState): () => Promise<string> {
  return async () => {
    // The status page's count, cached there (a full count is a table scan); NaN when it fails.
    const [dbBytes, stored] = await Promise.all([ctx.store.sizeBytes(), eventsStored(ctx.store)]);
    return render(ctx, live, dbBytes, stored ?? NaN);
  };
}

function render(ctx: MetricsSource, live: LiveState, dbBytes: number, storedEvents: number): string {
  const m = ctx.metrics;
  const x = new Exposition();
  x.family("nostr_client_messages_total", "counter", "Messages received from clients, by verb (invalid = unparseable or unknown).");
  for (const v of CLIENT_VERBS) x.sample("nostr_client_messages_total", m.received[v], [["verb", v]]);
  x.family(
    "nostr_relay_messages_total",
    "counter",
    "Per-connection messages sent to clients, by verb (EVENT = stored results; live ones are nostr_fanout_deliveries_total).",
  );
  for (const v of RELAY_VERBS) x.sample("nostr_relay_messages_total", m.sent[v], [["verb", v]]);

  x.family(
    "nostr_events_received_total",
    "counter",
    `EVENTs answered with OK, by result, NIP-01 reason prefix and kind (the first ${MAX_KIND_LABELS} kinds seen; then kind="other").`,
  );
  const rows: [string, Float64Array][] = [
    ...[...m.byKind].sort((a, b) => a[0] - b[0]).map(([k, row]) => [String(k), row] as [string, Float64Array]),
    ["other", m.otherKinds],
    ["unknown", m.noKind],
  ];
  for (const [kind, row] of rows)
    row.forEach((n, i) => {
      if (n > 0)
        x.sample("nostr_events_received_total", n, [
          ["result", RESULTS[Math.floor(i / R)]!],
          ["reason", REASONS[i % R]!],
          ["kind", kind],
        ]);
    });

  x.single(
    "nostr_fanout_deliveries_total",
    "counter",
    "Live events delivered to subscriptions (one per socket and subscription).",
    ctx.fanout.deliveries,
  );
  x.single("nostr_connections", "gauge", "Open websocket connections.", ctx.connections());
  x.single("nostr_subscriptions", "gauge", "Open REQ subscriptions on all connections.", live.subscriptions());
  x.single("nostr_subscription_groups", "gauge", "Distinct live subscription groups (one fanout topic each).", ctx.fanout.groupCount);

  x.single("bunstr_database_size_bytes", "gauge", "Bytes the database takes on disk.", dbBytes);
  x.single(
    "bunstr_events_stored",
    "gauge",
    `Events in the database (recounted at most every ${STORED_COUNT_TTL_MS / 1000} s).`,
    storedEvents,
  );
  x.histogram(
    "bunstr_req_seconds",
    "From a REQ to its EOSE: stored events read and sent. REQs closed or refused before EOSE are not counted.",
    m.reqSeconds,
  );
  x.single(
    "bunstr_req_ring_answers_total",
    "counter",
    "REQs answered from the recent events in memory, without a database read.",
    m.memoryAnswers.ring,
  );
  x.single(
    "bunstr_req_replaceable_answers_total",
    "counter",
    "REQs for replaceable events by author and kind (profiles, follow and relay lists) answered from memory, without a database read.",
    m.memoryAnswers.replaceable,
  );
  x.single(
    "bunstr_req_tag_answers_total",
    "counter",
    "REQs for one tag value (a thread, a hashtag) answered from an earlier answer kept in memory, without a database read.",
    m.memoryAnswers.tag,
  );
  x.histogram("bunstr_writer_batch_size", "Events per writer transaction.", m.writerBatchSize);
  x.histogram("bunstr_writer_commit_seconds", "Time to write and commit one writer batch.", m.writerCommitSeconds);
  x.single("bunstr_writer_queue_depth", "gauge", "Events waiting for the writer.", ctx.writer.depth);
  x.single("bunstr_verify_queue_depth", "gauge", "Signatures waiting for a verify worker.", ctx.verifier.depth);
  x.single("bunstr_events_in_flight", "gauge", "EVENTs between admission and their OK.", ctx.inflight);
  x.single(
    "bunstr_queued_message_bytes",
    "gauge",
    "Client messages waiting for their address's turn on the main thread, in bytes.",
    m.messageQueue.bytes,
  );
  x.single(
    "bunstr_queued_message_connections",
    "gauge",
    "Connections with messages waiting for their address's turn.",
    m.messageQueue.connections,
  );
  x.single(
    "bunstr_deferred_messages_total",
    "counter",
    "Client messages that waited for their address's turn (fairness between addresses).",
    m.messageQueue.deferred,
  );

  if (ctx.groups) renderGroups(x, ctx.groups.stats(), m.groupRefusals);
  if (ctx.access) renderAccess(x, ctx.access.counts(), ctx.access.metrics);

  renderProcess(x, ctx.startedAt);
  return x.text();
}

/** The process: memory (the RSS split where Linux gives it), CPU, uptime. */
function renderProcess(x: Exposition, startedAt: number): void {
  const mem = process.memoryUsage();
  const cpu = process.cpuUsage();
  x.single("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", mem.rss);
  x.single("process_heap_bytes", "gauge", "JavaScript heap in use, in bytes.", mem.heapUsed);
  const split = residentSplit();
  if (split) {
    x.single(
      "bunstr_resident_anonymous_bytes",
      "gauge",
      "Of the resident memory, the process's own (heap, caches, buffers), in bytes.",
      split.anon,
    );
    x.single(
      "bunstr_resident_file_bytes",
      "gauge",
      "Of the resident memory, pages of mapped files (the database file's map, the executable): cache the kernel may drop, in bytes.",
      split.file,
    );
  }
  x.single("process_cpu_seconds_total", "counter", "User and system CPU time spent, in seconds.", (cpu.user + cpu.system) / 1e6);
  x.single("process_start_time_seconds", "gauge", "When the relay started, seconds since the Unix epoch.", startedAt / 1000);
  x.single("bunstr_uptime_seconds", "gauge", "Seconds since the relay started.", (Date.now() - startedAt) / 1000);
}

/** NIP-29: gauges read from the group state at the scrape, and the refusals of group events. */
function renderGroups(x: Exposition, stats: { groups: number; members: number; deleted: number }, refusals: Float64Array): void {
  x.single("bunstr_groups", "gauge", "NIP-29 groups on this relay (deleted ones not counted).", stats.groups);
  x.single(
    "bunstr_groups_deleted",
    "gauge",
    "Deleted NIP-29 groups (9008) whose ids this relay keeps taken; they count against max_groups.",
    stats.deleted,
  );
  x.single("bunstr_group_members", "gauge", "Memberships of NIP-29 groups (a pubkey in two groups counts twice).", stats.members);
  x.family(
    "bunstr_group_refusals_total",
    "counter",
    "EVENTs of NIP-29 groups (an h tag, kinds 9000-9022, 39000-39009) refused, by NIP-01 reason prefix.",
  );
  // Every prefix but "" (accepted): a join of a member is refused "duplicate:".
  for (let i = 1; i < R; i++) x.sample("bunstr_group_refusals_total", refusals[i]!, [["reason", REASONS[i]!]]);
}

/** One family of counters, a sample per key of `values` under `label`. */
function counters(x: Exposition, name: string, help: string, label: string, values: Record<string, number>): void {
  x.family(name, "counter", help);
  for (const [k, v] of Object.entries(values)) x.sample(name, v, [[label, k]]);
}

/** Issue 33: who is admitted, per basis, and what the admission engines did (access/metrics.ts). */
function renderAccess(x: Exposition, counts: Record<string, number>, a: AccessMetrics): void {
  x.family(
    "bunstr_admitted_pubkeys",
    "gauge",
    "Pubkeys admitted to write, by basis (trusted: the web of trust's graph; manual: the allow lists, admins, the relay key).",
  );
  for (const [basis, n] of Object.entries(counts)) x.sample("bunstr_admitted_pubkeys", n, [["basis", basis]]);
  counters(
    x,
    "bunstr_admission_refusals_total",
    "EVENTs refused by an admission model, by the model whose text was sent.",
    "basis",
    a.refusals,
  );
  counters(
    x,
    "bunstr_invoices_total",
    "Lightning invoices for admission and top-ups: created at the node, paid, expired.",
    "event",
    a.invoices,
  );
  counters(
    x,
    "bunstr_payment_node_errors_total",
    "Calls to the Lightning node that failed (timeout, error, unreadable answer).",
    "call",
    a.nodeErrors,
  );
  counters(
    x,
    "bunstr_webhooks_total",
    "Payment webhooks: a check queued, an unknown or settled invoice, dropped past the rate.",
    "result",
    a.webhooks,
  );
  x.single("bunstr_join_limited_total", "counter", "Invoice creations refused: too many join attempts from one address.", a.joinLimited);
  counters(x, "bunstr_nip05_checks_total", "NIP-05 checks, by outcome.", "result", a.nip05Checks);
  x.single("bunstr_nip05_queue", "gauge", "NIP-05 addresses waiting for a check.", a.nip05Queue);
  x.single("bunstr_wot_graph_pubkeys", "gauge", "Pubkeys in the web of trust's graph.", a.wot.pubkeys);
  x.single("bunstr_wot_graph_bytes", "gauge", "Bytes the web of trust's graph holds.", a.wot.bytes);
  x.single("bunstr_wot_build_seconds", "gauge", "Time the last web of trust build took.", a.wot.buildSeconds);
  counters(x, "bunstr_member_invites_total", "NIP-43 invite codes: issued, claimed, invalid, expired.", "result", a.memberInvites);
}

/** The RSS split (observe/proc-status.ts) in bytes; undefined where Linux's /proc is not there. */
function residentSplit(): { anon: number; file: number } | undefined {
  let kib: { anon: number; file: number };
  try {
    kib = readResidentKib();
  } catch {
    return undefined;
  }
  return Number.isNaN(kib.anon) || Number.isNaN(kib.file) ? undefined : { anon: kib.anon * 1024, file: kib.file * 1024 };
}
