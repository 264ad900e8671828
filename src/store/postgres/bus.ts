// The cross-node bus on Redis pub/sub (Bun's built-in client): each committed batch is
// published once, with each event's JSON once, whatever the number of subscribers on any node;
// admin changes are announced so every node reloads its admin state. Why Redis rather than
// Postgres LISTEN/NOTIFY: docs/scaling.md (NOTIFY payloads stop at 8,000 bytes and every NOTIFY
// takes a global lock at commit).
import { log } from "../../log.ts";
import { RedisClient } from "bun";
import type { Batch } from "./order.ts";

interface BusHandlers {
  batch(b: { from: number; to: number; events: { seq: number; json: string }[] }): void;
  adminChanged(): void;
  /** Stored admissions changed (postgres/admission.ts): which ones, the change log says. */
  admissionsChanged(): void;
  /** An ephemeral event's JSON (kinds 20000-29999 are never stored: only the bus carries them). */
  ephemeral(json: string): void;
}

/** A node's identity on the bus: its own messages are not handled twice. */
const NODE = crypto.randomUUID();

export class RedisBus {
  private readonly pub: RedisClient;
  private readonly sub: RedisClient;
  private closed = false;
  /** Publishes not yet confirmed: close() lets them finish. */
  private readonly sending = new Set<Promise<unknown>>();

  private readonly events: string;
  private readonly admin: string;
  private readonly ephemeral: string;

  /** `scope`: the database's identity; its channels are bunstr:<scope>:events and :admin. */
  private constructor(url: string, scope: string) {
    this.events = `bunstr:${scope}:events`;
    this.admin = `bunstr:${scope}:admin`;
    this.ephemeral = `bunstr:${scope}:ephemeral`;
    this.pub = new RedisClient(url, { autoReconnect: true, enableOfflineQueue: true });
    this.sub = new RedisClient(url, { autoReconnect: true, enableOfflineQueue: true });
  }

  static async connect(url: string, scope: string, handlers: BusHandlers): Promise<RedisBus> {
    const bus = new RedisBus(url, scope);
    await bus.pub.connect();
    await bus.sub.subscribe([bus.events, bus.admin, bus.ephemeral], (message: string, channel: string) => {
      if (bus.closed) return;
      let m: { node: string; admissions?: boolean; from?: number; to?: number; events?: { seq: number; json: string }[]; json?: string };
      try {
        m = JSON.parse(message);
      } catch {
        return log.error(`bus: not JSON on ${channel}`);
      }
      if (m.node === NODE) return;
      // An admission change rides the admin channel with a flag (a node that does not know the flag reloads all).
      if (channel === bus.admin) return m.admissions ? handlers.admissionsChanged() : handlers.adminChanged();
      if (channel === bus.ephemeral) return typeof m.json === "string" ? handlers.ephemeral(m.json) : undefined;
      if (typeof m.from === "number" && typeof m.to === "number" && Array.isArray(m.events))
        handlers.batch({ from: m.from, to: m.to, events: m.events });
    });
    return bus;
  }

  /** Tells the other nodes about a committed batch (an empty one too: it closes their gap). */
  publishBatch(b: Batch): void {
    // Hand-built: each event's JSON is already a string; it goes in as a JSON string once.
    const events = b.events.map((e) => `{"seq":${e.seq},"json":${JSON.stringify(e.json)}}`).join(",");
    this.send(this.events, `{"node":"${NODE}","from":${b.from},"to":${b.to},"events":[${events}]}`);
  }

  publishEphemeral(json: string): void {
    this.send(this.ephemeral, `{"node":"${NODE}","json":${JSON.stringify(json)}}`);
  }

  publishAdminChange(): void {
    this.send(this.admin, `{"node":"${NODE}"}`);
  }

  publishAdmissionChange(): void {
    this.send(this.admin, `{"node":"${NODE}","admissions":true}`);
  }

  private send(channel: string, message: string): void {
    // A lost message is not lost data: the other nodes read the gap from Postgres (order.ts).
    const p = this.pub.publish(channel, message).catch((err: unknown) => log.error("bus: publish failed:", err));
    this.sending.add(p);
    void p.finally(() => this.sending.delete(p));
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.race([Promise.all(this.sending), Bun.sleep(2000)]);
    this.pub.close();
    this.sub.close();
  }
}
