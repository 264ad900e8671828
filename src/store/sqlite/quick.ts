// Point lookups answered on the main thread (issue 35, one hop for a cheap REQ). A REQ whose cost
// an index bounds (lanes.ts isPointLookup: a few ids, one value of one tag with a small limit, an
// author's replaceables) is read through the main thread's own connection with the readers' own
// planner (query.ts queryFrames: the same job, the same visibility residual, the same answer),
// instead of crossing to a reader thread and back. On a two-core box each crossing waits for a
// thread to wake: side by side with strfry the shapes a reader served took 1.1-1.8 ms longer at
// the client than strfry's while the answers from memory did not, with a third of the cores idle
// (bench/RESULTS.md, "Issue 35: the quiet-box side by side").
//
// The main thread serves every socket, so what it reads is bounded three ways:
// - a lookup that is not done after PER_LOOKUP_MS of reading, or that has read PER_LOOKUP_BYTES
//   of events, is dropped unsent (the steps are closed) and goes to the readers from the start;
// - at most SHARE_MS of every second is spent here, then lookups go to the readers until the
//   next second;
// - a read whose client's budget says stop goes to the readers, which answer it as before.
// Each chunk of index entries query.ts reads starts at 16 and grows only while it is cheap, so a
// lookup stops within about one such chunk of its limit.
import type { Database } from "bun:sqlite";
import type { QueryJob, ReadContext, RowBatch } from "../types.ts";
import { queryFrames, StatementCache } from "./query.ts";

/** Reading one lookup may take this long on the main thread before it is handed to the readers. */
export const PER_LOOKUP_MS = 2;
/** ... or this many bytes of events (an answer this size is the readers' to stream). */
export const PER_LOOKUP_BYTES = 256 * 1024;
/**
 * Main-thread reading, most ms in each second: the rest of the main thread's time stays for the
 * sockets, ingest and fanout. With 150 a third of the issue-15 mix's lookups went to the readers
 * and half the gain was lost (bench/RESULTS.md).
 */
export const SHARE_MS = 400;

/** The bounds above, one object per store (a test narrows them). */
export interface LookupLimits {
  perLookupMs: number;
  perLookupBytes: number;
  shareMs: number;
}

export class MainThreadLookups {
  private readonly cache: StatementCache;
  readonly limits: LookupLimits = { perLookupMs: PER_LOOKUP_MS, perLookupBytes: PER_LOOKUP_BYTES, shareMs: SHARE_MS };
  private second = 0;
  private usedMs = 0;
  /** Lookups answered here, and handed on (over a limit, or the share spent): for the bench and tests. */
  readonly counts = { answered: 0, handedOn: 0 };

  constructor(db: Database) {
    this.cache = new StatementCache(db);
  }

  /**
   * The whole answer as one batch marked last, or undefined: not read here (the share is spent,
   * or the client's budget says stop) or dropped at a limit. Its reading time is charged to ctx.
   */
  answer(job: QueryJob, ctx?: ReadContext): RowBatch | undefined {
    const now = performance.now();
    const second = Math.floor(now / 1000);
    if (second !== this.second) {
      this.second = second;
      this.usedMs = 0;
    }
    if (this.usedMs >= this.limits.shareMs || ctx?.stop?.() !== undefined) {
      this.counts.handedOn++;
      return undefined;
    }
    const steps = queryFrames(this.cache, job);
    const rows: RowBatch = [];
    let bytes = 0;
    let done = false;
    try {
      for (;;) {
        const r = steps.next();
        if (r.done) {
          done = true;
          break;
        }
        for (const frame of r.value ?? []) {
          rows.push(frame);
          bytes += frame.length;
        }
        if (performance.now() - now > this.limits.perLookupMs || bytes > this.limits.perLookupBytes) break;
      }
    } catch {
      // Not done: the readers read it again, and answer (or fail) it as they do every read.
    }
    if (!done) steps.return(undefined);
    const ms = performance.now() - now;
    this.usedMs += ms;
    ctx?.onCost?.(ms);
    if (!done) {
      this.counts.handedOn++;
      return undefined;
    }
    this.counts.answered++;
    rows.last = true;
    ctx?.onEnd?.(ms);
    return rows;
  }
}

/** One batch as the store's stream. */
export async function* oneBatch(rows: RowBatch): AsyncGenerator<RowBatch> {
  yield rows;
}
