// `bunstr stream`: a live subscription to a remote relay whose events go through the import
// pipeline (shape, policies, id, duplicate, signature, SqliteWriter) as they arrive. After a drop
// it reconnects with exponential backoff (1 s doubling up to 60 s, with jitter) and resubscribes
// from the newest created_at seen, less a margin (events arrive a little out of order; the
// pipeline counts the repeats as duplicates).
import type { Config } from "../config/schema.ts";
import type { NostrEvent } from "../protocol/event.ts";
import type { Filter } from "../protocol/filter.ts";
import type { Verifier } from "../relay/verify.ts";
import type { Db } from "../store/maintenance.ts";
import { importParsed, type ImportCounts } from "./import.ts";
import { RelayClient } from "./relay-client.ts";

export const RESUBSCRIBE_MARGIN_S = 60;
const BACKOFF_FIRST_MS = 1000;
const BACKOFF_CAP_MS = 60_000;
/** Events are gathered this long before an import, so a burst goes in one transaction. */
const GATHER_MS = 100;
/** Events received and not yet stored, at most (a fast remote is paused by reconnecting). */
const MAX_QUEUED = 20_000;

export interface StreamOptions {
  config: Config;
  url: string;
  filter: Filter;
  /** First subscription's since (seconds); default now. */
  since?: number;
  verifier?: Verifier;
  /** Called with each line of news (connected, dropped, ...). */
  log?: (text: string) => void;
  onProgress?: (s: StreamSummary) => void;
  /** Received events waiting to be stored, at most (default MAX_QUEUED). */
  maxQueued?: number;
  /** Backoff bounds, for tests. */
  backoffFirstMs?: number;
  backoffCapMs?: number;
}

export interface StreamSummary extends ImportCounts {
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
export function importInto(db: Db, config: Config, verifier: Verifier | undefined): Ingest {
  return (events) => importParsed(db, [events], { config, verifier, batchSize: 1000 });
}

export function streamFromRelay(db: Db, opts: StreamOptions): Streamer {
  return followRelay(opts, importInto(db, opts.config, opts.verifier));
}

/** The subscription, reconnection and batching of a stream; `ingest` stores what arrives. */
export function followRelay(opts: StreamOptions, ingest: Ingest): Streamer {
  const log = opts.log ?? (() => {});
  const maxQueued = opts.maxQueued ?? MAX_QUEUED;
  const started = performance.now();
  const s: StreamSummary = {
    lines: 0, accepted: 0, duplicate: 0, older: 0, deleted: 0, refused: 0, ephemeral: 0, badJson: 0, badEvent: 0, badId: 0, badSig: 0,
    received: 0, connects: 0, drops: 0, newest: opts.since ?? Math.floor(Date.now() / 1000), seconds: 0,
  };
  let since = opts.since ?? Math.floor(Date.now() / 1000);
  let stopped = false;
  let relay: RelayClient | undefined;
  let queue: NostrEvent[] = [];
  /** Wakes the importer (events queued, or stopping). */
  let wake: (() => void) | undefined;
  const poke = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  /** Ends the connector's backoff sleep early (stopping). */
  let interrupt: (() => void) | undefined;
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(() => ((interrupt = undefined), resolve()), ms);
      interrupt = () => (clearTimeout(t), (interrupt = undefined), resolve());
    });

  /** One import per gathered burst; runs until stopped and the queue is empty. */
  async function importer(): Promise<void> {
    for (;;) {
      if (queue.length === 0) {
        if (stopped) return;
        await new Promise<void>((resolve) => (wake = resolve));
        continue;
      }
      if (!stopped) await Bun.sleep(GATHER_MS);
      const batch = queue;
      queue = [];
      let r;
      try {
        r = await ingest(batch);
      } catch (e) {
        log(`could not store ${batch.length} events: ${(e as Error).message}`);
        continue;
      }
      for (const k of ["lines", "accepted", "duplicate", "older", "deleted", "refused", "ephemeral", "badJson", "badEvent", "badId", "badSig"] as const) s[k] += r[k];
      for (const p of r.problems) log(`refused an event: ${p.reason}`);
      s.seconds = (performance.now() - started) / 1000;
      opts.onProgress?.(s);
    }
  }

  async function connector(): Promise<void> {
    let attempt = 0;
    while (!stopped) {
      try {
        relay = await RelayClient.connect(opts.url);
      } catch (e) {
        const wait = backoffDelay(attempt++, opts.backoffFirstMs, opts.backoffCapMs);
        log(`${(e as Error).message}; retrying in ${(wait / 1000).toFixed(1)} s`);
        await sleep(wait);
        continue;
      }
      if (stopped) {
        relay.close();
        break;
      }
      s.connects++;
      const r = relay;
      const closed = new Promise<string>((resolve) => r.onClose(resolve));
      const subId = "stream";
      const filter: Filter = { ...opts.filter, since };
      r.subscribe(subId, (f) => {
        if (f[0] === "EVENT") {
          // A remote sending faster than we store: stop reading it rather than queue without
          // bound; the reconnect resubscribes from the newest event taken.
          if (queue.length >= maxQueued) {
            if (!r.closed) log(`${opts.url} sends faster than events are stored (${maxQueued} waiting): reconnecting`);
            return r.close();
          }
          const e = f[2] as NostrEvent;
          s.received++;
          if (typeof e?.created_at === "number" && e.created_at > s.newest && e.created_at <= Date.now() / 1000 + 3600) s.newest = e.created_at;
          queue.push(e);
          poke();
        } else if (f[0] === "EOSE") {
          attempt = 0; // a working subscription: the next drop starts the backoff over
          log(`subscribed to ${opts.url} since ${since}`);
        } else if (f[0] === "CLOSED") {
          log(`${opts.url} closed the subscription: ${String(f[2])}`);
          r.close();
        }
      });
      r.send(["REQ", subId, filter]);
      const reason = await closed;
      if (stopped) break;
      s.drops++;
      since = Math.max(0, s.newest - RESUBSCRIBE_MARGIN_S);
      const wait = backoffDelay(attempt++, opts.backoffFirstMs, opts.backoffCapMs);
      log(`${opts.url}: ${reason}; reconnecting in ${(wait / 1000).toFixed(1)} s`);
      await sleep(wait);
    }
  }

  const importing = importer();
  const connecting = connector();
  const done = (async () => {
    await connecting;
    await importing;
    s.seconds = (performance.now() - started) / 1000;
    return s;
  })();
  return {
    done,
    summary: () => s,
    stop() {
      if (stopped) return;
      stopped = true;
      relay?.close();
      interrupt?.();
      poke();
    },
  };
}
