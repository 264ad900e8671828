// A REQ's stored events, up to its snapshot (strfry's RelayReqWorker, khatru's responding.go):
// the answer memory holds (relay/answers/), or a read of the store streamed to the socket batch
// by batch. The last batch is handed on to the live side (relay/read/live.ts), to go out with the
// catch-up and EOSE in one write.
import { log } from "../../log.ts";
import { nowSeconds } from "../../protocol/event.ts";
import { QueryTimeoutError, ReaderBusyError, ReadStoppedError, StoreClosedError, type QueryJob, type RowBatch } from "../../store/types.ts";
import type { Keeping, MemoryQuery } from "../answers/memory.ts";
import { OVER_BUDGET, queryBudget } from "../connection/budget.ts";
import type { RelayContext } from "../context.ts";
import type { Socket } from "../connection/session.ts";
import { stillOpen, type OpenReq } from "./subscriptions.ts";

/**
 * The REQ's stored events committed up to `maxSeq`: all sent but the last batch (EVENT frames),
 * which is returned; or the refusal (over its query budget, a failed read); or undefined when the
 * subscription ended meanwhile.
 */
export async function storedEvents(
  ctx: RelayContext,
  ws: Socket,
  req: OpenReq,
  maxSeq: number,
): Promise<readonly string[] | string | undefined> {
  const { limits } = ctx.config;
  const { filters } = req.sub;
  const perFilter = clampLimits(
    filters.map((f) => (f.neverMatch ? 0 : Math.min(f.limit ?? limits.default_limit, limits.max_limit))),
    limits.max_events_per_req,
  );
  if (!perFilter.some((n) => n > 0)) return [];
  const now = ctx.config.nips.nip40 ? nowSeconds() : 0;
  // A single filter may be answered from memory, with no reader and no budget.
  const single: MemoryQuery | undefined =
    filters.length === 1
      ? {
          f: filters[0]!,
          limit: perFilter[0]!,
          now,
          restricted: req.reader.restricted,
          anonymous: req.reader.authed.size === 0,
          partial: req.reader.visibility.groups !== undefined,
        }
      : undefined;
  const memory = single && ctx.answers.answer(single);
  if (memory) {
    ctx.metrics.memoryAnswers[memory.from]++;
    return memory.events.map((json) => `${req.prefix}${json}]`);
  }
  // Or memory keeps the store's answer for the next such REQ.
  const keeping = single && ctx.answers.keeping(single);
  const budget = queryBudget(ctx, ws.data);
  if (!budget) return OVER_BUDGET;
  const job: QueryJob = {
    filters: filters.map((f) => f.source),
    limits: perFilter,
    maxSeq,
    now,
    visibility: req.reader.visibility,
    frame: req.prefix,
  };
  return readStore(ctx, ws, req, ctx.store.query(job, budget), single && keeping && { q: single, keeping });
}

/** What memory keeps of a stored read (MemoryAnswers.keep). */
interface Keep {
  q: MemoryQuery;
  keeping: Keeping;
}

/**
 * Stored events stream in batches: each is sent before the next is read, and while the socket
 * holds more than its share of unsent bytes the read waits (docs/operations.md). The batch the
 * store marks as the last is returned, not sent.
 */
async function readStore(
  ctx: RelayContext,
  ws: Socket,
  req: OpenReq,
  batches: AsyncIterable<RowBatch>,
  keep: Keep | undefined,
): Promise<readonly string[] | string | undefined> {
  const s = ws.data;
  const served: string[] | undefined = keep ? [] : undefined;
  let sent = 0;
  let last: readonly string[] = [];
  try {
    for await (const rows of batches) {
      if (!stillOpen(ws, req)) break;
      if (rows.last) {
        last = rows;
        break;
      }
      served?.push(...rows);
      ws.cork(() => {
        for (const frame of rows) ws.send(frame, s.deflate);
      });
      sent += rows.length;
      if (ws.getBufferedAmount() > highWater(ctx)) await drained(ws);
      if (!stillOpen(ws, req)) break;
    }
  } catch (err) {
    ctx.metrics.sent.EVENT += sent;
    return readFailure(err, "query");
  }
  ctx.metrics.sent.EVENT += sent;
  if (!stillOpen(ws, req)) return undefined;
  if (keep) ctx.answers.keep(keep.q, keep.keeping, [...served!, ...last], req.prefix.length);
  return last;
}

/** Scales per-filter limits down so that together they stay within `cap`. */
function clampLimits(limits: number[], cap: number): number[] {
  const total = limits.reduce((a, b) => a + b, 0);
  if (total <= cap) return limits;
  return limits.map((n) => (n === 0 ? 0 : Math.max(1, Math.floor((n * cap) / total))));
}

/** Unsent bytes above which a REQ stops reading stored events until the socket drains. */
const highWater = (ctx: RelayContext) => Math.min(1024 * 1024, ctx.config.limits.max_pending_bytes / 4);

/** Resolves when the socket has drained (Bun's drain callback) or closed. */
function drained(ws: Socket): Promise<void> {
  return new Promise((resolve) => ws.data.drainWaiters.push(resolve));
}

/** The refusal text for a failed read (REQ, COUNT, NEG-OPEN). */
export function readFailure(err: unknown, what: string): string {
  if (err instanceof QueryTimeoutError) return `error: ${what} took too long and was stopped`;
  if (err instanceof ReadStoppedError) return err.message;
  if (err instanceof ReaderBusyError) return "rate-limited: the relay is busy, try again shortly";
  if (err instanceof StoreClosedError) return "error: the relay is shutting down";
  log.error(`${what} failed:`, err);
  return `error: could not run the ${what}`;
}
