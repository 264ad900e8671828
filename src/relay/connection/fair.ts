// Fair main-thread message handling between addresses (issue 36). Bun hands each socket's
// buffered messages to the handler back to back: 80 connections bursting 4,000 REQs cost about a
// second of main-thread CPU, and an honest client's message read in the same poll waits behind all
// of it. Here each address group gets a slice of every event-loop turn; past it, its connections'
// messages wait in a per-connection FIFO, taken round-robin by address group (as the readers take
// queries, store/sqlite/readers.ts) a bounded time per turn, with I/O between.
import { log } from "../../log.ts";

/** Main-thread time an address group's messages may take in one event-loop turn before its connections queue. */
export const SLICE_MS = 2;
/** Main-thread time one drain of the queues may take before the loop polls I/O again. */
export const DRAIN_MS = 5;
/**
 * A message's cost counted at the start of the next one (what its promise continuations took,
 * run in between) is capped: a gap longer than this is not the message's own work.
 */
const MAX_GAP_MS = 20;

/** A connection's messages waiting, in order. */
interface Waiting<C> {
  readonly conn: C;
  readonly group: string;
  readonly messages: (string | Buffer)[];
  /** Index of the next message (shifting an array is O(n)). */
  head: number;
  bytes: number;
}

export interface FairLimits {
  /** Bytes one connection may have waiting; past it its messages are refused. 0 = no bound. */
  perConnection: number;
  /** Bytes one address group may have waiting; past it its messages are refused. 0 = no bound. */
  perGroup: number;
  /** Bytes all may have waiting; past it messages that would wait are refused. 0 = no bound. */
  total: number;
}

/** Which bound a refused message would have gone over. */
export type Over = "connection" | "address" | "relay";

export interface FairHandlers<C> {
  /** Handles one message (synchronously; what it awaits runs later). */
  run(conn: C, message: string | Buffer): void;
  /** Whether the connection is gone (its queue is dropped, its messages not run). */
  closed(conn: C): boolean;
  /**
   * The message would take its connection, address group or the relay over its bound of waiting
   * bytes: refuse it (every EVENT still gets its OK; the answer may come before those of the
   * connection's waiting messages).
   */
  refuse(conn: C, message: string | Buffer, over: Over): void;
}

/** The queues as /metrics shows them. */
export interface QueueStats {
  bytes: number;
  connections: number;
  deferred: number;
}

/** What a message weighs against the bounds: its length (UTF-16 units, or bytes for a binary frame). */
const weight = (message: string | Buffer): number => message.length;

/**
 * The scheduler. Handling an ordinary message costs two performance.now() calls, two map reads and
 * one map write.
 */
export class FairTurns<C extends object> {
  /** Milliseconds each address group used in this turn. */
  private readonly used = new Map<string, number>();
  /** Connections with messages waiting. */
  private readonly waiting = new Map<C, Waiting<C>>();
  /** Per address group, its connections with messages waiting, in round-robin order. */
  private readonly groups = new Map<string, Waiting<C>[]>();
  /** Waiting bytes per address group. */
  private readonly groupBytes = new Map<string, number>();
  /**
   * The message handled last in this turn: its group, when its synchronous part ended and what
   * that took. Charged to the group with the gap after it when the next message comes.
   */
  private lastGroup: string | undefined;
  private lastEnd = 0;
  private lastCost = 0;
  private turnScheduled = false;

  constructor(
    private readonly handlers: FairHandlers<C>,
    private readonly limits: () => FairLimits,
    /** Kept up to date for /metrics: bytes waiting, connections waiting, messages that waited (ever). */
    readonly stats: QueueStats = { bytes: 0, connections: 0, deferred: 0 },
  ) {}

  /** A message from `conn` (of address group `group`): handled now, or queued behind its others. */
  message(conn: C, group: string, message: string | Buffer): void {
    const now = performance.now();
    // The previous message's cost: its synchronous part, and what its continuations took since
    // it returned. One map write per message; its result is this group's when the same.
    const last = this.lastGroup;
    let used: number | undefined;
    if (last !== undefined) {
      used = (this.used.get(last) ?? 0) + this.lastCost + Math.min(now - this.lastEnd, MAX_GAP_MS);
      this.used.set(last, used);
      this.lastGroup = undefined;
    }
    const w = this.waiting.get(conn);
    if (w) return this.enqueue(w, message);
    if ((last === group ? used! : (this.used.get(group) ?? 0)) >= SLICE_MS) return this.enqueue(this.queueFor(conn, group), message);
    this.scheduleTurn();
    try {
      this.handlers.run(conn, message);
    } finally {
      const end = performance.now();
      this.lastGroup = group;
      this.lastEnd = end;
      this.lastCost = end - now;
    }
  }

  /** The connection closed: its waiting messages are dropped. */
  drop(conn: C): void {
    const w = this.waiting.get(conn);
    if (!w) return;
    this.forget(w);
  }

  private queueFor(conn: C, group: string): Waiting<C> {
    const w: Waiting<C> = { conn, group, messages: [], head: 0, bytes: 0 };
    this.waiting.set(conn, w);
    this.stats.connections = this.waiting.size;
    const list = this.groups.get(group);
    if (list) list.push(w);
    else this.groups.set(group, [w]);
    return w;
  }

  private enqueue(w: Waiting<C>, message: string | Buffer): void {
    const n = weight(message);
    const groupBytes = this.groupBytes.get(w.group) ?? 0;
    const over = this.over(w, groupBytes, n);
    if (over) {
      if (w.messages.length === w.head) this.forget(w);
      return this.handlers.refuse(w.conn, message, over);
    }
    w.messages.push(message);
    w.bytes += n;
    this.groupBytes.set(w.group, groupBytes + n);
    this.stats.bytes += n;
    this.stats.deferred++;
    this.scheduleTurn();
  }

  private over(w: Waiting<C>, groupBytes: number, n: number): Over | undefined {
    const { perConnection, perGroup, total } = this.limits();
    if (perConnection > 0 && w.bytes + n > perConnection) return "connection";
    if (perGroup > 0 && groupBytes + n > perGroup) return "address";
    if (total > 0 && this.stats.bytes + n > total) return "relay";
    return undefined;
  }

  private forget(w: Waiting<C>): void {
    this.waiting.delete(w.conn);
    const list = this.groups.get(w.group);
    const i = list ? list.indexOf(w) : -1;
    if (list && i >= 0) list.splice(i, 1);
    if (list && list.length === 0) this.groups.delete(w.group);
    const left = (this.groupBytes.get(w.group) ?? 0) - w.bytes;
    if (left > 0) this.groupBytes.set(w.group, left);
    else this.groupBytes.delete(w.group);
    this.stats.bytes -= w.bytes;
    this.stats.connections = this.waiting.size;
    w.bytes = 0;
    w.messages.length = 0;
    w.head = 0;
  }

  /** Once per turn, after the polled I/O: the slices start again and the queues get their time. */
  private scheduleTurn(): void {
    if (this.turnScheduled) return;
    this.turnScheduled = true;
    setImmediate(() => void this.turn());
  }

  private async turn(): Promise<void> {
    this.turnScheduled = false;
    // Fresh slices for the next poll's messages. The drain's time is its own: it charges none
    // (and no message arrives while it runs, only microtasks do), so this holds after it too.
    this.lastGroup = undefined;
    this.used.clear();
    if (this.waiting.size > 0) await this.drainQueues();
    if (this.waiting.size > 0) this.scheduleTurn();
  }

  /**
   * One message per address group in turn (its connections in turn), for up to DRAIN_MS. Each
   * message's promise continuations run before the next (the await): they are counted too.
   */
  private async drainQueues(): Promise<void> {
    const started = performance.now();
    for (;;) {
      // A Map's iteration survives the deletions (forget() drops a group whose last connection's
      // queue empties: no list here is empty); nothing is added meanwhile (no I/O runs).
      for (const list of this.groups.values()) {
        const w = list.shift()!;
        list.push(w);
        this.runOne(w);
        await undefined;
        if (performance.now() - started >= DRAIN_MS) return;
      }
      if (this.groups.size === 0) return;
    }
  }

  private runOne(w: Waiting<C>): void {
    if (this.handlers.closed(w.conn)) return this.forget(w);
    const message = w.messages[w.head]!;
    w.messages[w.head++] = "";
    const n = weight(message);
    w.bytes -= n;
    this.stats.bytes -= n;
    const left = (this.groupBytes.get(w.group) ?? 0) - n;
    if (left > 0) this.groupBytes.set(w.group, left);
    else this.groupBytes.delete(w.group);
    if (w.head === w.messages.length) this.forget(w);
    else if (w.head > 1024 && w.head * 2 > w.messages.length) {
      w.messages.splice(0, w.head);
      w.head = 0;
    }
    try {
      this.handlers.run(w.conn, message);
    } catch (err) {
      log.error("queued message handler failed:", err);
    }
  }
}
