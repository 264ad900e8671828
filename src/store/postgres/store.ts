// The Postgres store (Bun's built-in SQL client): for several bunstr nodes on one database.
// Writes: postgres/write.ts (batches serialized by the database). Committed batches of every
// node reach each node's fanout in seq order through postgres/order.ts, fed by this node's own
// commits, by the Redis bus (postgres/bus.ts) and, as a safety net, by polling the sequence.
import { log } from "../../log.ts";
import { SQL } from "bun";
import { Hll } from "../../nips/nip45.ts";
import type { GroupGate } from "../../nips/nip29.ts";
import type { NostrEvent } from "../../protocol/event.ts";
import { refuse } from "../../protocol/reasons.ts";
import {
  packNegItems,
  QueryTimeoutError,
  StoreClosedError,
  type AdminEntry,
  type AdminLogEntry,
  type AdminStore,
  type CommitFeed,
  type CountJob,
  type GateAsOf,
  type HiddenEntry,
  type HiddenWhat,
  type Leadership,
  type NegItems,
  type NegJob,
  type PendingWrite,
  type PurgeWatch,
  type QueryJob,
  type ReadContext,
  type Store,
  type WriteOutcome,
  type WriteRules,
} from "../types.ts";
import { newestFirst } from "../semantics.ts";
import { PostgresAdmission } from "./admission.ts";
import { RedisBus } from "./bus.ts";
import { PostgresGroups } from "./groups.ts";
import { PostgresLeaders } from "./leader.ts";
import { CommitOrder, type OrderedEvent } from "./order.ts";
import { FEED_WINDOW, feedWindowFits, hllRegisters, planFilter, planNeg, planSeqs, type QueryRow } from "./query.ts";
import { migrate } from "./schema.ts";
import { isStored, PG_PURGE_BYTES, PG_PURGE_ROWS, purgeStep, writeBatch } from "./write.ts";

interface PostgresStoreOptions {
  url: string;
  /** Redis URL of the cross-node bus; empty = none (other nodes' events are found by polling). */
  busUrl?: string;
  poolSize?: number;
  queryTimeoutMs?: number;
  /** How often the sequence is read for commits whose bus message never came. */
  pollMs?: number;
}

const TIMEOUT = "57014"; // query_canceled (statement_timeout)
/** Admission changes told by pubkey up to this many a look; past it, everything is read again. */
const ADMISSIONS_NAMED = 1000;
/** After admission changes, everything is read again at most this often (a change committed out of seq order). */
const FULL_RELOAD_S = 300;
/** How long the admission change log is kept. */
const CHANGES_KEPT_S = 3600;

export class PostgresStore implements Store {
  readonly admin: PostgresAdmin;
  readonly admission: PostgresAdmission;
  readonly groups: PostgresGroups;
  private feed?: CommitFeed;
  private readonly order: CommitOrder;
  private bus?: RedisBus;
  private poller?: ReturnType<typeof setInterval>;
  private closed = false;

  private constructor(
    readonly sql: SQL,
    start: number,
  ) {
    this.order = new CommitOrder(start, {
      emit: (e) => this.committed(e),
      readRange: (from, to) => this.readRange(from, to),
    });
    this.admin = new PostgresAdmin(sql, () => this.bus?.publishAdminChange());
    this.admission = new PostgresAdmission(sql, () => this.bus?.publishAdmissionChange());
    this.groups = new PostgresGroups(sql);
  }

  static async open(opts: PostgresStoreOptions): Promise<PostgresStore> {
    const sql = new SQL({
      url: opts.url,
      max: opts.poolSize ?? 10,
      // Reads that run too long are cancelled by the server (answered CLOSED error:).
      // JIT compiles for 100-300 ms when list parameters inflate the cost estimates of queries
      // that run in milliseconds (measured on 1M events: docs/scaling.md).
      connection: { statement_timeout: String(opts.queryTimeoutMs ?? 10_000), application_name: "bunstr", jit: "off" },
    } as ConstructorParameters<typeof SQL>[0]);
    await migrate(sql);
    const [row] = await sql`SELECT value FROM relay_seq`;
    const store = new PostgresStore(sql, Number(row.value));
    // The admission change log's cursor, before the registry's first read: what comes after is told.
    const [changes] = await sql`SELECT coalesce(max(seq), 0)::float8 AS seq FROM admission_changes`;
    store.admissionSeq = changes.seq as number;
    store.fullAt = Math.floor(Date.now() / 1000);
    if (opts.busUrl) {
      const [identity] = await sql`SELECT id FROM relay_identity`;
      store.bus = await RedisBus.connect(opts.busUrl, identity.id, {
        batch: (b) =>
          store.order.add({
            from: b.from,
            to: b.to,
            events: b.events.map((e) => ({ seq: e.seq, json: e.json, event: JSON.parse(e.json) as NostrEvent })),
          }),
        adminChanged: () => store.feed?.adminChanged(),
        admissionsChanged: () => void store.admissionsSince(),
        ephemeral: (json) => store.feed?.ephemeral(JSON.parse(json) as NostrEvent, json),
      });
    }
    store.poller = setInterval(() => void store.poll(), opts.pollMs ?? 1000);
    store.poller.unref();
    return store;
  }

  /**
   * Every node's commits, this one's too, reach the feed through the commit order
   * (postgres/order.ts): this node's from writeBatch, the others' from the bus and the poller.
   */
  subscribe(feed: CommitFeed): void {
    this.feed = feed;
  }

  private committed(e: OrderedEvent): void {
    try {
      this.feed?.committed(e.event, e.json);
    } catch (err) {
      // A fanout bug must not fail the batch that committed it, nor stop the order.
      log.error("fanout of a stored event failed:", err);
    }
  }

  shareEphemeral(_event: NostrEvent, json: string): void {
    this.bus?.publishEphemeral(json);
  }

  /** The admin_version last seen; a change (by another node) reloads the admin state. */
  private adminVersion?: number;
  /** The last admission_changes seq whose pubkeys the feed was told; a read of what came after, in flight and wanted again. */
  private admissionSeq?: number;
  private admissionsReading?: Promise<void>;
  private admissionsAgain = false;
  /** When the change log was last pruned, and when the registry last read everything (seconds). */
  private prunedAt = 0;
  private fullAt = 0;
  private changedSinceFull = false;
  private leaders?: PostgresLeaders;

  /** One node at a time does `name`'s background work (postgres/leader.ts). */
  leader(name: string): Leadership {
    this.leaders ??= new PostgresLeaders(this.sql);
    return this.leaders.lead(name);
  }

  /**
   * The pubkeys whose admissions changed since the last look (any node's writes, this one's
   * too), told to the feed to read their rows again: on the bus's word at once, and at each
   * poll (a lost message). Past ADMISSIONS_NAMED pubkeys, or when the log no longer reaches back
   * (pruned), everything is read again; so it is every FULL_RELOAD_S after a change, as a change
   * whose seq was taken before a neighbour's but committed after it is past the cursor.
   */
  private admissionsSince(): Promise<void> {
    if (this.admissionsReading) {
      this.admissionsAgain = true;
      return this.admissionsReading;
    }
    const read = async () => {
      do {
        this.admissionsAgain = false;
        const [row] = await this
          .sql`SELECT coalesce(max(seq), 0)::float8 AS seq, coalesce(min(seq), 0)::float8 AS first FROM admission_changes`;
        const upTo = row.seq as number;
        const after = this.admissionSeq;
        this.admissionSeq = upTo;
        const now = Math.floor(Date.now() / 1000);
        if (after !== undefined && upTo > after) {
          this.changedSinceFull = true;
          const reachable = (row.first as number) <= after + 1;
          const pubkeys = reachable ? await this.admission.changedSince(after, upTo, ADMISSIONS_NAMED) : [];
          this.feed?.admissionsChanged?.(reachable && pubkeys.length <= ADMISSIONS_NAMED ? pubkeys : undefined);
        }
        if (this.changedSinceFull && now - this.fullAt >= FULL_RELOAD_S) {
          this.changedSinceFull = false;
          this.fullAt = now;
          this.feed?.admissionsChanged?.(undefined);
        }
        if (now - this.prunedAt >= 60) {
          this.prunedAt = now;
          await this.admission.pruneChanges(now - CHANGES_KEPT_S);
        }
      } while (this.admissionsAgain && !this.closed);
    };
    this.admissionsReading = read()
      .catch((err) => {
        if (!this.closed) log.error("postgres: could not read the admission changes:", err);
      })
      .finally(() => {
        this.admissionsReading = undefined;
      });
    return this.admissionsReading;
  }

  private async poll(): Promise<void> {
    if (this.closed) return;
    try {
      const [row] = await this.sql`SELECT (SELECT value FROM relay_seq) AS seq, (SELECT value FROM admin_version) AS admin`;
      const admin = Number(row.admin);
      if (this.adminVersion !== undefined && admin !== this.adminVersion) this.feed?.adminChanged();
      this.adminVersion = admin;
      await this.admissionsSince();
      await this.order.catchUp(Number(row.seq));
    } catch (err) {
      if (!this.closed) log.error("postgres: could not read the commit sequence:", err);
    }
  }

  private async readRange(from: number, to: number): Promise<OrderedEvent[]> {
    const rows = await this.sql`SELECT seq, json FROM events WHERE seq BETWEEN ${from} AND ${to} ORDER BY seq`;
    return rows.map((r: { seq: string; json: string }) => ({ seq: Number(r.seq), json: r.json, event: JSON.parse(r.json) as NostrEvent }));
  }

  has(id: string): Promise<boolean> {
    return isStored(this.sql, id);
  }

  /** Only over the network: ask has (nothing to wait behind there, the database serializes the writes). */
  hasNow(_id: string): undefined {
    return undefined;
  }

  /** No bound: every tick's events start a batch of their own, on the pool. */
  readonly writePipeline = Number.POSITIVE_INFINITY;

  async writeBatch(batch: PendingWrite[], rules: WriteRules): Promise<WriteOutcome[]> {
    let result;
    try {
      result = await writeBatch(this.sql, batch, rules);
    } catch (err) {
      // The server refused something in the batch (one odd event): the others must not fail
      // with it, so each is written on its own. Connection errors, and the server out of
      // resources (SQLSTATE class 53: disk full, out of memory), fail the batch as they are
      // (the writer queue answers and logs it once, not once per event).
      const e = err as { code?: string; errno?: string };
      if (batch.length === 1 || e.code !== "ERR_POSTGRES_SERVER_ERROR" || e.errno?.startsWith("53")) throw err;
      const outcomes: WriteOutcome[] = [];
      for (const w of batch) {
        try {
          outcomes.push(...(await this.writeBatch([w], rules)));
        } catch (one) {
          log.error(`postgres: could not store event ${w.event.id}:`, one);
          outcomes.push({ stored: false, duplicate: false, refusal: refuse("error", "could not store the event") });
        }
      }
      return outcomes;
    }
    const { outcomes, committed } = result;
    const b = { from: committed.from, to: committed.to, events: committed.stored };
    this.bus?.publishBatch(b);
    this.order.add(b);
    for (const o of outcomes) if (o.stored && o.purge !== undefined) this.awaited.add(o.purge);
    if (committed.purgesLeft) this.onPurge?.();
    return outcomes;
  }

  /** What watchPurges was told to tell (the writer queue's; tests set them directly). */
  onPurge?: () => void;
  onPurged?: (ids: number[]) => void;

  watchPurges(watch: PurgeWatch): void {
    this.onPurge = () => watch.more();
    this.onPurged = (ids) => watch.done(ids);
  }

  /** Purges of this node's NIP-09 deletions whose OKs wait (WriteOutcome.purge): any node may carry them out. */
  private readonly awaited = new Set<number>();
  /** The purge the last step worked on: the next step takes the one after it (round-robin). */
  private lastStepped = 0;

  /**
   * Store.purgeStep: PG_PURGE_ROWS events a step (the time budget is the SQLite writer's: Postgres
   * does not run on this thread). Then tells which awaited purges are gone, whichever node
   * finished them; while one is left (another node may be running it), there is more.
   */
  async purgeStep(_budgetMs: number): Promise<boolean> {
    if (this.closed) return false;
    try {
      const purge = await purgeStep(this.sql, this.lastStepped);
      const stepped = purge !== undefined;
      this.lastStepped = purge ?? 0;
      if (this.awaited.size === 0) return stepped;
      const ids = [...this.awaited];
      const rows = await this.sql.unsafe(
        "SELECT id::float8 AS id FROM purges WHERE id IN (SELECT x::bigint FROM jsonb_array_elements_text($1::text::jsonb) x)",
        [JSON.stringify(ids)],
      );
      const left = new Set((rows as { id: number }[]).map((r) => r.id));
      const done = ids.filter((id) => !left.has(id));
      for (const id of done) this.awaited.delete(id);
      if (done.length > 0) this.onPurged?.(done);
      // Only waiting for another node's step: not in a tight loop.
      if (!stepped && left.size > 0) await Bun.sleep(50);
      return stepped || left.size > 0;
    } catch (err) {
      if (this.closed) return false;
      throw err;
    }
  }

  private async read<T>(ctx: ReadContext | undefined, run: () => Promise<T>): Promise<T> {
    if (this.closed) throw new StoreClosedError();
    const started = performance.now();
    try {
      return await run();
    } catch (err) {
      if ((err as { errno?: string }).errno === TIMEOUT) throw new QueryTimeoutError();
      throw err;
    } finally {
      const ms = performance.now() - started;
      ctx?.onCost?.(ms);
      ctx?.onEnd?.(ms);
    }
  }

  /** Postgres answers a query whole (statement_timeout bounds it); handed on in batches. */
  async *query(job: QueryJob, ctx?: ReadContext): AsyncGenerator<string[]> {
    const rows = await this.queryAll(job, ctx);
    for (let i = 0; i < rows.length; i += 64) yield rows.slice(i, i + 64);
  }

  private queryAll(job: QueryJob, ctx?: ReadContext): Promise<string[]> {
    return this.read(ctx, async () => {
      const parts = await Promise.all(
        job.filters.map(async (f, i) => {
          const limit = job.limits[i]!;
          if (limit <= 0) return [];
          if (feedWindowFits(f)) {
            const recent = planFilter(f, limit, job, FEED_WINDOW);
            const rows = (await this.sql.unsafe(recent.sql, recent.params)) as QueryRow[];
            if (rows.length >= limit) return rows;
          }
          const plan = planFilter(f, limit, job);
          return (await this.sql.unsafe(plan.sql, plan.params)) as QueryRow[];
        }),
      );
      const seen = new Map<string, QueryRow>();
      for (const rows of parts) for (const r of rows) if (!seen.has(r.id)) seen.set(r.id, r);
      const rows = [...seen.values()];
      // Search results keep their relevance order; everything else is merged by time.
      if (job.filters.length > 1 && !job.filters.some((f) => f.search !== undefined)) rows.sort(newestFirst);
      const frame = job.frame;
      return frame === undefined ? rows.map((r) => r.json) : rows.map((r) => `${frame}${r.json}]`);
    });
  }

  count(job: CountJob, ctx?: ReadContext): Promise<{ count: number; hll?: string }> {
    return this.read(ctx, async () => {
      const { sql, params } = planSeqs(job.filters, job);
      if (job.hllOffset === undefined) {
        const [row] = await this.sql.unsafe(`SELECT count(*)::float8 AS n FROM (${sql}) s`, params);
        return { count: row.n as number };
      }
      // The registers are aggregated in SQL (at most 256 rows back): every match's pubkey
      // brought here was 32 bytes and an object per event, held until the last arrived.
      const { sql: registers, params: all } = hllRegisters(sql, params, job.hllOffset);
      const rows = (await this.sql.unsafe(registers, all)) as { ri: number; rank: number; n: number }[];
      const hll = new Hll(job.hllOffset);
      let count = 0;
      for (const r of rows) {
        hll.registers[r.ri] = r.rank;
        count += r.n;
      }
      return { count, hll: hll.hex() };
    });
  }

  negentropyItems(job: NegJob, ctx?: ReadContext): Promise<NegItems> {
    return this.read(ctx, async () => {
      const { sql, params } = planNeg(job.filter, job.max, job);
      const rows = (await this.sql.unsafe(sql, params)) as { t: number; id: string }[];
      const overflow = rows.length > job.max;
      if (overflow) rows.length = job.max;
      return packNegItems(
        rows.map((r) => r.t),
        rows.map((r) => r.id),
        overflow,
      );
    });
  }

  /**
   * NIP-40, in transactions of at most PG_PURGE_ROWS events and about PG_PURGE_BYTES of their
   * JSON (their tag rows go with them): 5,000 events of many tags in one were minutes of a
   * transaction. Outside the sequence lock: other writes go on.
   */
  async sweepExpired(now: number): Promise<number> {
    let swept = 0;
    for (;;) {
      if (this.closed) return swept;
      const n = await this.sql.begin(async (tx) => {
        await tx`SET LOCAL statement_timeout = 0`;
        const [r] = await tx.unsafe(
          `WITH pick AS (SELECT seq, octet_length(json) AS b FROM events WHERE expiration IS NOT NULL AND expiration <= $1 LIMIT ${PG_PURGE_ROWS}),
                sized AS (SELECT seq, sum(b) OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING) - b AS before FROM pick),
                gone AS (DELETE FROM events WHERE seq IN (SELECT seq FROM sized WHERE before < ${PG_PURGE_BYTES}) RETURNING 1)
           SELECT count(*)::int AS n FROM gone`,
          [now],
        );
        return r.n as number;
      });
      swept += n;
      if (n === 0) return swept;
    }
  }

  /** No reader workers to wait for, no read queue to forget. */
  async ready(): Promise<void> {}

  cancelReads(_owner: object): void {}

  async sizeBytes(): Promise<number> {
    const [row] = await this.sql`SELECT pg_database_size(current_database())::float8 AS b`;
    return row.b as number;
  }

  lastSeq(): number {
    return this.order.applied;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.poller);
    await this.leaders?.close();
    await this.admissionsReading;
    this.order.close();
    await this.bus?.close();
    await this.sql.close({ timeout: 5 });
  }
}

/** Admin state in Postgres; each change is announced on the bus so every node reloads it. */
class PostgresAdmin implements AdminStore {
  constructor(
    private readonly sql: SQL,
    private readonly changed: () => void,
  ) {}

  async entries(): Promise<AdminEntry[]> {
    const rows = await this.sql`SELECT list, key, value, at::float8 AS at FROM admin_entries ORDER BY list, at, key`;
    return [...rows] as AdminEntry[];
  }

  async put(e: AdminEntry): Promise<void> {
    await this.sql`WITH put AS (INSERT INTO admin_entries (list, key, value, at) VALUES (${e.list}, ${e.key}, ${e.value}, ${e.at})
                            ON CONFLICT (list, key) DO UPDATE SET value = excluded.value, at = excluded.at)
                   UPDATE admin_version SET value = value + 1`;
    this.changed();
  }

  async remove(list: string, key: string): Promise<void> {
    await this
      .sql`WITH gone AS (DELETE FROM admin_entries WHERE list = ${list} AND key = ${key}) UPDATE admin_version SET value = value + 1`;
    this.changed();
  }

  async useToken(id: string, expires: number, now: number): Promise<boolean> {
    await this.sql`DELETE FROM admin_tokens WHERE expires < ${now}`;
    return (
      (await this.sql`INSERT INTO admin_tokens (id, expires) VALUES (${id}, ${expires}) ON CONFLICT DO NOTHING RETURNING id`).length === 1
    );
  }

  async log(e: AdminLogEntry): Promise<void> {
    await this
      .sql`INSERT INTO admin_log (at, pubkey, method, params, result) VALUES (${e.at}, ${e.pubkey}, ${e.method}, ${e.params}, ${e.result})`;
  }

  async recentLog(limit: number): Promise<AdminLogEntry[]> {
    const rows = await this.sql`SELECT at::float8 AS at, pubkey, method, params, result FROM admin_log ORDER BY seq DESC LIMIT ${limit}`;
    return [...rows] as AdminLogEntry[];
  }

  async deleteEvent(id: string, keepOut = false): Promise<boolean> {
    if (!keepOut) return (await this.sql`DELETE FROM events WHERE id = decode(${id}, 'hex') RETURNING seq`).length > 0;
    const [row] = await this.sql`WITH d AS (DELETE FROM events WHERE id = decode(${id}, 'hex') RETURNING id, pubkey),
      t AS (INSERT INTO deleted_ids (id, pubkey) SELECT id, pubkey FROM d ON CONFLICT DO NOTHING)
      SELECT count(*)::int AS n FROM d`;
    return (row as { n: number }).n > 0;
  }

  async deleteAuthor(pubkey: string): Promise<number> {
    // However many events the pubkey has: not cut off by the read timeout.
    return this.sql.begin(async (tx) => {
      await tx`SET LOCAL statement_timeout = 0`;
      return (await tx`DELETE FROM events WHERE pubkey = decode(${pubkey}, 'hex') RETURNING seq`).length;
    });
  }

  async hidden(): Promise<HiddenEntry[]> {
    const rows = await this
      .sql`SELECT what, encode(key, 'hex') AS key, since::float8 AS since, purging FROM hidden ORDER BY since, what, key`;
    return [...rows] as HiddenEntry[];
  }

  // Each change of `hidden` moves admin_version and is announced: every node reloads its admin
  // state, and with it what its reads hide (Visibility.hidden).
  async hide(what: HiddenWhat, key: string, since: number): Promise<void> {
    await this
      .sql`WITH h AS (INSERT INTO hidden (what, key, since) VALUES (${what}, decode(${key}, 'hex'), ${since}) ON CONFLICT DO NOTHING)
                   UPDATE admin_version SET value = value + 1`;
    this.changed();
  }

  async unhide(what: HiddenWhat, key: string): Promise<void> {
    await this.sql`WITH h AS (DELETE FROM hidden WHERE what = ${what} AND key = decode(${key}, 'hex'))
                   UPDATE admin_version SET value = value + 1`;
    this.changed();
  }

  /** One statement deletes the author's events (as deleteAuthor), and the row with them: done at once, on any node. */
  async purgeHidden(what: HiddenWhat, key: string): Promise<boolean> {
    await this.sql.begin(async (tx) => {
      await tx`SET LOCAL statement_timeout = 0`;
      const col = what === "pubkey" ? "pubkey" : "id";
      await tx.unsafe(`DELETE FROM events WHERE ${col} = decode($1, 'hex')`, [key]);
      await tx`DELETE FROM hidden WHERE what = ${what} AND key = decode(${key}, 'hex')`;
      await tx`UPDATE admin_version SET value = value + 1`;
    });
    this.changed();
    return true;
  }

  /** As SQLite's (store/sqlite/write.ts setGates): every node sends the same, each row only over an older one. */
  async setGroupGates(gates: readonly GroupGate[], asOf: GateAsOf): Promise<void> {
    if (gates.length === 0) return;
    const rows = JSON.stringify(gates.map((g) => [g.group, g.events, g.metadata]));
    // The event's seq (0 if it is gone: then only rows no commit set are written).
    const seq = "seq" in asOf ? "$2::bigint" : "coalesce((SELECT seq FROM events WHERE id = decode($2, 'hex')), 0)";
    await this.sql.unsafe(
      `INSERT INTO group_gates (value, events, metadata, seq)
       SELECT x->>0, (x->>1)::boolean, (x->>2)::boolean, ${seq} FROM jsonb_array_elements($1::text::jsonb) x
       ON CONFLICT (value) DO UPDATE SET events = excluded.events, metadata = excluded.metadata, seq = excluded.seq
       WHERE group_gates.seq <= excluded.seq OR group_gates.seq > (SELECT coalesce(max(seq), 0) FROM events)`,
      [rows, "seq" in asOf ? asOf.seq : asOf.id],
    );
  }
}
