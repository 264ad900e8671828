// The web of trust's schedule (issue 33, design §8.3): a first graph from the relay's own store
// at start, then every [web_of_trust] refresh_seconds the follow lists fetched from the relays
// the config names and a rebuild. A fetch is a plain REQ per 500 authors (kind 3, EOSE, CLOSE;
// ops/relay-client.ts), the seeds' first and, at depth 2, then the depth-1 pubkeys'; what comes
// back goes through the pipeline as a [mirror]'s events do (write/mirror.ts ingestInto), so it
// is stored, and fanned out, like any follow list. NIP-77 would fetch less, but needs a BulkStore
// (ops/sync.ts); a REQ per chunk is what runs inside the relay.
import type { WebOfTrust } from "../access/wot.ts";
import { FOLLOW_LIST_KIND } from "../access/wot.ts";
import type { NostrEvent } from "../protocol/event.ts";
import { RelayClient } from "../ops/relay-client.ts";
import type { Ingest } from "../ops/stream.ts";
import type { RelayContext } from "./context.ts";
import { ingestInto } from "./write/mirror.ts";

/** Authors per REQ (one filter). */
const AUTHORS_PER_REQ = 500;
const CONNECT_TIMEOUT_MS = 10_000;
/** A REQ whose relay says nothing for this long is given up. */
const REQ_TIMEOUT_MS = 30_000;

export interface WotRefresh {
  /** Resolves when the first graph (from the store alone) is built. */
  readonly first: Promise<void>;
  /** Runs one refresh now (fetch, then rebuild); tests and the timer. */
  refresh(): Promise<void>;
  stop(): void;
}

/** Builds the first graph now and refreshes it on the schedule until stop() or the relay closes. */
export function startWotRefresh(ctx: RelayContext, wot: WebOfTrust, log: (line: string) => void = console.log): WotRefresh {
  // Read at each use: a reload changes the config in place.
  const settings = () => ctx.config.web_of_trust;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let halted = false;
  const stopped = () => halted || ctx.closing;
  let running: Promise<void> | undefined;
  const clients = new Set<RelayClient>();

  const refresh = (): Promise<void> =>
    (running ??= (async () => {
      for (const url of settings().relays) {
        if (stopped()) return;
        await fetchFrom(ctx, wot, url, clients).catch((e) => log(`wot: ${url}: ${(e as Error).message}`));
      }
      if (!stopped()) await wot.rebuild();
    })().finally(() => (running = undefined)));

  const schedule = () => {
    if (stopped()) return;
    timer = setTimeout(() => void refresh().finally(schedule), settings().refresh_seconds * 1000);
    timer.unref();
  };

  const first = wot.rebuild();
  // The relays' follow lists right after the first graph: a fresh relay learns its web at once.
  void first.then(() => (settings().relays.length > 0 ? refresh() : undefined)).finally(schedule);
  return {
    first,
    refresh,
    stop() {
      halted = true;
      wot.stop();
      clearTimeout(timer);
      for (const c of clients) c.close();
    },
  };
}

/**
 * The follow lists of the seeds, then (depth 2) of the depth-1 pubkeys, from one relay into this
 * one. The depth-1 pubkeys are those of a graph rebuilt after the seeds' lists came in.
 */
async function fetchFrom(ctx: RelayContext, wot: WebOfTrust, url: string, clients: Set<RelayClient>): Promise<void> {
  const client = await RelayClient.connect(url, CONNECT_TIMEOUT_MS);
  clients.add(client);
  try {
    const ingest = ingestInto(ctx);
    const seeds = [...wot.current.keysAtDepth(0)];
    await fetchLists(client, seeds, ingest);
    if (ctx.config.web_of_trust.depth < 2) return;
    await wot.rebuild();
    await fetchLists(client, [...wot.current.keysAtDepth(1)], ingest);
  } finally {
    clients.delete(client);
    client.close();
  }
}

/**
 * One REQ per chunk of authors; each chunk's events stored before the next is asked for. Only
 * what was asked for is kept (a kind 3 of an author of the chunk): the other relay's word is
 * taken for nothing else, and admit checks each signature.
 */
async function fetchLists(client: RelayClient, authors: readonly string[], ingest: Ingest): Promise<void> {
  for (let i = 0; i < authors.length; i += AUTHORS_PER_REQ) {
    const chunk = authors.slice(i, i + AUTHORS_PER_REQ);
    const asked = new Set(chunk);
    const events: NostrEvent[] = [];
    const end = await client.fetch(
      `wot-${i / AUTHORS_PER_REQ}`,
      { kinds: [FOLLOW_LIST_KIND], authors: chunk, limit: chunk.length },
      (e) => {
        if (e?.kind === FOLLOW_LIST_KIND && asked.has(e.pubkey)) events.push(e);
      },
      REQ_TIMEOUT_MS,
    );
    if (events.length > 0) await ingest(events);
    if (end !== "eose") throw new Error(`the relay closed the REQ: ${end}`);
  }
}
