// The web of trust's schedule (issue 33): a first graph from the relay's own store
// at start, then every [web_of_trust] refresh_seconds the follow lists fetched from the relays
// the config names and a rebuild. A fetch is a plain REQ per 500 authors (kind 3, EOSE, CLOSE;
// ops/relay-client.ts), the seeds' first and, at depth 2, then the depth-1 pubkeys'; what comes
// back goes through the pipeline as a [mirror]'s events do (write/mirror.ts ingestInto), so it
// is stored, and fanned out, like any follow list. NIP-77 would fetch less, but needs a BulkStore
// (ops/sync.ts); a REQ per chunk is what runs inside the relay.
import { log } from "../log.ts";
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
/**
 * Events a relay may send for one REQ: a kind 3 is replaceable, so an honest answer has one per
 * author. Past this the connection is dropped: REQ_TIMEOUT_MS is re-armed by each frame, so a
 * relay that never sends EOSE would otherwise hold the refresh, and grow `events`, without end.
 */
const MAX_EVENTS_PER_REQ = 4 * AUTHORS_PER_REQ;

/**
 * Builds the first graph now, fetches from the relays right after it (a fresh relay learns its
 * web at once), then refreshes on the schedule until the relay closes (ctx.closing: the engine
 * stops building, the timer does not hold the process, a fetch under way stores nothing more).
 */
export function startWotRefresh(ctx: RelayContext, wot: WebOfTrust, say: (line: string) => void = (line) => log.info(line)): void {
  // Read at each use: a reload changes the config in place.
  const settings = () => ctx.config.web_of_trust;
  const refresh = async (): Promise<void> => {
    for (const url of settings().relays) {
      if (ctx.closing) return;
      await fetchFrom(ctx, wot, url).catch((e) => say(`wot: ${url}: ${(e as Error).message}`));
    }
    await wot.rebuild();
  };
  const schedule = () => {
    if (!ctx.closing) setTimeout(() => void refresh().finally(schedule), settings().refresh_seconds * 1000).unref();
  };
  void wot
    .rebuild()
    .then(() => (settings().relays.length > 0 ? refresh() : undefined))
    .finally(schedule);
}

/**
 * The follow lists of the seeds, then (depth 2) of the depth-1 pubkeys, from one relay into this
 * one. The depth-1 pubkeys are those of a graph rebuilt after the seeds' lists came in.
 */
async function fetchFrom(ctx: RelayContext, wot: WebOfTrust, url: string): Promise<void> {
  const client = await RelayClient.connect(url, CONNECT_TIMEOUT_MS);
  try {
    const ingest = ingestInto(ctx);
    await fetchLists(ctx, client, [...wot.current.keysAtDepth(0)], ingest);
    if (ctx.config.web_of_trust.depth < 2) return;
    await wot.rebuild();
    await fetchLists(ctx, client, [...wot.current.keysAtDepth(1)], ingest);
  } finally {
    client.close();
  }
}

/**
 * One REQ per chunk of authors; each chunk's events stored before the next is asked for. Only
 * what was asked for is kept (a kind 3 of an author of the chunk): the other relay's word is
 * taken for nothing else, and admit checks each signature.
 */
async function fetchLists(ctx: RelayContext, client: RelayClient, authors: readonly string[], ingest: Ingest): Promise<void> {
  for (let i = 0; i < authors.length && !ctx.closing; i += AUTHORS_PER_REQ) {
    const chunk = authors.slice(i, i + AUTHORS_PER_REQ);
    const asked = new Set(chunk);
    const events: NostrEvent[] = [];
    let received = 0;
    const end = await client
      .fetch(
        `wot-${i / AUTHORS_PER_REQ}`,
        { kinds: [FOLLOW_LIST_KIND], authors: chunk, limit: chunk.length },
        (e) => {
          if (++received > MAX_EVENTS_PER_REQ) return client.close();
          if (e?.kind === FOLLOW_LIST_KIND && asked.has(e.pubkey)) events.push(e);
        },
        REQ_TIMEOUT_MS,
      )
      .catch((err: Error) => {
        throw received > MAX_EVENTS_PER_REQ ? new Error(`more than ${MAX_EVENTS_PER_REQ} events for one REQ: dropped`) : err;
      });
    if (events.length > 0 && !ctx.closing) await ingest(events);
    if (end !== "eose") throw new Error(`the relay closed the REQ: ${end}`);
  }
}
