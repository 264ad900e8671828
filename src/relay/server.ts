// Bun.serve wiring and the relay's lifecycle: the listener with its HTTP (http/routes.ts, then the
// websocket upgrade in upgrade.ts), Bun's websocket handlers handing each message in its turn
// (connection/fair.ts) to dispatch.ts, reconfigure() after a reload, and close() (shutdown.ts).
import { log } from "../log.ts";
import type { Server, WebSocketCompressor, WebSocketHandler } from "bun";
import type { Config } from "../config/schema.ts";
import { httpRoutes } from "../http/routes.ts";
import { History } from "../observe/history.ts";
import { metricsRenderer } from "../observe/metrics.ts";
import { tally } from "../policy/ip.ts";
import { VERSION } from "../version.ts";
import { CLOSING, type Shutdown } from "./connection/drain.ts";
import { FairTurns, type Over } from "./connection/fair.ts";
import { FdGuard, type PartialCut } from "./connection/fd-guard.ts";
import { chargeInflation } from "./connection/inflation.ts";
import { cutWebsocket, noticeFrame, type Session, type Socket, wakeDrainWaiters, wireSize } from "./connection/session.ts";
import type { RelayContext } from "./context.ts";
import { answerUnread, onMessage } from "./dispatch.ts";
import { closeNeg } from "./read/neg.ts";
import { closeAllSubscriptions } from "./read/subscriptions.ts";
import { shutdown } from "./shutdown.ts";
import { upgrade } from "./upgrade.ts";
import { buildContext, type Live, type RelayOptions } from "./wiring.ts";
import { banPurger } from "./write/ban-purge.ts";
import { expirationSweeper } from "./write/expiration.ts";
import { startMirrors } from "./write/mirror.ts";

export type { Shutdown };

export interface Relay {
  readonly server: Server<Session>;
  readonly url: string;
  readonly ctx: RelayContext;
  /**
   * Resolves when the relay's state built from the store at start (the NIP-29 group state) is
   * ready: at once when groups are off. `serve` says "listening" only then.
   */
  readonly ready: Promise<void>;
  /**
   * Re-reads what is held outside ctx.config after a reload changed it in place: Bun's websocket
   * limits (frame size, backpressure, idle timeout; for open connections too) and the sweep timer.
   */
  reconfigure(): void;
  /**
   * Graceful stop: stop listening, refuse new work, finish in-flight events, commit, close the
   * sockets (1001 going away; 1012 service restart for "restart", when a new process took over
   * the port) and the store.
   */
  close(how?: Shutdown): Promise<void>;
}

/**
 * A URL a client on this machine can connect to: 0.0.0.0 and :: are not addresses one connects
 * to (their loopback instead), an IPv6 literal goes in brackets.
 */
function localUrl(host: string, port: number, path: string): string {
  const h = host === "0.0.0.0" || host === "" ? "127.0.0.1" : host === "::" ? "::1" : host;
  return `ws://${h.includes(":") ? `[${h}]` : h}:${port}${path}`;
}

/**
 * Messages above this are closed by Bun with 1009; between max_message_bytes and this we answer.
 * It is also what one connection's unfinished message can hold before the guard sees it
 * (connection/fd-guard.ts; issue 36): twice the message limit, at least 256 KiB, not more.
 */
const hardFrameLimit = (max: number) => Math.min(Math.max(2 * max, 256 * 1024), 256 * 1024 * 1024);

/** The config Bun's websocket layer holds; applied again by server.reload() when it changes. */
const socketLimits = (config: Config) => ({
  maxPayloadLength: hardFrameLimit(config.limits.max_message_bytes),
  backpressureLimit: config.limits.max_pending_bytes,
  idleTimeout: config.network.idle_timeout_seconds,
});

/**
 * Starts a relay: its context (buildContext), the listener with its HTTP router and websocket
 * handlers, the mirrors and the expiration sweep; reconfigure() and close() are its lifecycle.
 */
export function startRelay(opts: RelayOptions): Relay {
  const live = buildContext(opts);
  const { ctx, config } = live;
  // [mirror] relays: their new events stored and fanned out as if published here. Their
  // connections open asynchronously, after the listener below exists.
  const mirrors = startMirrors(ctx);
  const history = (live.history = new History(ctx).start());
  const fetch = httpRouter(live);
  const websocket = socketHandlers(live);
  const server = (live.server = Bun.serve<Session>({
    hostname: config.network.host,
    port: config.network.port,
    // SO_REUSEPORT: a new process may bind the port while this one drains (docs/operations.md).
    reusePort: config.network.reuse_port,
    // Never Bun's development error page (source lines, stack, working directory) to a client.
    development: false,
    error(err) {
      log.error("http handler failed:", err);
      return new Response("internal error", { status: 500 });
    },
    fetch,
    websocket,
  }));
  if (opts.fileLimit !== undefined)
    live.guard = FdGuard.start({
      limit: opts.fileLimit,
      port: server.port!,
      settings: () => ({
        headerTimeoutMs: config.network.header_timeout_seconds * 1000,
        maxPerIp: config.limits.max_http_connections_per_ip,
        trustedProxies: config.network.trusted_proxies,
        messageTimeoutMs: config.limits.message_timeout_seconds * 1000,
        maxPartialPerIp: config.limits.max_partial_bytes_per_ip,
        maxPartial: config.limits.max_partial_bytes,
      }),
      closeWebsocket: (meter, why) => {
        const ws = live.metered.get(meter);
        if (ws) cutWebsocket(ws, ...PARTIAL_CLOSE[why]);
      },
    });
  const sweeper = expirationSweeper(ctx);
  const purger = banPurger(ctx);
  return {
    server,
    url: localUrl(server.hostname ?? config.network.host, server.port!, config.network.path),
    ctx,
    ready: live.ready,
    reconfigure() {
      if (ctx.closing) return;
      // A reload wrote the file's relay name back; an admin's change (NIP-86) stays in force.
      ctx.admin.overlayInfo();
      const limits = socketLimits(config);
      // Bun applies reloaded websocket options to open connections as well as new ones.
      if ((Object.keys(limits) as (keyof typeof limits)[]).some((k) => limits[k] !== websocket[k])) {
        Object.assign(websocket, limits);
        server.reload({ fetch, websocket });
      }
      sweeper.reconfigure();
    },
    async close(how: Shutdown = "stop") {
      if (ctx.closing) return;
      ctx.closing = true;
      live.closing = CLOSING[how];
      sweeper.stop();
      purger.stop();
      mirrors.stop();
      history.stop();
      await shutdown(live);
    },
  };
}

/** HTTP on the relay path (http/routes.ts), and the websocket upgrade with its limits (upgrade.ts). */
function httpRouter(live: Live): (req: Request, srv: Server<Session>) => Response | Promise<Response> | undefined {
  const { ctx, sockets } = live;
  const route = httpRoutes({
    relay: ctx,
    version: VERSION,
    metrics: metricsRenderer(ctx, {
      subscriptions: () => {
        let n = 0;
        for (const ws of sockets) n += ws.data.subs.size;
        return n;
      },
    }),
    statusJson: () => live.history!.text(),
  });
  return (req, srv) => route(req, () => srv.requestIP(req)?.address ?? "") ?? upgrade(live, req, srv);
}

/** Why the guard closes a websocket holding an unfinished message: code and reason. */
const PARTIAL_CLOSE: Record<PartialCut, [number, string]> = {
  timeout: [1008, "message did not complete in time"],
  "per-ip": [1009, "too many unfinished message bytes from this address"],
  total: [1009, "too many unfinished message bytes"],
};

/**
 * permessage-deflate ([network] compression): compress with one shared compressor or one of the
 * given size per connection; inflate what clients compress (browsers do once it is negotiated)
 * with the shared inflater, bounded like any frame by maxPayloadLength.
 */
function deflateOptions(config: Config): WebSocketHandler<Session>["perMessageDeflate"] {
  const mode = config.network.compression;
  if (mode === "off") return false;
  return { compress: mode as WebSocketCompressor, decompress: "shared" };
}

/** Bun's websocket handlers: the AUTH challenge on open, frames to onMessage, cleanup on close. */
function socketHandlers(live: Live): WebSocketHandler<Session> {
  const { ctx, sockets } = live;
  const fair = fairTurns(ctx);
  return {
    ...socketLimits(live.config),
    closeOnBackpressureLimit: true,
    sendPings: true,
    perMessageDeflate: deflateOptions(live.config),
    publishToSelf: true,
    open(ws) {
      sockets.add(ws);
      live.metered.set(ws.data.wire, ws);
      if (ctx.closing) {
        ws.send(noticeFrame(ctx.metrics, live.closing.notice));
        // Closed by shutdown once it is answered and quiet, as the others; at once when that is over.
        if (live.drain.running) return live.drain.begin(ws);
        return ws.close(live.closing.code, live.closing.reason);
      }
      ws.send(`["AUTH",${JSON.stringify(ws.data.challenge)}]`);
    },
    message(ws, message) {
      if (ctx.closing) live.drain.heard(ws);
      const wire = ws.data.wire;
      wire.messages++;
      wire.counted += wireSize(message);
      if (wire.deflated && !chargeInflation(live.sockets, live.inflation, live.config, ws, message.length)) {
        ctx.metrics.received.invalid++;
        if (typeof message === "string")
          answerUnread(ctx, ws, message, "rate-limited: compressed messages inflate too much from this address");
        return;
      }
      fair.message(ws, ws.data.group, message);
    },
    ping(ws, data) {
      ws.data.wire.counted += data.length + 6;
      ws.data.wire.control += data.length + 6;
    },
    pong(ws, data) {
      ws.data.wire.counted += data.length + 6;
      ws.data.wire.control += data.length + 6;
      if (ctx.closing) live.drain.pong(ws, data);
    },
    drain(ws) {
      wakeDrainWaiters(ws);
    },
    close(ws, _code, reason) {
      ws.data.closed = true;
      // Bun closed it for a message over the frame limit (the client sees 1009; this handler 1006,
      // "Received too big message", Bun 1.4.5): a compressed one cost that much inflating.
      if (ws.data.wire.deflated && /too big/i.test(reason))
        chargeInflation(live.sockets, live.inflation, live.config, ws, socketLimits(live.config).maxPayloadLength);
      wakeDrainWaiters(ws);
      sockets.delete(ws);
      const peer = live.peers.get(ws.data);
      if (peer) live.guard?.removeWebsocket(peer);
      tally(live.perIp, ws.data.group, -1);
      fair.drop(ws);
      closeAllSubscriptions(ctx, ws);
      for (const subId of [...ws.data.neg.keys()]) closeNeg(ctx, ws, subId);
      ctx.store.cancelReads(ws.data);
    },
  };
}

/** What a message refused for the bounds of fair.ts's queues is told. */
const OVER_TEXT: Record<Over, string> = {
  connection: "too many messages waiting on this connection",
  address: "too many messages waiting from this address",
  relay: "too many messages waiting, relay busy",
};

/**
 * Main-thread time shared between addresses (connection/fair.ts): an address whose messages took its slice
 * of this event-loop turn waits, its connections' messages queued in order, so that a burst of
 * thousands of REQs from a few addresses does not hold an honest client's message behind it.
 */
function fairTurns(ctx: RelayContext): FairTurns<Socket> {
  return new FairTurns<Socket>(
    {
      run: (ws, message) => onMessage(ctx, ws, message),
      closed: (ws) => ws.data.closed,
      refuse(ws, message, over) {
        if (typeof message === "string") answerUnread(ctx, ws, message, `rate-limited: ${OVER_TEXT[over]}`);
      },
    },
    () => ({
      perConnection: ctx.config.limits.max_queued_message_bytes_per_connection,
      perGroup: ctx.config.limits.max_queued_message_bytes_per_ip,
      total: ctx.config.limits.max_queued_message_bytes,
    }),
    ctx.metrics.messageQueue,
  );
}
