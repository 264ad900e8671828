// `bunstr sync`: NIP-77 reconciliation of the local database with a remote relay, then the
// missing events downloaded (through the import pipeline: shape, policies, id, duplicate,
// signature, SqliteWriter) and/or uploaded (EVENT, counted by the relay's OK).
// The local side's items are read straight from SQLite (a relay may be running on the file).
// A remote without NIP-77 (NEG-ERR, NOTICE or silence for NEG-OPEN) gets a plain REQ download
// of the filter instead, paged backwards by `until`.
import type { Config } from "../config/schema.ts";
import { NegentropyClient } from "../nips/nip77-client.ts";
import { NegentropyError, NegentropyStorage } from "../nips/nip77.ts";
import { nowSeconds, type NostrEvent } from "../protocol/event.ts";
import type { Filter } from "../protocol/filter.ts";
import { isAddressable, isReplaceable } from "../protocol/kinds.ts";
import type { BulkStore, EventHead } from "../store/types.ts";
import type { Verifier } from "../verify/pool.ts";
import { parseExportFilter } from "./export.ts";
import type { GroupState } from "../groups/state.ts";
import { importParsed, type ImportSummary } from "./import.ts";
import { RelayClient } from "./relay-client.ts";

export type Direction = "down" | "up" | "both";

/** Ids per REQ when downloading by id (relays allow 1,000 filter values by default). */
const ID_CHUNK = 500;
/** Events per REQ page of the fallback download. */
const PAGE = 500;
/** EVENTs in flight while uploading (relays allow 1,000 pending per connection by default). */
const UPLOAD_WINDOW = 100;
/** Binary negentropy message size; 60 KB of hex on the wire, as nostr-tools sends. */
const FRAME_LIMIT = 30_000;
const NEG_TIMEOUT_MS = 15_000;

interface SyncOptions {
  config: Config;
  url: string;
  filter: Filter;
  direction: Direction;
  verifier?: Verifier;
  /** NIP-29: the local group state (import.ts importGroupState), for what is downloaded. */
  groups?: GroupState;
  /** Short texts of what is happening, for a progress line. */
  onProgress?: (text: string) => void;
}

export interface SyncSummary {
  /** "negentropy", or "fallback" (a plain REQ download) and why. */
  method: "negentropy" | "fallback";
  fallbackReason?: string;
  /** Local events matching the filter. */
  local: number;
  /** Only here (the remote lacks them). */
  have: number;
  /** Only there (we lack them). */
  need: number;
  /** Events received from the remote for the download. */
  received: number;
  /** The import of what was received (undefined with --dir up). */
  imported?: ImportSummary;
  /** Only there, asked for and not sent by the remote (it refused to serve them or no longer holds them). */
  notReceived: number;
  /** OK true from the remote, new there. */
  uploaded: number;
  /** OK true with `duplicate:` from the remote: it held them, though its NIP-77 answer did not list them. */
  alreadyThere: number;
  /** OK false from the remote, by reason prefix ("blocked", "invalid", ...). */
  refused: Record<string, number>;
  /**
   * Only here, yet no longer stored here when their turn to go up came, by why: an event the
   * download brought (or the relay running on the database) replaced or deleted them.
   */
  gone: Record<string, number>;
  roundTrips: number;
  seconds: number;
}

/**
 * A filter for sync, stream or a mirror: a NIP-01 filter object without limit. Errors name no
 * option: the caller prefixes its own (--filter, [mirror] filter); `command` is who is asking.
 */
export function parseSyncFilter(text: string | undefined, command: string): Filter {
  if (text === undefined) return {};
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new Error(`not JSON: ${text.slice(0, 80)}`);
  }
  if (raw && typeof raw === "object" && "limit" in raw) throw new Error(`limit has no meaning for ${command} (use since/until)`);
  return parseExportFilter(text).source;
}

/** (created_at, id) of every local event matching the filter, hidden expired ones left out as the relay does. */
export async function localItems(db: BulkStore, filter: Filter, config: Config): Promise<NegentropyStorage> {
  const items = await db.negItems(filter, config.nips.nip40 ? nowSeconds() : 0);
  return NegentropyStorage.fromPacked(items.timestamps, items.ids);
}

/** Local events by id, as stored. */
export async function localEvents(db: BulkStore, ids: string[]): Promise<string[]> {
  return (await db.exportPager({ ids, now: 0 })(0, Number.MAX_SAFE_INTEGER, ids.length)).map((r) => r.json);
}

type NegResult = { have: Set<string>; need: Set<string>; roundTrips: number } | { fallback: string; roundTrips: number };

/** NEG-OPEN ... NEG-MSG ... until our side has nothing left to ask; a NEG-ERR, NOTICE or silence asks for the fallback. */
function negotiate(relay: RelayClient, filter: Filter, storage: NegentropyStorage): Promise<NegResult> {
  const client = new NegentropyClient(storage, FRAME_LIMIT);
  const subId = `sync-${Math.random().toString(36).slice(2, 10)}`;
  const have = new Set<string>();
  const need = new Set<string>();
  let roundTrips = 0;
  return new Promise((resolve) => {
    let timer: ReturnType<typeof setTimeout>;
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(
        () => finish({ fallback: `no answer to NEG-${roundTrips === 0 ? "OPEN" : "MSG"} in ${NEG_TIMEOUT_MS / 1000} s`, roundTrips }),
        NEG_TIMEOUT_MS,
      );
    };
    const finish = (r: NegResult) => {
      clearTimeout(timer);
      relay.unsubscribe(subId);
      relay.onNotice(undefined);
      resolve(r);
    };
    relay.onNotice((m) => finish({ fallback: `NOTICE: ${m}`, roundTrips }));
    relay.subscribe(subId, (f) => {
      if (f[0] === "NEG-ERR") return finish({ fallback: `NEG-ERR: ${String(f[2])}`, roundTrips });
      if (f[0] === "DROPPED") return finish({ fallback: "the connection closed", roundTrips });
      if (f[0] !== "NEG-MSG") return;
      roundTrips++;
      arm();
      let next: string | null;
      try {
        next = client.reconcile(
          String(f[2]),
          (id) => have.add(id),
          (id) => need.add(id),
        );
      } catch (e) {
        if (!(e instanceof NegentropyError)) throw e;
        relay.send(["NEG-CLOSE", subId]);
        return finish({ fallback: `bad negentropy message: ${e.message}`, roundTrips });
      }
      if (next === null) {
        relay.send(["NEG-CLOSE", subId]);
        return finish({ have, need, roundTrips });
      }
      relay.send(["NEG-MSG", subId, next]);
    });
    arm();
    relay.send(["NEG-OPEN", subId, filter, client.initiate()]);
  });
}

/**
 * A relay answers newest first; stored here oldest first (a group's 9007 before its 9000s: the
 * group state is rebuilt in commit order), a create before the other kinds of its second. The
 * chunks come in the negentropy's order, which is by time already.
 */
const oldestFirst = (events: NostrEvent[]): NostrEvent[] =>
  events.sort((a, b) => a.created_at - b.created_at || Number(b.kind === 9007) - Number(a.kind === 9007));

export async function syncWithRelay(db: BulkStore, opts: SyncOptions): Promise<SyncSummary> {
  const started = performance.now();
  const { filter, direction } = opts;
  const down = direction !== "up";
  const up = direction !== "down";
  const progress = opts.onProgress ?? (() => {});
  const storage = await localItems(db, filter, opts.config);
  const s: SyncSummary = {
    method: "negentropy",
    local: storage.size,
    have: 0,
    need: 0,
    received: 0,
    notReceived: 0,
    uploaded: 0,
    alreadyThere: 0,
    refused: {},
    gone: {},
    roundTrips: 0,
    seconds: 0,
  };
  const relay = await RelayClient.connect(opts.url);
  try {
    progress(`reconciling ${storage.size} local events with ${opts.url}`);
    const neg = await negotiate(relay, filter, storage);
    s.roundTrips = neg.roundTrips;
    let have: string[];
    let heads = new Map<string, EventHead>();
    if ("fallback" in neg) {
      if (relay.closed) throw new Error(`${opts.url}: ${neg.fallback}`);
      s.method = "fallback";
      s.fallbackReason = neg.fallback;
      // Everything the remote serves for the filter; what we hold and it did not list goes up.
      const remote = new Set<string>();
      let received = 0;
      const pages = fallbackPages(relay, filter, (n) => progress(`downloading (no NIP-77): ${(received += n)} events`));
      const downloads = (async function* () {
        for await (const page of pages) {
          const fresh = page.filter((e) => !remote.has(e.id));
          for (const e of fresh) remote.add(e.id);
          s.received += fresh.length;
          if (down && fresh.length > 0) yield fresh;
        }
      })();
      if (down) s.imported = await importParsed(db, downloads, { config: opts.config, verifier: opts.verifier, groups: opts.groups });
      else for await (const _ of downloads);
      const local = new Set<string>();
      const ids = storage.idBytes(0, storage.size);
      for (let o = 0; o < ids.length; o += 32) local.add(Buffer.from(ids.subarray(o, o + 32)).toString("hex"));
      have = [...local].filter((id) => !remote.has(id));
      s.need = [...remote].filter((id) => !local.has(id)).length;
    } else {
      have = [...neg.have];
      s.need = neg.need.size;
      // What a download may replace or delete here, to say so if it does.
      if (up && down && neg.need.size > 0) heads = await db.eventHeads(have);
      if (down && neg.need.size > 0) {
        const need = [...neg.need];
        const downloads = (async function* () {
          for (let i = 0; i < need.length; i += ID_CHUNK) {
            const chunk = need.slice(i, i + ID_CHUNK);
            const got: NostrEvent[] = [];
            const end = await relay.fetch(`get-${i}`, { ids: chunk, limit: chunk.length }, (e) => got.push(e));
            if (end !== "eose") throw new Error(`${opts.url} refused the download: ${end}`);
            s.received += got.length;
            progress(`downloading: ${s.received} of ${need.length}`);
            if (got.length > 0) yield oldestFirst(got);
          }
        })();
        s.imported = await importParsed(db, downloads, { config: opts.config, verifier: opts.verifier, groups: opts.groups });
        s.notReceived = s.need - s.received;
      }
    }
    s.have = have.length;
    if (up && have.length > 0) await upload(db, relay, have, heads, s, progress);
  } finally {
    relay.close();
  }
  s.seconds = (performance.now() - started) / 1000;
  return s;
}

/** The filter's events, newest first, a page at a time, each page ending `until` the oldest so far. */
async function* fallbackPages(relay: RelayClient, filter: Filter, onPage: (n: number) => void): AsyncGenerator<NostrEvent[]> {
  const seen = new Set<string>();
  let until = filter.until;
  for (let page = 0; ; page++) {
    const events: NostrEvent[] = [];
    const f: Filter = { ...filter, limit: PAGE };
    if (until !== undefined) f.until = until;
    const end = await relay.fetch(`page-${page}`, f, (e) => events.push(e));
    if (end !== "eose" && events.length === 0) throw new Error(`${relay.url} refused the download: ${end}`);
    const fresh = events.filter((e) => typeof e?.id === "string" && !seen.has(e.id));
    if (fresh.length === 0) return;
    for (const e of fresh) seen.add(e.id);
    onPage(fresh.length);
    yield fresh;
    // Inclusive: events sharing the oldest second may continue on the next page (seen drops repeats).
    const oldest = Math.min(...events.map((e) => (typeof e.created_at === "number" ? e.created_at : Infinity)));
    if (!Number.isFinite(oldest)) return;
    until = oldest;
  }
}

/** Why an event that was here at the reconciliation is not any more. */
async function goneReason(db: BulkStore, id: string, head: EventHead | undefined): Promise<string> {
  const tombstone = await db.tombstoneOf(id, head);
  if (tombstone === "nip09") return "deleted by a deletion request (NIP-09)";
  if (tombstone === "nip62") return "erased by a request to vanish (NIP-62)";
  if (head && (isReplaceable(head.kind) || isAddressable(head.kind))) return "replaced by a newer version";
  return head ? "deleted here meanwhile" : "no longer stored here (replaced or deleted)";
}

async function upload(
  db: BulkStore,
  relay: RelayClient,
  ids: string[],
  heads: Map<string, EventHead>,
  s: SyncSummary,
  progress: (t: string) => void,
): Promise<void> {
  for (let i = 0; i < ids.length; i += ID_CHUNK) {
    const chunk = ids.slice(i, i + ID_CHUNK);
    const events = (await localEvents(db, chunk)).map((j) => JSON.parse(j) as NostrEvent);
    const found = new Set(events.map((e) => e.id));
    for (const id of chunk)
      if (!found.has(id)) {
        const why = await goneReason(db, id, heads.get(id));
        s.gone[why] = (s.gone[why] ?? 0) + 1;
      }
    let next = 0;
    const worker = async () => {
      while (next < events.length) {
        const e = events[next++]!;
        const { ok, message } = await relay.publish(e);
        if (ok && message.startsWith("duplicate:")) s.alreadyThere++;
        else if (ok) s.uploaded++;
        else {
          const reason = message.includes(":") ? message.slice(0, message.indexOf(":")) : message || "refused";
          s.refused[reason] = (s.refused[reason] ?? 0) + 1;
        }
        progress(`uploading: ${s.uploaded} of ${ids.length}`);
      }
    };
    await Promise.all(Array.from({ length: Math.min(UPLOAD_WINDOW, events.length) }, worker));
    if (relay.closed) throw new Error(`${relay.url}: the connection closed during the upload`);
  }
}
