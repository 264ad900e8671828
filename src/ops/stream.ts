// `bunstr stream`: a live subscription to a remote relay whose events go through the import
// pipeline (shape, policies, id, duplicate, signature, SqliteWriter) as they arrive. After a drop
// it reconnects with exponential backoff (1 s doubling up to 60 s, with jitter) and resubscribes
// from the newest created_at seen, less a margin (events arrive a little out of order; the
// pipeline counts the repeats as duplicates).
import type { Config } from "../config/schema.ts";
import type { NostrEvent } from "../protocol/event.ts";
import type { Filter } from "../protocol/filter.ts";
import type { Verifier } from "../verify/pool.ts";
import type { BulkStore } from "../store/types.ts";
import { addCounts, newCounts } from "../admit/outcome.ts";
import type { GroupState } from "../groups/state.ts";
import { importParsed, type ImportCounts } from "./import.ts";
import { RelayClient } from "./relay-client.ts";

const RESUBSCRIBE_MARGIN_S = 60;
const BACKOFF_FIRST_MS = 1000;
const BACKOFF_CAP_MS = 60_000;
/** Events are gathered this long before an import, so a burst goes in one transaction. */
const GATHER_MS = 100;
/** Events received and not yet stored, at most (a fast remote is paused by reconnecting). */
const MAX_QUEUED = 20_000;

interface StreamOptions {
  config: Config;
  url: string;
  filter: Filter;
  /** First subscription's since (seconds); default now. */
  since?: number;
  verifier?: Verifier;
  /** NIP-29: the local group state (import.ts importGroupState), built once, for every batch. */
  groups?: GroupState;
  /** Called with each line of news (connected, dropped, ...). */
  log?: (text: string) => void;
  onProgress?: (s: StreamSummary) => void;
  /** Received events waiting to be stored, at most (default MAX_QUEUED). */
  maxQueued?: number;
  /** Backoff bounds, for tests. */
  backoffFirstMs?: number;
  backoffCapMs?: number;
}

interface StreamSummary extends ImportCounts {
  /** Events received (before the pipeline's checks). */
  received: number;
  connects: number;
  drops: number;
  /** Newest created_at imported or seen. */
  newest: number;
  seconds: number;
}

/** Full jitter on the upper half: between d/2 and d. */
export function backoffDelay(attempt: number, firstMs = BACKOFF_FIRST_MS, capMs = BACKOFF_CAP_MS): number {
  const d = Math.min(capMs, firstMs * 2 ** Math.min(attempt, 30));
  return d / 2 + Math.random() * (d / 2);
}

export interface Streamer {
  /** Resolves with the summary once stop() was called and what was received is imported. */
  done: Promise<StreamSummary>;
  stop(): void;
  summary(): StreamSummary;
}

/** What becomes of a burst of received events; returns how each fared. */
export type Ingest = (events: NostrEvent[]) => Promise<ImportCounts & { problems: { reason: string }[] }>;

/** The import pipeline into `db` (bunstr stream). */
export function importInto(db: BulkStore, config: Config, verifier: Verifier | undefined, groups?: GroupState): Ingest {
  return (events) => importParsed(db, [events], { config, verifier, batchSize: 1000, groups });
}

export function streamFromRelay(db: BulkStore, opts: StreamOptions): Streamer {
  return followRelay(opts, importInto(db, opts.config, opts.verifier, opts.groups));
}

/** The subscription, reconnection and batching of a stream; `ingest` stores what arrives. */
export function followRelay(opts: StreamOptions, ingest: Ingest): Streamer {
  const f = new Follower(opts, ingest);
  const importing = f.importer();
  const connecting = f.connector();
  const done = (async () => {
    await connecting;
    await importing;
    return f.finished();
  })();
  return { done, summary: () => f.s, stop: () => f.stop() };
}

/** One stream's state, shared by its two loops: the connector fills the queue, the importer empties it. */
class Follower {
  readonly s: StreamSummary;
  private readonly started = performance.now();
  private readonly log: (text: string) => void;
  private readonly maxQueued: number;
  private since: number;
  private stopped = false;
  private relay: RelayClient | undefined;
  private queue: NostrEvent[] = [];
  /** Wakes the importer (events queued, or stopping). */
  private wake: (() => void) | undefined;
  /** Ends the connector's backoff sleep early (stopping). */
  private interrupt: (() => void) | undefined;

  constructor(
    private readonly opts: StreamOptions,
    private readonly ingest: Ingest,
  ) {
    this.log = opts.log ?? (() => {});
    this.maxQueued = opts.maxQueued ?? MAX_QUEUED;
    this.since = opts.since ?? Math.floor(Date.now() / 1000);
    this.s = { ...newCounts(), received: 0, connects: 0, drops: 0, newest: this.since, seconds: 0 };
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.relay?.close();
    this.interrupt?.();
    this.poke();
  }

  finished(): StreamSummary {
    this.s.seconds = (performance.now() - this.started) / 1000;
    return this.s;
  }

  private poke(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  private sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const t = setTimeout(() => ((this.interrupt = undefined), resolve()), ms);
      this.interrupt = () => (clearTimeout(t), (this.interrupt = undefined), resolve());
    });
  }

  /** One import per gathered burst; runs until stopped and the queue is empty. */
  async importer(): Promise<void> {
    for (;;) {
      if (this.queue.length === 0) {
        if (this.stopped) return;
        await new Promise<void>((resolve) => (this.wake = resolve));
        continue;
      }
      if (!this.stopped) await Bun.sleep(GATHER_MS);
      const batch = this.queue;
      this.queue = [];
      let r;
      try {
        r = await this.ingest(batch);
      } catch (e) {
        this.log(`could not store ${batch.length} events: ${(e as Error).message}`);
        continue;
      }
      addCounts(this.s, r);
      for (const p of r.problems) this.log(`refused an event: ${p.reason}`);
      this.s.seconds = (performance.now() - this.started) / 1000;
      this.opts.onProgress?.(this.s);
    }
  }

  /** Connects, subscribes, and after a drop reconnects with backoff, until stopped. */
  async connector(): Promise<void> {
    const { opts } = this;
    let attempt = 0;
    while (!this.stopped) {
      let r: RelayClient;
      try {
        r = this.relay = await RelayClient.connect(opts.url);
      } catch (e) {
        const wait = backoffDelay(attempt++, opts.backoffFirstMs, opts.backoffCapMs);
        this.log(`${(e as Error).message}; retrying in ${(wait / 1000).toFixed(1)} s`);
        await this.sleep(wait);
        continue;
      }
      if (this.stopped) {
        r.close();
        break;
      }
      this.s.connects++;
      const closed = new Promise<string>((resolve) => r.onClose(resolve));
      this.subscribe(r, () => (attempt = 0)); // a working subscription: the next drop starts the backoff over
      const reason = await closed;
      if (this.stopped) break;
      this.s.drops++;
      this.since = Math.max(0, this.s.newest - RESUBSCRIBE_MARGIN_S);
      const wait = backoffDelay(attempt++, opts.backoffFirstMs, opts.backoffCapMs);
      this.log(`${opts.url}: ${reason}; reconnecting in ${(wait / 1000).toFixed(1)} s`);
      await this.sleep(wait);
    }
  }

  /** REQ from `since`; received events are queued for the importer. */
  private subscribe(r: RelayClient, onEose: () => void): void {
    const { opts, s } = this;
    const subId = "stream";
    r.subscribe(subId, (f) => {
      if (f[0] === "EVENT") {
        // A remote sending faster than we store: stop reading it rather than queue without
        // bound; the reconnect resubscribes from the newest event taken.
        if (this.queue.length >= this.maxQueued) {
          if (!r.closed) this.log(`${opts.url} sends faster than events are stored (${this.maxQueued} waiting): reconnecting`);
          return r.close();
        }
        const e = f[2] as NostrEvent;
        s.received++;
        if (typeof e?.created_at === "number" && e.created_at > s.newest && e.created_at <= Date.now() / 1000 + 3600)
          s.newest = e.created_at;
        this.queue.push(e);
        this.poke();
      } else if (f[0] === "EOSE") {
        onEose();
        this.log(`subscribed to ${opts.url} since ${this.since}`);
      } else if (f[0] === "CLOSED") {
        this.log(`${opts.url} closed the subscription: ${String(f[2])}`);
        r.close();
      }
    });
    r.send(["REQ", subId, { ...opts.filter, since: this.since }]);
  }
}
