// One message, in its turn (connection/fair.ts), to its handler: size-checked, parsed
// (protocol/messages.ts), counted, and handed to the file of its verb: EVENT to write/ingest.ts,
// REQ and COUNT to read/req.ts, CLOSE to read/subscriptions.ts, NEG-* to read/neg.ts, AUTH to
// auth.ts.
import { log } from "../log.ts";
import { parseClientMessage, SubscriptionError } from "../protocol/messages.ts";
import { ProtocolError } from "../protocol/reasons.ts";
import { handleAuth } from "./auth.ts";
import { closedFrame, noticeFrame, okFrame, send, type Socket } from "./connection/session.ts";
import type { RelayContext } from "./context.ts";
import { handleNegClose, handleNegMsg, handleNegOpen, refuseNeg } from "./read/neg.ts";
import { handleCount, handleReq } from "./read/req.ts";
import { closeSubscription } from "./read/subscriptions.ts";
import { handleEvent } from "./write/ingest.ts";

/** A handler's unexpected failure is logged by its verb (made once, not per frame). */
const failedHandler = (verb: string) => (err: unknown) => log.error(`${verb} handler failed:`, err);
const FAILED = { EVENT: failedHandler("EVENT"), REQ: failedHandler("REQ"), AUTH: failedHandler("AUTH"), COUNT: failedHandler("COUNT") };

export function onMessage(ctx: RelayContext, ws: Socket, message: string | Buffer): void {
  if (typeof message !== "string") {
    ctx.metrics.received.invalid++;
    return send(ws, noticeFrame(ctx.metrics, "invalid: binary frames are not supported, send JSON text"));
  }
  const max = ctx.config.limits.max_message_bytes;
  if (message.length > max / 3 && (message.length > max || Buffer.byteLength(message) > max)) {
    ctx.metrics.received.invalid++;
    return answerUnread(ctx, ws, message, `invalid: message is larger than ${max} bytes`);
  }
  let msg;
  const started = performance.now();
  try {
    msg = parseClientMessage(message, { maxSubIdLength: ctx.config.limits.max_subid_length, maxFilters: ctx.config.limits.max_filters });
  } catch (err) {
    ctx.metrics.received.invalid++;
    if (err instanceof SubscriptionError) return send(ws, closedFrame(ctx.metrics, err.subId, err.text));
    if (err instanceof ProtocolError) return send(ws, noticeFrame(ctx.metrics, err.text));
    throw err;
  }
  ctx.metrics.received[msg.type]++;
  switch (msg.type) {
    case "EVENT":
      return void handleEvent(ctx, ws, msg.event).catch(FAILED.EVENT);
    case "REQ":
      return void handleReq(ctx, ws, msg.subId, msg.filters).catch(FAILED.REQ);
    case "CLOSE":
      return void closeSubscription(ctx, ws, msg.subId);
    case "AUTH":
      return void handleAuth(ctx, ws, msg.event)?.catch(FAILED.AUTH);
    case "COUNT":
      return void handleCount(ctx, ws, msg.subId, msg.filters).catch(FAILED.COUNT);
    case "NEG-OPEN":
      return handleNegOpen(ctx, ws, msg.subId, msg.filter, msg.message, performance.now() - started);
    case "NEG-MSG":
      return handleNegMsg(ctx, ws, msg.subId, msg.message, performance.now() - started);
    case "NEG-CLOSE":
      return handleNegClose(ctx, ws, msg.subId);
  }
}

/** A JSON string literal's value, or undefined if it is not a valid one (bad escapes, raw control characters). */
function parseJsonString(literal: string): string | undefined {
  try {
    const v = JSON.parse(literal) as unknown;
    return typeof v === "string" && v.length > 0 ? v : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A message refused unread (over max_message_bytes, or over its address's inflation budget):
 * answered in the terms of what it claims to be, so an EVENT still gets its OK.
 */
export function answerUnread(ctx: RelayContext, ws: Socket, message: string, text: string): void {
  const head = message.slice(0, 512);
  if (/^\s*\[\s*"EVENT"/.test(head)) {
    // Inside a JSON string a quote is escaped, so this only matches an object key.
    const id = /"id"\s*:\s*"([0-9a-f]{64})"/.exec(message)?.[1] ?? "";
    ctx.metrics.countEventResult(undefined, false, text);
    return send(ws, okFrame(ctx.metrics, id, false, text));
  }
  const sub = /^\s*\[\s*"(REQ|COUNT|NEG-OPEN|NEG-MSG)"\s*,\s*("(?:[^"\\]|\\.){1,384}")/.exec(head);
  const subId = sub ? parseJsonString(sub[2]!) : undefined;
  if (sub && subId !== undefined) {
    if (sub[1]!.startsWith("NEG-")) {
      return refuseNeg(ctx, ws, subId, text, sub[1] === "NEG-OPEN"); // after NEG-ERR the session is closed (NIP-77)
    }
    return send(ws, closedFrame(ctx.metrics, subId, text));
  }
  send(ws, noticeFrame(ctx.metrics, text));
}
