// Bun.serve wiring: HTTP on the relay path, websocket frames to the handlers, shutdown.
import type { Server, WebSocketCompressor, WebSocketHandler } from "bun";
import type { Config } from "../config/schema.ts";
import { freshRelayKey, type RelayKey } from "../protocol/schnorr.ts";
import { adminPagePath, adminPageResponse, httpResponse, statusJsonPath } from "../http/routes.ts";
import { metricsResponse, wantsMetrics } from "../http/metrics.ts";
import { defaultPolicies } from "../policy/defaults.ts";
import { ipGroup, proxyWarning, tally } from "../policy/ip.ts";
import { LogLimiter } from "../log.ts";
import { chargeRate, RateLimiter } from "../policy/rate-limit.ts";
import { parseClientMessage, SubscriptionError } from "../protocol/messages.ts";
import { ProtocolError } from "../protocol/reasons.ts";
import { WriterQueue } from "../store/queue.ts";
import type { Store } from "../store/types.ts";
import { VERSION } from "../version.ts";
import { handleAdminRequest, isAdminRequest } from "../http/admin-api.ts";
import { AdminState } from "../admin/state.ts";
import { canRead, restrictedKinds, writeRules } from "../policy/visibility.ts";
import { nowSeconds } from "../protocol/event.ts";
import { configuredVerifier } from "../verify/configured.ts";
import { inlineVerifier, noVerifier, type Verifier } from "../verify/pool.ts";
import { handleAuth } from "./auth.ts";
import type { RelayContext } from "./context.ts";
import { Fanout } from "./fanout.ts";
import { MemoryAnswers } from "./answers/memory.ts";
import { startMirrors } from "./mirror.ts";
import { History } from "./history.ts";
import { metricsRenderer, RelayMetrics } from "./metrics.ts";
import { handleEvent } from "./ingest.ts";
import { closeNeg, handleNegClose, handleNegMsg, handleNegOpen, refuseNeg } from "./neg.ts";
import { handleCount, handleReq } from "./req.ts";
import { closeAllSubscriptions, closeSubscription } from "./read/subscriptions.ts";
import { liveFeed } from "./read/live.ts";
import { closedFrame, newSession, noticeFrame, okFrame, send, wireSize, type Session, type Socket } from "./session.ts";
import { pluginSettings, WritePolicyPlugin } from "./plugin.ts";
import { FdGuard, type PartialCut, type WireMeter } from "./fd-guard.ts";
import { InflationBudget } from "./inflation.ts";
import { DEADLINE_MS, Drain } from "./drain.ts";
import { FairTurns, type Over } from "./fair.ts";

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

/** "stop": the relay goes away. "restart": another process already serves the port (reuse_port). */
export type Shutdown = "stop" | "restart";

const CLOSING = {
  stop: { notice: "closing: relay is shutting down", code: 1001, reason: "relay shutting down" },
  restart: { notice: "closing: relay is restarting, reconnect", code: 1012, reason: "relay restarting" },
} as const;

interface RelayOptions {
  config: Config;
  store: Store;
  verifier?: Verifier;
  /** The relay's own key (NIP-11 `self`; signs NIP-29 group metadata): cli/relay-key.ts. Absent: a fresh one, kept in memory. */
  relayKey?: RelayKey;
  /**
   * The open-files limit in force: connections that are not websockets are then watched and cut
   * before they exhaust it (fd-guard.ts, Linux). Tests running the relay in-process leave it out.
   */
  fileLimit?: number;
}

const CLOSE = { Connection: "close" };

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
 * (fd-guard.ts; issue 36): twice the message limit, at least 256 KiB, not more.
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
      console.error("http handler failed:", err);
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
      log: (m) => console.warn(m),
      closeWebsocket: (meter, why) => {
        const ws = live.metered.get(meter);
        if (ws) cutWebsocket(ws, ...PARTIAL_CLOSE[why]);
      },
    });
  const sweeper = expirationSweeper(ctx);
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
      mirrors.stop();
      history.stop();
      await shutdown(live);
    },
  };
}

/** What the pieces of a running relay share besides its context: the sockets and the listener. */
interface Live {
  readonly ctx: RelayContext;
  /** ctx.config: changed in place by a reload, never copied. */
  readonly config: Config;
  readonly sockets: Set<Socket>;
  /** Open websockets per address group. */
  readonly perIp: Map<string, number>;
  /** Each websocket's peer as the guard knows it (the socket's address and port). */
  readonly peers: WeakMap<Session, string>;
  /** Each websocket by its meter, for the guard to close one holding an unfinished message. */
  readonly metered: WeakMap<WireMeter, Socket>;
  /** What compressed messages inflated to, per address (inflation.ts). */
  readonly inflation: InflationBudget;
  guard?: FdGuard;
  /** The status page's charts (history.ts), sampled while the relay runs. */
  history?: History;
  server?: Server<Session>;
  /** What connections are told while closing. */
  closing: (typeof CLOSING)[Shutdown];
  /** While closing: which connections are answered and quiet, so may be closed. */
  readonly drain: Drain;
  /** Whether the warning about proxied connections the config does not read (proxyWarning) was printed. */
  proxyWarned?: boolean;
  /** Relay.ready: the state built from the store at start. */
  ready: Promise<void>;
}

/** The relay's context: store, verifier, writer queue, fanout, admin state, wired together. */
function buildContext({ config, store, verifier: given, relayKey }: RelayOptions): Live {
  const verifier = given ?? configuredVerifier(config);
  const sockets = new Set<Socket>();
  const shared: Omit<Live, "ctx"> = {
    config,
    sockets,
    perIp: new Map(),
    peers: new WeakMap(),
    metered: new WeakMap(),
    inflation: new InflationBudget(),
    closing: CLOSING.stop,
    drain: new Drain(),
    ready: Promise.resolve(),
  };
  const fanout = new Fanout({
    publish: (topic, frame) => shared.server!.publish(topic, frame),
    restricted: (e) => restrictedKinds(config).has(e.kind),
    canRead: (ws, e) => canRead(config, ws.data.authed, e),
  });
  const ctx: RelayContext = {
    config,
    store,
    relayKey: relayKey ?? freshRelayKey(),
    verifier,
    authVerifier: verifier === noVerifier ? inlineVerifier : verifier,
    fanout,
    answers: new MemoryAnswers(fanout.ring, store),
    writer: new WriterQueue(
      store,
      () => writeRules(config),
      undefined,
      () => ({ maxChars: config.limits.max_write_queue_bytes, maxGroupChars: config.limits.max_write_queue_bytes_per_ip }),
    ),
    policies: defaultPolicies,
    ephemeral(e, json) {
      fanout.broadcast(e, json);
      store.shareEphemeral?.(e, json);
    },
    admin: new AdminState(store, config, {
      disconnectIp(ip) {
        let n = 0;
        for (const ws of sockets)
          if (ws.data.ip === ip) {
            n++;
            ws.close(1008, "blocked");
          }
        return n;
      },
    }),
    // No process runs until the first event that needs one.
    plugin: new WritePolicyPlugin(
      () => pluginSettings(ctx.config),
      () => ctx.closing,
    ),
    metrics: new RelayMetrics(),
    rates: new RateLimiter(),
    clientLines: new LogLimiter(),
    inflight: 0,
    closing: false,
    readCostEstimate: 5,
    countCostEstimate: 5,
    queryGroups: new Map(),
    filterBytes: new Map(),
    counts: new Map(),
    negItems: new Map(),
    negItemsTotal: 0,
    negGroups: new Map(),
    startedAt: Date.now(),
    connections: () => sockets.size,
  };
  // The store's one feed of what is committed, in commit order, whoever wrote it (on Postgres,
  // any node; with the other nodes' ephemeral events and admin changes): to the live
  // subscriptions and memory's answers (relay/read/live.ts).
  store.subscribe({
    ...liveFeed(ctx),
    adminChanged: () => void ctx.admin.load().catch((err) => console.error("could not reload the admin state:", err)),
  });
  // A store that names every change lets memory answer (relay/answers/); one with other nodes
  // writing (Postgres) does not.
  store.changes?.watch(ctx.answers.changes);
  // Resolves before the first connection is served (SQLite answers synchronously).
  ctx.admin.load().catch((err) => console.error("could not load the admin state:", err));
  ctx.writer.onBatch = (size, seconds) => ctx.metrics.observeWriterBatch(size, seconds);
  return Object.assign(shared, { ctx });
}

/** HTTP on the relay path: metrics, the admin page and API, NIP-11 and the landing page, and the websocket upgrade with its limits. */
function httpRouter(live: Live): (req: Request, srv: Server<Session>) => Response | Promise<Response> | undefined {
  const { ctx, config, sockets, perIp } = live;
  const renderMetrics = metricsRenderer(ctx, {
    subscriptions: () => {
      let n = 0;
      for (const ws of sockets) n += ws.data.subs.size;
      return n;
    },
  });
  // Not reloadable: read once.
  const path = config.network.path;
  return (req, srv) => {
    // Without a Host header (HTTP/1.0) Bun cannot build the URL: read the path from the request line.
    if (!URL.canParse(req.url)) return new Response("bad request", { status: 400 });
    const url = new URL(req.url);
    if (wantsMetrics(req, url.pathname, path, config))
      return metricsResponse(req, config, renderMetrics, srv.requestIP(req)?.address ?? "");
    if (url.pathname === adminPagePath(path)) return adminPageResponse(req, path);
    if (url.pathname === statusJsonPath(path) && live.history) return statusJsonResponse(req, live.history);
    if (url.pathname !== path) return new Response("not found", { status: 404 });
    if (isAdminRequest(req)) return handleAdminRequest(req, ctx);
    if (req.headers.get("upgrade")?.toLowerCase() !== "websocket") return httpResponse(req, ctx, VERSION);
    const ip = clientIp(req, srv, config);
    if (!live.proxyWarned) warnIfProxied(live, req, srv);
    // Refusals close the connection: a client kept alive would hold a descriptor for nothing.
    if (ctx.admin.blockedIps.has(ip)) return new Response("this address is blocked", { status: 403, headers: CLOSE });
    // While closing, a connection accepted before the listener closed is still upgraded, then
    // told to reconnect (in open): a close code clients act on rather than a failed connect, and
    // whatever it sends before it reads the NOTICE is answered first (drain.ts).
    if (!ctx.closing) {
      if (config.limits.max_connections > 0 && sockets.size >= config.limits.max_connections)
        return new Response("too many connections", { status: 503, headers: CLOSE });
      const group = ipGroup(ip);
      if ((perIp.get(group) ?? 0) >= config.limits.max_connections_per_ip)
        return new Response("too many connections from this address", { status: 429, headers: CLOSE });
      // Before AUTH nobody is known, so new connections are limited per IP only.
      const wait = chargeRate(config, ctx.rates, "connections", { ip, group });
      if (wait > 0)
        return new Response("rate-limited: too many new connections from this address", {
          status: 429,
          headers: { ...CLOSE, "Retry-After": String(Math.ceil(wait / 1000)) },
        });
    }
    const compression = config.network.compression !== "off";
    const data = newSession(ip, req.headers.get("host") ?? "", compression, {
      handshake: handshakeBytes(req),
      deflated: compression && offersDeflate(live, req, ipGroup(ip)),
    });
    // Read before upgrade(): the request has no socket of its own after it.
    const peer = live.guard && srv.requestIP(req);
    if (srv.upgrade(req, { data })) {
      tally(perIp, data.group, 1);
      if (peer) live.peers.set(data, live.guard!.addWebsocket(peer.address, peer.port, data.wire));
      return undefined;
    }
    return new Response("websocket upgrade failed", { status: 400 });
  };
}

/**
 * Whether the client offers permessage-deflate and may have it. An address over its inflation
 * budget (inflation.ts) does not: the offer is taken out of the request, and Bun then upgrades
 * without the extension.
 */
function offersDeflate(live: Live, req: Request, group: string): boolean {
  if (!/permessage-deflate/i.test(req.headers.get("sec-websocket-extensions") ?? "")) return false;
  if (live.inflation.mayDeflate(group)) return true;
  req.headers.delete("sec-websocket-extensions");
  return false;
}

/**
 * The upgrade request's size on the wire, near enough (the kernel counts it among the socket's
 * bytes received; fd-guard.ts): request line, headers as "name: value", the blank line.
 */
function handshakeBytes(req: Request): number {
  const url = new URL(req.url);
  let n = `GET ${url.pathname}${url.search} HTTP/1.1\r\n\r\n`.length;
  for (const [k, v] of req.headers) n += k.length + v.length + 4;
  return n;
}

/** Why the guard closes a websocket holding an unfinished message: code and reason. */
const PARTIAL_CLOSE: Record<PartialCut, [number, string]> = {
  timeout: [1008, "message did not complete in time"],
  "per-ip": [1009, "too many unfinished message bytes from this address"],
  total: [1009, "too many unfinished message bytes"],
};

/**
 * Closes a websocket with a reason and, if its peer has not finished the close a moment later,
 * cuts it: what Bun holds for it (an unfinished message) goes with the socket.
 */
function cutWebsocket(ws: Socket, code: number, reason: string): void {
  ws.close(code, reason);
  setTimeout(() => {
    if (!ws.data.closed) ws.terminate();
  }, 2000).unref();
}

/** GET on the status page's JSON: the charts' history, top kinds and recent refusals (history.ts). */
function statusJsonResponse(req: Request, history: History): Response {
  if (req.method !== "GET" && req.method !== "HEAD")
    return new Response("method not allowed", { status: 405, headers: { Allow: "GET, HEAD" } });
  return new Response(history.text(), {
    headers: { "Content-Type": "application/json", "Cache-Control": "no-store", "Access-Control-Allow-Origin": "*" },
  });
}

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
      if (wire.deflated && !chargeInflation(live, ws, message.length)) {
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
      if (ws.data.wire.deflated && /too big/i.test(reason)) chargeInflation(live, ws, socketLimits(live.config).maxPayloadLength);
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
 * Main-thread time shared between addresses (fair.ts): an address whose messages took its slice
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

/**
 * Charges what a compressed connection's message inflated to against its address's budget
 * ([limits] inflated_bytes_per_ip_per_second). Over it, the address's compressed connections are
 * closed (this one too; false) and it is not offered compression for a while (inflation.ts).
 */
function chargeInflation(live: Live, ws: Socket, bytes: number): boolean {
  const { group } = ws.data;
  if (live.inflation.charge(group, bytes, live.config.limits.inflated_bytes_per_ip_per_second)) return true;
  // Its address's sockets were all cut when it first went over: a message still arriving on one
  // costs no scan of every socket (and no close and timer again).
  if (ws.data.inflationCut) return false;
  for (const s of live.sockets)
    if (s.data.group === group && s.data.wire.deflated && !s.data.closed && !s.data.inflationCut) {
      s.data.inflationCut = true;
      cutWebsocket(s, 1008, "compressed messages inflate too much; reconnect");
    }
  return false;
}

/** NIP-40: expired events are already hidden from every read; this reclaims their space, every expiration_sweep_seconds. */
function expirationSweeper(ctx: RelayContext): { reconfigure(): void; stop(): void } {
  const { config } = ctx;
  const sweep = () => {
    if (!config.nips.nip40 || ctx.closing) return;
    Promise.resolve()
      .then(() => ctx.store.sweepExpired(nowSeconds()))
      .catch((err) => console.error("expiration sweep failed:", err));
  };
  let seconds = config.options.expiration_sweep_seconds;
  let timer = setInterval(sweep, seconds * 1000);
  timer.unref();
  return {
    reconfigure() {
      if (config.options.expiration_sweep_seconds === seconds) return;
      clearInterval(timer);
      seconds = config.options.expiration_sweep_seconds;
      timer = setInterval(sweep, seconds * 1000);
      timer.unref();
    },
    stop: () => clearInterval(timer),
  };
}

/**
 * The graceful stop after ctx.closing is set: stop listening, answer every EVENT the clients
 * sent, commit, close the sockets, the workers, the plugin and the store.
 */
async function shutdown(live: Live): Promise<void> {
  const { ctx, sockets, closing, drain } = live;
  const server = live.server!;
  // Stop listening (with reuse_port the kernel now sends every new connection to the other
  // process); open sockets stay until we close them. Resolves once they are all closed.
  const gone = server.stop(false);
  for (const ws of sockets) {
    ws.send(noticeFrame(ctx.metrics, closing.notice));
    drain.begin(ws);
  }
  // New EVENTs are refused now (admit.ts). A connection is closed once it has been answered
  // everything it sent before the NOTICE and has gone quiet (drain.ts): an idle client
  // reconnects (to the new process) after a round trip, and a busy one gets every answer it is
  // owed first, the pipelined EVENTs that were on the wire too.
  const told = new Set<Socket>();
  const deadline = Date.now() + DEADLINE_MS;
  drain.running = true;
  for (;;) {
    let waiting = false;
    const now = performance.now();
    for (const ws of sockets) {
      if (told.has(ws)) continue;
      if (!drain.done(ws, now)) waiting = true;
      else {
        told.add(ws);
        ws.close(closing.code, closing.reason);
      }
    }
    if ((!waiting && ctx.inflight === 0) || Date.now() >= deadline) break;
    await Bun.sleep(5);
  }
  drain.running = false;
  // Bounded: a writer thread that hangs must not keep the process from exiting.
  await Promise.race([ctx.writer.drain(), Bun.sleep(30_000)]);
  for (const ws of sockets) if (!told.has(ws)) ws.close(closing.code, closing.reason);
  // Let the close handshakes finish before cutting what is left.
  await Promise.race([gone, Bun.sleep(1000)]);
  server.stop(true);
  live.guard?.stop();
  ctx.verifier.close();
  await ctx.plugin.close();
  await ctx.store.close();
}

function wakeDrainWaiters(ws: Socket): void {
  const waiters = ws.data.drainWaiters.splice(0);
  for (const wake of waiters) wake();
}

/** The socket's peer address; an IPv4 peer on a dual-stack socket shows as ::ffff:a.b.c.d, read as a.b.c.d. */
const peerAddress = (req: Request, srv: Server<Session>): string =>
  (srv.requestIP(req)?.address ?? "").replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, "");

/** The socket's peer, or what remote_ip_header says when the peer is a trusted proxy. */
function clientIp(req: Request, srv: Server<Session>, config: Config): string {
  const peer = peerAddress(req, srv);
  const header = config.network.remote_ip_header;
  if (!header || !config.network.trusted_proxies.includes(peer)) return peer;
  // The proxy appends the address it saw; the last entry is the one our proxy vouches for.
  const forwarded = req.headers.get(header)?.split(",").at(-1)?.trim();
  return forwarded || peer;
}

/** Once per relay: a proxy seems to forward connections, and the config does not read it. */
function warnIfProxied(live: Live, req: Request, srv: Server<Session>): void {
  const { network, rate_limits } = live.config;
  const warning = proxyWarning(peerAddress(req, srv), req.headers, network, rate_limits.exempt_private_addresses);
  if (warning === undefined) return;
  live.proxyWarned = true;
  console.warn(warning);
}

/** A handler's unexpected failure is logged by its verb (made once, not per frame). */
const failedHandler = (verb: string) => (err: unknown) => console.error(`${verb} handler failed:`, err);
const FAILED = { EVENT: failedHandler("EVENT"), REQ: failedHandler("REQ"), AUTH: failedHandler("AUTH"), COUNT: failedHandler("COUNT") };

function onMessage(ctx: RelayContext, ws: Socket, message: string | Buffer): void {
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
function answerUnread(ctx: RelayContext, ws: Socket, message: string, text: string): void {
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
