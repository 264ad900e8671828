// The live side of reads (strfry's RelayReqMonitor, khatru's listener.go): what the store commits
// comes in here, in commit order, and goes out to the live subscriptions (relay/fanout/fanout.ts) and
// into the answers memory keeps (relay/answers/); a new subscription catches up on what was
// committed since its snapshot, then joins them.
import { log } from "../../log.ts";
import type { CommitFeed } from "../../store/types.ts";
import type { RelayContext } from "../context.ts";
import type { Socket } from "../connection/session.ts";
import type { OpenReq } from "./subscriptions.ts";

/**
 * The relay's side of the store's commit feed (store/types.ts CommitFeed), told in the
 * continuation of each commit: each event gets the next seq in the catch-up ring, goes out to
 * the live groups, then into memory's answers. Ephemeral events of other nodes only go out.
 */
export function liveFeed(ctx: RelayContext): Omit<CommitFeed, "adminChanged"> {
  const { fanout, answers } = ctx;
  return {
    committed(e, json) {
      const seq = fanout.broadcast(e, json);
      answers.stored(seq, e, json, fanout.ring.gatedAt(seq));
    },
    batchEnd: () => answers.batchEnd(),
    ephemeral: (e, json) => void fanout.broadcast(e, json),
  };
}

/**
 * A REQ's last batch of stored events, the events fanned out since its snapshot (`feedSeq`) and
 * EOSE, in one write; then the connection joins the subscription's group. All in one task, so no
 * event falls between the catch-up and the live feed, and none comes twice.
 */
export function catchUpAndJoin(ctx: RelayContext, ws: Socket, req: OpenReq, feedSeq: number, last: readonly string[]): void {
  const s = ws.data;
  const { subId, sub, prefix } = req;
  ws.cork(() => {
    for (const frame of last) ws.send(frame, s.deflate);
    ctx.metrics.sent.EVENT += last.length;
    const { events, complete } = ctx.fanout.recent(feedSeq, sub.filters);
    if (!complete) {
      // A client can make this happen again and again (slow queries while events pour in): a line a minute.
      const held = ctx.clientLines.take("catch-up ring overflow");
      if (held)
        log.warn(
          "a REQ's stored events took so long to read that the events published meanwhile overflowed the catch-up ring: " +
            `its subscriber missed some${held.count > 0 ? `; ${held.count} more such REQs since the last line` : ""}`,
        );
    }
    let caughtUp = 0;
    for (const r of events) {
      // r.event parses the JSON: only an event the ring marked gated needs it here.
      if (r.gated && !req.reader.canRead(r.event)) continue;
      ws.send(`${prefix}${r.json}]`, s.deflate);
      caughtUp++;
    }
    ws.send(`["EOSE",${JSON.stringify(subId)}]`);
    ctx.metrics.sent.EVENT += caughtUp;
    ctx.metrics.sent.EOSE++;
    ctx.metrics.reqSeconds.observe((performance.now() - req.started) / 1000);
    sub.group = ctx.fanout.join(ws, subId, sub.filters);
  });
}
