// File descriptors: connections that are not websockets, cut before they exhaust the table.
//
// Bun.serve hands us a connection only once its request headers are complete (fetch), so a
// client that opens TCP connections and never finishes a request holds descriptors we never see;
// Bun itself closes such a connection after a fixed ~10 s (measured 10-13 s, whatever idleTimeout
// says), and accept() at the descriptor limit fails in a busy loop (a whole core). There is no
// accept-time hook. So, on Linux, this looks at the relay's own descriptors (/proc/self/fd): every
// socket accepted on the relay's port whose peer (address and port) is not a websocket is an
// "HTTP connection" (a request still arriving, an idle keep-alive, a request being answered). Those
// over the per-address cap (oldest first), those older than the header timeout, and, when the table
// nears the limit, the oldest of all, are cut with shutdown(2): Bun then reads end-of-file and
// closes them itself (we never close a descriptor we do not own). Websockets are never cut here;
// max_connections keeps them under a ceiling below the limit (connectionCeiling).
//
// Websockets: Bun (uWebSockets) assembles a message's frames out of sight and hands over only
// whole messages, up to maxPayloadLength each, so a client that starts a message and never ends
// it (one frame dripped a byte every few seconds, or fragments that never end) holds that much
// memory with nothing in JS to see it. The kernel counts the bytes each socket received
// (TCP_INFO tcpi_bytes_received); the relay counts the bytes of what it was handed whole (the
// upgrade request, messages and control frames, WireMeter). The difference is what Bun holds of
// an unfinished message (or has not read yet). A scan reads it for every websocket and closes
// those whose message has not completed within the timeout, and those holding the most when an
// address, or all together, hold more than their caps.
//
// Cost: a tick lists /proc/self/fd (getdents64, ~0.8 µs per descriptor) every second, and scans
// (getsockname + getpeername, ~4 µs per descriptor, in slices of ~2,700 descriptors) when the count
// says HTTP connections may be open; every 100 ms while it is cutting, spaced so that it takes at
// most ~10% of the main thread.
import { log } from "../../log.ts";
import { ipGroup } from "../../policy/ip.ts";
import { dlopen, FFIType, ptr } from "bun:ffi";
import { closeSync, constants, openSync } from "node:fs";

/**
 * Descriptors kept free for the relay's own use: workers, database, plugin pipes, reconnects, logs.
 * Exported for tests: test/fd-limits.test.ts pins it for a few limits.
 */
export const fdReserve = (limit: number): number => Math.min(1024, Math.max(64, Math.round(limit / 16)));

/**
 * The most websockets that leave room for the relay's own files (reserve), HTTP connections and
 * upgrades in flight (reserve) and a margin the guard cuts into (reserve): limit - 3 x reserve.
 */
export const connectionCeiling = (limit: number): number => Math.max(16, limit - 3 * fdReserve(limit));

/**
 * A websocket's count of what arrived whole, kept by the relay (relay/connection/session.ts); the fields
 * after `deflated` are the guard's own.
 */
export interface WireMeter {
  /** Bytes of the upgrade request (received on the same socket). */
  handshake: number;
  /** Bytes of whole messages and control frames received, as they were on the wire. */
  counted: number;
  /** Messages received whole: a change tells the guard one completed. */
  messages: number;
  /** Bytes of control frames (ping, pong) among `counted`. */
  control: number;
  /** permessage-deflate negotiated: messages count their inflated size, so `counted` may run ahead. */
  deflated: boolean;
  /** Bytes of an unfinished message at the last scan (0: none). */
  held?: number;
  /** When the guard first saw this message unfinished (performance.now()). */
  heldSince?: number;
  /** `messages` at the last scan. */
  seenMessages?: number;
  /**
   * Compressed: what the kernel had received (and `control`) at the scan that last saw a message
   * completed. Whatever came since, while none completes, is an unfinished message's.
   */
  since?: { received: number; control: number };
  /** Closed by the guard (it may linger a moment). */
  cut?: boolean;
}

/** Why a websocket is closed for an unfinished message. */
export type PartialCut = "timeout" | "per-ip" | "total";

interface FdGuardSettings {
  /** HTTP connections open longer than this are cut. */
  headerTimeoutMs: number;
  /** HTTP connections per address (IPv6: per /64) beyond this are cut, oldest first. */
  maxPerIp: number;
  /** Addresses exempt from the per-address cap (a reverse proxy carries everyone's). */
  trustedProxies: readonly string[];
  /** A websocket message unfinished this long closes its connection (0: never). */
  messageTimeoutMs?: number;
  /** Bytes of unfinished messages the websockets of one address may hold together (0: no cap). */
  maxPartialPerIp?: number;
  /** And all websockets together (0: no cap). */
  maxPartial?: number;
}

interface FdGuardOptions {
  /** The open-files limit in force (soft RLIMIT_NOFILE). */
  limit: number;
  /** The relay's listening port. */
  port: number;
  settings: () => FdGuardSettings;
  /** Closes a websocket whose unfinished message is over a limit (the relay's, by its meter). */
  closeWebsocket?: (meter: WireMeter, why: PartialCut) => void;
}

interface FdGuardStats {
  fds: number;
  http: number;
  cutPerIp: number;
  cutTimeout: number;
  cutPressure: number;
  scans: number;
  /** The longest stretch a scan held the main thread, ms. */
  maxSliceMs: number;
  /** Bytes of unfinished websocket messages at the last scan. */
  partialBytes: number;
  /** Websockets closed for an unfinished message: past the timeout, over the address's cap, over the total. */
  cutPartialTimeout: number;
  cutPartialPerIp: number;
  cutPartialTotal: number;
}

/** A websocket holding an unfinished message, found by a scan. */
interface Holding {
  meter: WireMeter;
  group: string;
  exempt: boolean;
}

/** Bytes a meter may be off by without a message held: the upgrade's estimate, and frame headers of fragmented messages (1/256 of what came). */
const slack = (m: WireMeter): number => 1024 + (m.counted >>> 8);

/** One HTTP connection found by a scan. */
interface Seen {
  fd: number;
  ip: string;
  port: number;
  /** fd|ip|port: the same descriptor with the same peer is the same connection (a live TCP 4-tuple is unique). */
  key: string;
  /** Address (IPv6: its /64) the per-address cap counts by. */
  group: string;
  exempt: boolean;
  firstSeen: number;
}

const IPPROTO_TCP = 6;
const TCP_INFO = 11;
/** struct tcp_info: tcpi_bytes_received (u64, Linux 4.1+). */
const BYTES_RECEIVED_AT = 128;
/** ioctl: bytes in a socket's receive queue, not read yet. */
const FIONREAD = 0x541b;
const AF_INET = 2;
const AF_INET6 = 10;
const SHUT_RDWR = 2;
const SEEK_SET = 0;
/** Connections cut per turn of the event loop. */
const CUT_BATCH = 256;

type Libc = ReturnType<typeof openLibc>;
function openLibc() {
  return dlopen("libc.so.6", {
    getdents64: { args: [FFIType.i32, FFIType.ptr, FFIType.u64], returns: FFIType.i64_fast },
    lseek: { args: [FFIType.i32, FFIType.i64, FFIType.i32], returns: FFIType.i64_fast },
    getsockname: { args: [FFIType.i32, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
    getpeername: { args: [FFIType.i32, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
    shutdown: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 },
    getsockopt: { args: [FFIType.i32, FFIType.i32, FFIType.i32, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
    ioctl: { args: [FFIType.i32, FFIType.u64, FFIType.ptr], returns: FFIType.i32 },
  });
}

/**
 * "1.2.3.4" for IPv4 and IPv4-mapped IPv6, else the 8 groups of an IPv6 address in full ("2001:db8:0:0:0:0:0:1").
 * Exported for tests: test/fd-limits.test.ts pins the spellings one address can take.
 */
export function canonicalIp(address: string): string {
  const v4 = /^(?:::ffff:)?(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (v4) return v4[1]!;
  const [head, tail] = address.split("::") as [string, string | undefined];
  const a = head ? head.split(":") : [];
  const b = tail ? tail.split(":") : [];
  const groups = tail === undefined ? a : [...a, ...Array<string>(Math.max(0, 8 - a.length - b.length)).fill("0"), ...b];
  return groups.map((g) => parseInt(g || "0", 16).toString(16)).join(":");
}

export class FdGuard {
  private readonly libc: Libc;
  private readonly dirFd: number;
  private readonly dents = new Uint8Array(64 * 1024);
  private readonly addr = new Uint8Array(128);
  private readonly addrLen = new Uint32Array(1);
  /** Websocket peers ("ip|port"), as the kernel reports them, with their meters. */
  private readonly websockets = new Map<string, WireMeter | undefined>();
  /**
   * The descriptors of websockets found by scans, and the other way round. A descriptor here is
   * still that websocket's: it is dropped when the websocket closes (removeWebsocket), before the
   * number can be reused, so later scans ask it only for its byte count.
   */
  private readonly wsFds = new Map<number, { key: string; group: string; exempt: boolean }>();
  private readonly wsKeyFd = new Map<string, number>();
  private readonly tcpInfo = new Uint8Array(256);
  private readonly tcpInfoView = new DataView(this.tcpInfo.buffer);
  private readonly tcpInfoLen = new Uint32Array(1);
  /** Their addresses, taken once: ptr() per call doubles the cost of the call (~0.7 µs). */
  private readonly tcpInfoPtr = ptr(this.tcpInfo);
  private readonly tcpInfoLenPtr = ptr(this.tcpInfoLen);
  private readonly unread = new Int32Array(1);
  private readonly unreadPtr = ptr(this.unread);
  /** HTTP connections seen by earlier scans, by key: when first seen. */
  private firstSeen = new Map<string, number>();
  /** Descriptors the relay holds besides its connections (recomputed by each scan). */
  private baseline = 0;
  private timer?: ReturnType<typeof setTimeout>;
  private stopped = false;
  private reportedAt = -Infinity;
  private reportedCuts = 0;
  readonly reserve: number;
  readonly stats: FdGuardStats = {
    fds: 0,
    http: 0,
    cutPerIp: 0,
    cutTimeout: 0,
    cutPressure: 0,
    scans: 0,
    maxSliceMs: 0,
    partialBytes: 0,
    cutPartialTimeout: 0,
    cutPartialPerIp: 0,
    cutPartialTotal: 0,
  };

  private constructor(
    private readonly opts: FdGuardOptions,
    libc: Libc,
    dirFd: number,
  ) {
    this.libc = libc;
    this.dirFd = dirFd;
    this.reserve = fdReserve(opts.limit);
  }

  /** Linux with glibc only (/proc, getdents64); undefined elsewhere (nothing is cut then). */
  static start(opts: FdGuardOptions): FdGuard | undefined {
    if (process.platform !== "linux") return undefined;
    let libc: Libc | undefined;
    let dirFd: number | undefined;
    try {
      libc = openLibc();
      // Opened once and kept: at the limit no new descriptor could be opened to look.
      dirFd = openSync("/proc/self/fd", constants.O_RDONLY | constants.O_DIRECTORY);
      const guard = new FdGuard(opts, libc, dirFd);
      guard.baseline = guard.count();
      if (guard.baseline < 0) throw new Error("cannot list /proc/self/fd");
      guard.schedule(1000);
      return guard;
    } catch (err) {
      if (dirFd !== undefined) closeSync(dirFd);
      libc?.close();
      log.warn(`note: cannot watch file descriptors (${String(err)}); unfinished HTTP requests are left to Bun's own ~10 s timeout`);
      return undefined;
    }
  }

  /**
   * A websocket was accepted from this peer (the socket's own address and port, not a forwarded
   * one); with a meter, its unfinished messages are watched.
   */
  addWebsocket(address: string, port: number, meter?: WireMeter): string {
    const key = `${canonicalIp(address)}|${port}`;
    this.websockets.set(key, meter);
    return key;
  }

  removeWebsocket(key: string): void {
    this.websockets.delete(key);
    const fd = this.wsKeyFd.get(key);
    if (fd === undefined) return;
    this.wsKeyFd.delete(key);
    this.wsFds.delete(fd);
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.timer);
    closeSync(this.dirFd);
    this.libc.close();
  }

  /** Descriptors open now (-1 if they cannot be listed). */
  count(): number {
    let n = -1;
    this.listFds((fds) => void (n = fds.length));
    return n;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.tick(), ms);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    let busy = false;
    let spent = 0;
    try {
      const started = performance.now();
      const fds = this.count();
      spent = performance.now() - started;
      this.stats.fds = fds;
      const pressed = fds > this.opts.limit - this.reserve;
      // Connections the count cannot explain by websockets: there may be HTTP ones to look at.
      const maybeHttp = fds - this.baseline - this.websockets.size > 0 || this.firstSeen.size > 0;
      busy = pressed;
      // And every second for the websockets' unfinished messages: what a burst of new connections
      // can hold before it is seen is what arrives in that second.
      if (maybeHttp || pressed || (this.watchesMessages() && this.websockets.size > 0)) {
        const scan = await this.scan();
        spent += scan.spent;
        busy ||= scan.cut;
      }
      this.report();
    } catch (err) {
      log.error(`open files check failed: ${String(err)}`);
    }
    // Every 100 ms while connections are being cut (a flood refills the table between ticks),
    // else every second; never more than ~10% of the main thread.
    this.schedule(Math.max(busy ? 100 : 1000, 10 * spent));
  }

  /** Whether any limit on unfinished websocket messages is on. */
  private watchesMessages(): boolean {
    const { messageTimeoutMs = 0, maxPartialPerIp = 0, maxPartial = 0 } = this.opts.settings();
    return messageTimeoutMs > 0 || maxPartialPerIp > 0 || maxPartial > 0;
  }

  /**
   * A compressed connection's bytes since the scan that last saw a message complete (control
   * frames aside). Its messages count their inflated size, which a scan's reset of `counted` to
   * the kernel's count can absorb: one message inflating to P bytes would hide the start of an
   * unfinished one of P for good, and with it the timeout and the caps (issue 36). Bytes that
   * came before that scan, after the message, go unseen: a message sent whole within the scan
   * interval of a completed one, and never a byte more (pongs aside), is not seen held.
   */
  private sinceCompleted(meter: WireMeter, received: number): number {
    if (meter.since === undefined || meter.messages !== meter.seenMessages) {
      meter.since = { received, control: meter.control };
      return 0;
    }
    return received - meter.since.received - (meter.control - meter.since.control);
  }

  /**
   * The bytes of an unfinished message this websocket holds: what the kernel received less what
   * the relay was handed whole. Updates the meter's timing; 0 when none (or it cannot be read).
   */
  private held(fd: number, meter: WireMeter, now: number): number {
    const len = this.tcpInfoLen;
    len[0] = this.tcpInfo.length;
    if (
      this.libc.symbols.getsockopt(fd, IPPROTO_TCP, TCP_INFO, this.tcpInfoPtr, this.tcpInfoLenPtr) !== 0 ||
      len[0]! < BYTES_RECEIVED_AT + 8
    )
      return 0;
    const v = this.tcpInfoView;
    const received = v.getUint32(BYTES_RECEIVED_AT, true) + v.getUint32(BYTES_RECEIVED_AT + 4, true) * 2 ** 32 - meter.handshake;
    // Inflated sizes run ahead of the wire: the meter starts again from what the kernel says.
    if (meter.deflated && meter.counted > received) meter.counted = received;
    let over = received - meter.counted;
    let since = meter.deflated ? this.sinceCompleted(meter, received) : 0;
    // Less what the kernel still holds, Bun has not read it yet (a fast sender while the main
    // thread was busy): asked only when it matters.
    if ((over > slack(meter) || since > 0) && this.libc.symbols.ioctl(fd, FIONREAD, this.unreadPtr) === 0) {
      over -= this.unread[0]!;
      since -= this.unread[0]!;
    }
    // Compressed: any byte since then (control frames aside) is an unfinished message's: no slack.
    const held = Math.max(over > slack(meter) ? over : 0, since > 0 ? since : 0);
    // A message completed since the last scan: whatever is held now began after it.
    if (held === 0 || meter.messages !== meter.seenMessages) meter.heldSince = held === 0 ? undefined : now;
    else meter.heldSince ??= now;
    meter.seenMessages = meter.messages;
    meter.held = held;
    return held;
  }

  /**
   * Closes the websockets holding unfinished messages past the timeout, then those holding the
   * most while an address's, or everyone's, total is over its cap.
   */
  private cutPartial(holding: Holding[], now: number): void {
    const close = this.opts.closeWebsocket;
    const { messageTimeoutMs = 0, maxPartialPerIp = 0, maxPartial = 0 } = this.opts.settings();
    let total = 0;
    for (const h of holding) total += h.meter.held!;
    this.stats.partialBytes = total;
    if (!close || holding.length === 0) return;
    const cut = (h: Holding, why: PartialCut) => {
      if (h.meter.cut) return;
      h.meter.cut = true;
      total -= h.meter.held!;
      if (why === "timeout") this.stats.cutPartialTimeout++;
      else if (why === "per-ip") this.stats.cutPartialPerIp++;
      else this.stats.cutPartialTotal++;
      close(h.meter, why);
    };
    if (messageTimeoutMs > 0) for (const h of holding) if (now - h.meter.heldSince! >= messageTimeoutMs) cut(h, "timeout");
    // Largest first: the fewest connections closed to get under a cap.
    holding.sort((a, b) => b.meter.held! - a.meter.held!);
    if (maxPartialPerIp > 0) {
      const perGroup = new Map<string, number>();
      for (const h of holding) if (!h.meter.cut && !h.exempt) perGroup.set(h.group, (perGroup.get(h.group) ?? 0) + h.meter.held!);
      for (const h of holding) {
        const sum = perGroup.get(h.group);
        if (sum === undefined || sum <= maxPartialPerIp || h.meter.cut) continue;
        perGroup.set(h.group, sum - h.meter.held!);
        cut(h, "per-ip");
      }
    }
    if (maxPartial > 0) for (const h of holding) if (total > maxPartial) cut(h, "total");
  }

  /**
   * Finds the HTTP connections and cuts those past the header timeout, over the per-address cap,
   * or in excess of the table's room. Runs in slices (one getdents64 buffer, ~2,700 descriptors,
   * each) so that a big table never holds the event loop for long.
   */
  private async scan(): Promise<{ cut: boolean; spent: number }> {
    const now = performance.now();
    const { headerTimeoutMs, maxPerIp, trustedProxies } = this.opts.settings();
    const exempt = new Set(trustedProxies.map(canonicalIp));
    const seen: Seen[] = [];
    const holding: Holding[] = [];
    const watch = this.watchesMessages();
    let connections = 0;
    let fds = 0;
    let spent = 0;
    const slice = (list: number[]) => {
      const t = performance.now();
      fds += list.length;
      for (const fd of list) {
        let known = this.wsFds.get(fd);
        if (!known) {
          const peer = this.peerOf(fd);
          if (!peer) continue;
          const ws = `${peer.ip}|${peer.port}`;
          if (!this.websockets.has(ws)) {
            connections++;
            const key = `${fd}|${peer.ip}|${peer.port}`;
            seen.push({
              fd,
              ip: peer.ip,
              port: peer.port,
              key,
              group: ipGroup(peer.ip),
              exempt: exempt.has(peer.ip),
              firstSeen: this.firstSeen.get(key) ?? now,
            });
            continue;
          }
          // A websocket: its descriptor is remembered, later scans ask it only for its byte count.
          known = { key: ws, group: ipGroup(peer.ip), exempt: exempt.has(peer.ip) };
          this.wsFds.set(fd, known);
          this.wsKeyFd.set(ws, fd);
        }
        connections++;
        const meter = this.websockets.get(known.key);
        if (watch && meter && !meter.cut && this.held(fd, meter, t) > 0) holding.push({ meter, group: known.group, exempt: known.exempt });
      }
      const ms = performance.now() - t;
      spent += ms;
      this.stats.maxSliceMs = Math.max(this.stats.maxSliceMs, ms);
    };
    const slices: number[][] = [];
    if (!this.listFds((list) => slices.push(list), true)) return { cut: false, spent };
    for (const list of slices) {
      slice(list);
      await new Promise((resolve) => setImmediate(resolve));
      if (this.stopped) return { cut: false, spent };
    }
    const t = performance.now();
    this.stats.scans++;
    this.cutPartial(holding, t);
    this.stats.http = seen.length;
    this.baseline = Math.max(0, fds - connections);
    this.firstSeen = new Map(seen.map((s) => [s.key, s.firstSeen]));

    // Oldest first (by the scan that first saw them).
    seen.sort((a, b) => a.firstSeen - b.firstSeen);
    const victims = new Set<Seen>();
    for (const s of seen) if (now - s.firstSeen >= headerTimeoutMs) victims.add(s);
    const timedOut = victims.size;
    const perGroup = new Map<string, Seen[]>();
    for (const s of seen) {
      if (s.exempt || victims.has(s)) continue;
      const g = perGroup.get(s.group);
      if (g) g.push(s);
      else perGroup.set(s.group, [s]);
    }
    // Keep the newest maxPerIp of each address: the oldest are the likeliest to be stalled.
    for (const g of perGroup.values()) for (const s of g.slice(0, Math.max(0, g.length - maxPerIp))) victims.add(s);
    const overCap = victims.size - timedOut;
    // Near the limit: the oldest of what is left, down to two reserves below it.
    let pressure = 0;
    const excess = fds - victims.size - (this.opts.limit - 2 * this.reserve);
    if (fds > this.opts.limit - this.reserve && excess > 0)
      for (const s of seen) {
        if (pressure >= excess) break;
        if (victims.has(s)) continue;
        victims.add(s);
        pressure++;
      }
    this.stats.cutTimeout += timedOut;
    this.stats.cutPerIp += overCap;
    this.stats.cutPressure += pressure;
    // In batches: Bun closes each cut connection in its next loop turn, thousands at once would
    // hold the loop for most of a second.
    let cut = 0;
    let batch = 0;
    let from = t;
    for (const s of victims) {
      if (this.cut(s)) cut++;
      this.firstSeen.delete(s.key);
      if (++batch % CUT_BATCH !== 0) continue;
      spent += performance.now() - from;
      await new Promise((resolve) => setImmediate(resolve));
      if (this.stopped) break;
      from = performance.now();
    }
    spent += performance.now() - from;
    return { cut: cut > 0, spent };
  }

  /**
   * shutdown(2), after checking the descriptor is still that connection (never close(): it is
   * Bun's). Sockets are opened and closed on this thread only, so nothing changes in between.
   */
  private cut(s: Seen): boolean {
    const now = this.peerOf(s.fd);
    if (!now || now.ip !== s.ip || now.port !== s.port) return false;
    return this.libc.symbols.shutdown(s.fd, SHUT_RDWR) === 0;
  }

  /**
   * At most once a minute: at info when something was closed since the last line (warn when the
   * count is near the limit), in words an operator reads; at debug the figures, whatever changed.
   */
  private report(): void {
    const { cutTimeout, cutPerIp, cutPressure, fds, http, scans, maxSliceMs, cutPartialTimeout, cutPartialPerIp, cutPartialTotal } =
      this.stats;
    const partial = cutPartialTimeout + cutPartialPerIp + cutPartialTotal;
    const cuts = cutTimeout + cutPerIp + cutPressure + partial;
    const now = performance.now();
    if (now - this.reportedAt < 60_000) return;
    const n = (x: number) => x.toLocaleString("en-US");
    const open = `open files: ${n(fds)} of ${n(this.opts.limit)} allowed`;
    const near = fds > this.opts.limit - this.reserve;
    if (cuts !== this.reportedCuts || near) {
      const closed: string[] = [];
      if (cutTimeout + cutPerIp + cutPressure > 0)
        closed.push(
          `HTTP connections closed since start: ${n(cutTimeout)} idle or slow past [network] header_timeout_seconds, ` +
            `${n(cutPerIp)} over [limits] max_http_connections_per_ip, ${n(cutPressure)} oldest as the limit neared`,
        );
      if (partial > 0)
        closed.push(
          `websockets closed for a message left unfinished: ${n(cutPartialTimeout)} past [limits] message_timeout_seconds, ` +
            `${n(cutPartialPerIp)} over max_partial_bytes_per_ip, ${n(cutPartialTotal)} over max_partial_bytes`,
        );
      const line = [open, ...closed].join("; ");
      if (near) log.warn(`${line}; near the limit: raise it (docs/deploy.md, Open files)`);
      else log.info(line);
    } else if (log.enabled("debug"))
      log.debug(
        `${open} (${n(http)} HTTP connections at the last scan); connections closed since start: ${n(cuts)}; ` +
          `${n(scans)} scans, the longest held the main thread ${maxSliceMs.toFixed(1)} ms`,
      );
    else return;
    this.reportedAt = now;
    this.reportedCuts = cuts;
  }

  /**
   * The open descriptors, to f: all at once, or (sliced) one getdents64 buffer at a time.
   * False if they could not be listed.
   */
  private listFds(f: (fds: number[]) => void, sliced = false): boolean {
    const { getdents64, lseek } = this.libc.symbols;
    if (Number(lseek(this.dirFd, 0, SEEK_SET)) < 0) return false;
    const buf = this.dents;
    const base = ptr(buf);
    const view = new DataView(buf.buffer);
    let list: number[] = [];
    for (;;) {
      const n = Number(getdents64(this.dirFd, base, buf.length));
      if (n < 0) return false;
      if (n === 0) break;
      // struct linux_dirent64 { u64 d_ino; s64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
      for (let at = 0; at < n; ) {
        const reclen = view.getUint16(at + 16, true);
        const name = at + 19;
        if (buf[name] !== 0x2e) {
          // A decimal descriptor number ("." and ".." skipped).
          let fd = 0;
          for (let i = name; buf[i] !== 0; i++) fd = fd * 10 + (buf[i]! - 48);
          if (fd !== this.dirFd) list.push(fd);
        }
        at += reclen;
      }
      if (sliced) {
        f(list);
        list = [];
      }
    }
    if (!sliced) f(list);
    return true;
  }

  /** The remote address of an inet socket accepted on our port, else undefined. */
  private peerOf(fd: number): { ip: string; port: number } | undefined {
    const { getsockname, getpeername } = this.libc.symbols;
    const a = this.addr;
    this.addrLen[0] = a.length;
    if (getsockname(fd, ptr(a), ptr(this.addrLen)) !== 0) return undefined; // not a socket
    const family = a[0]! | (a[1]! << 8);
    if ((family !== AF_INET && family !== AF_INET6) || ((a[2]! << 8) | a[3]!) !== this.opts.port) return undefined;
    this.addrLen[0] = a.length;
    if (getpeername(fd, ptr(a), ptr(this.addrLen)) !== 0) return undefined; // the listener itself
    const port = (a[2]! << 8) | a[3]!;
    if ((a[0]! | (a[1]! << 8)) === AF_INET) return { ip: `${a[4]}.${a[5]}.${a[6]}.${a[7]}`, port };
    // sockaddr_in6: family, port, flowinfo (4), address (16) at 8.
    let mapped = a[18] === 0xff && a[19] === 0xff;
    for (let i = 8; i < 18 && mapped; i++) mapped = a[i] === 0;
    if (mapped) return { ip: `${a[20]}.${a[21]}.${a[22]}.${a[23]}`, port };
    const groups: string[] = [];
    for (let i = 8; i < 24; i += 2) groups.push(((a[i]! << 8) | a[i + 1]!).toString(16));
    return { ip: groups.join(":"), port };
  }
}
