// One node at a time for the background work several nodes sharing a database must not each do
// (issue 33 review, M7: the NIP-05 schedule's fetches, the payment poller's node checks): a session-level
// pg_try_advisory_lock per name, held on one reserved connection. The lock goes with the
// connection, so when the leading node stops (or its connection drops) another node's next try,
// at most TRY_EVERY_MS later, takes it over. Each try asks again even while leading: a connection
// that was dropped and opened anew no longer holds the lock, and says so.
import { log } from "../../log.ts";
import type { ReservedSQL, SQL } from "bun";
import type { Leadership } from "../types.ts";

const TRY_EVERY_MS = 5_000;

export class PostgresLeaders {
  private readonly names = new Map<string, boolean>();
  private connection: ReservedSQL | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  private trying: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly sql: SQL,
    private readonly everyMs = TRY_EVERY_MS,
  ) {}

  /** The node leads `name` while `leading` is true; the first try starts at once. */
  lead(name: string): Leadership {
    if (!this.names.has(name)) this.names.set(name, false);
    if (!this.timer && !this.closed) {
      // A tick while a try still runs (a stuck database) is skipped, not queued behind it: else
      // the tries would pile up, one per tick, and run back to back once it answers.
      this.timer = setInterval(() => void (this.trying ?? this.tryAll()), this.everyMs);
      this.timer.unref?.();
    }
    const first = this.tryAll();
    const names = this.names;
    return {
      get leading() {
        return names.get(name) === true;
      },
      first,
    };
  }

  /** A try of every name; one asked while another runs runs after it (a new name is tried then). */
  private tryAll(): Promise<void> {
    if (this.trying) return this.trying.then(() => this.tryAll());
    const run = this.tryEach().finally(() => {
      if (this.trying === run) this.trying = undefined;
    });
    this.trying = run;
    return run;
  }

  private async tryEach(): Promise<void> {
    if (this.closed) return;
    try {
      this.connection ??= await this.sql.reserve();
      for (const [name, was] of this.names) {
        const key = `bunstr-leader:${name}`;
        const [row] = await this.connection`SELECT pg_try_advisory_lock(hashtextextended(${key}, 0)) AS got`;
        const got = row.got === true;
        // Session locks stack: one taken again while held is given back, so one release frees it.
        if (got && was) await this.connection`SELECT pg_advisory_unlock(hashtextextended(${key}, 0))`;
        this.names.set(name, got);
      }
    } catch (err) {
      for (const name of this.names.keys()) this.names.set(name, false);
      this.connection?.release();
      this.connection = undefined;
      if (!this.closed) log.error("postgres: the leader lock could not be asked for:", err);
    }
  }

  /** Gives the locks back (the connection's end would too): another node leads from its next try. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    await this.trying?.catch(() => {});
    for (const name of this.names.keys()) this.names.set(name, false);
    const c = this.connection;
    this.connection = undefined;
    if (!c) return;
    await c`SELECT pg_advisory_unlock_all()`.catch(() => {});
    c.release();
  }
}
