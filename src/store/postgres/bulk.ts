// The operator commands' view of the Postgres store (Store's BulkStore, store/types.ts): the
// same reads, writes and maintenance as SQLite's (store/sqlite/bulk.ts), in Postgres's terms.
// Backup hands over to pg_dump; compact is VACUUM (ANALYZE), which runs beside the nodes.
import { renameSync, rmSync, statSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { isAddressable } from "../../protocol/kinds.ts";
import type { Filter } from "../../protocol/filter.ts";
import { PURGE_STEP_MS } from "../queue.ts";
import {
  packNegItems,
  type BackupResult,
  type BulkStore,
  type BulkWriter,
  type BulkWriterOptions,
  type CompactResult,
  type EventHead,
  type ExportRow,
  type ExportScope,
  type GroupRecords,
  type GrowthWatch,
  type NegItems,
  type StoreStats,
} from "../types.ts";
import { planNeg } from "./query.ts";
import type { PostgresStore } from "./store.ts";

/** Most (created_at, id) items sync reads: every event, in practice. */
const ALL_ITEMS = 2 ** 31 - 2;

/** `col = ANY(list)`, the list as one JSON parameter (hex decoded for bytea columns). */
const anyOf = (col: string, n: number, as: "bytea" | "int") =>
  `${col} = ANY(ARRAY(SELECT ${as === "bytea" ? "decode(x, 'hex')" : "x::int"} FROM jsonb_array_elements_text($${n}::text::jsonb) x))`;

export class PostgresBulk implements BulkStore {
  /** The store's (one set of statements for both). */
  get groups(): GroupRecords {
    return this.store.groups;
  }
  constructor(
    readonly store: PostgresStore,
    /** The connection URL, for pg_dump. */
    private readonly url: string,
  ) {}

  private get sql() {
    return this.store.sql;
  }

  async seqRange(): Promise<{ min: number; max: number }> {
    const [r] = await this.sql`SELECT coalesce(min(seq), 0)::float8 AS min, coalesce(max(seq), 0)::float8 AS max FROM events`;
    return { min: r.min as number, max: r.max as number };
  }

  exportPager(scope: ExportScope): (after: number, upTo: number, limit: number) => Promise<ExportRow[]> {
    const where = ["seq > $1", "seq <= $2"];
    const params: (string | number)[] = [];
    const add = (cond: (n: number) => string, value: string | number) => {
      params.push(value);
      where.push(cond(params.length + 3));
    };
    if (scope.since !== undefined) add((n) => `created_at >= $${n}`, scope.since);
    if (scope.until !== undefined) add((n) => `created_at <= $${n}`, scope.until);
    if (scope.kinds) add((n) => anyOf("kind", n, "int"), JSON.stringify(scope.kinds));
    if (scope.authors) add((n) => anyOf("pubkey", n, "bytea"), JSON.stringify(scope.authors));
    if (scope.ids) add((n) => anyOf("id", n, "bytea"), JSON.stringify(scope.ids));
    if (scope.now > 0) add((n) => `(expiration IS NULL OR expiration > $${n})`, scope.now);
    // Issue 34: what a ban hides is not exported (a backup, pg_dump of the database, keeps it).
    where.push(
      "NOT EXISTS (SELECT 1 FROM hidden hd WHERE (hd.what = 'pubkey' AND hd.key = events.pubkey) OR (hd.what = 'event' AND hd.key = events.id))",
    );
    const text = `SELECT seq::float8 AS seq, json FROM events WHERE ${where.join(" AND ")} ORDER BY seq LIMIT $3`;
    return async (after, upTo, limit) => [...(await this.sql.unsafe(text, [after, upTo, limit, ...params]))] as ExportRow[];
  }

  async negItems(filter: Filter, now: number): Promise<NegItems> {
    const visibility = { restrictedKinds: [], viewers: [], hidden: { authors: true, events: true } };
    const { sql, params } = planNeg(filter, ALL_ITEMS, { maxSeq: Number.MAX_SAFE_INTEGER, now, visibility });
    const rows = (await this.sql.unsafe(sql, params)) as { t: number; id: string }[];
    return packNegItems(
      rows.map((r) => r.t),
      rows.map((r) => r.id),
      false,
    );
  }

  async eventHeads(ids: string[]): Promise<Map<string, EventHead>> {
    const heads = new Map<string, EventHead>();
    for (let i = 0; i < ids.length; i += 500) {
      const rows = await this.sql.unsafe(
        `SELECT encode(id, 'hex') AS id, kind, encode(pubkey, 'hex') AS pubkey, created_at::float8 AS created_at, d FROM events WHERE ${anyOf("id", 1, "bytea")}`,
        [JSON.stringify(ids.slice(i, i + 500))],
      );
      for (const r of rows as (Omit<EventHead, "d"> & { id: string; d: string | null })[])
        heads.set(r.id, { kind: r.kind, pubkey: r.pubkey, created_at: r.created_at, d: isAddressable(r.kind) ? (r.d ?? "") : "" });
    }
    return heads;
  }

  async tombstoneOf(id: string, head: EventHead | undefined): Promise<"nip09" | "nip62" | undefined> {
    if ((await this.sql`SELECT 1 FROM deleted_ids WHERE id = decode(${id}, 'hex') LIMIT 1`).length > 0) return "nip09";
    if (!head) return undefined;
    const address = await this.sql`SELECT 1 FROM deleted_addresses
      WHERE pubkey = decode(${head.pubkey}, 'hex') AND kind = ${head.kind} AND d = ${head.d} AND until >= ${head.created_at}`;
    if (address.length > 0) return "nip09";
    const [v] = await this.sql`SELECT until::float8 AS until FROM vanished WHERE pubkey = decode(${head.pubkey}, 'hex')`;
    return v && (v.until as number) >= head.created_at ? "nip62" : undefined;
  }

  /** The store's own batch writer, which other nodes' writes already share; a duplicate is found by the write itself. */
  async writer(opts: BulkWriterOptions): Promise<BulkWriter> {
    const store = this.store;
    return {
      adminEntries: () => store.admin.entries(),
      has: () => false,
      txnSize: opts.batchSize,
      async commit(writes) {
        const outcomes = await store.writeBatch(writes, opts.rules);
        while (await store.purgeStep(PURGE_STEP_MS));
        return outcomes;
      },
    };
  }

  async stats(topKinds: number): Promise<StoreStats> {
    // Counts of every row: not cut off by the read timeout.
    return this.sql.begin(async (tx) => {
      await tx`SET LOCAL statement_timeout = 0`;
      const byKind = (await tx`SELECT kind, count(*)::float8 AS count FROM events GROUP BY kind ORDER BY count DESC, kind`) as {
        kind: number;
        count: number;
      }[];
      const [r] = await tx`SELECT
        (SELECT count(*) FROM events)::float8 AS events,
        (SELECT count(DISTINCT pubkey) FROM events)::float8 AS authors,
        (SELECT min(created_at) FROM events)::float8 AS oldest,
        (SELECT max(created_at) FROM events)::float8 AS newest,
        (SELECT count(*) FROM tags)::float8 AS tags,
        (SELECT count(*) FROM deleted_ids)::float8 AS deleted_ids,
        (SELECT count(*) FROM deleted_addresses)::float8 AS deleted_addresses,
        (SELECT count(*) FROM vanished)::float8 AS vanished,
        (SELECT count(*) FROM events WHERE expiration IS NOT NULL)::float8 AS expiring,
        (SELECT version FROM bunstr_schema) AS schema,
        pg_database_size(current_database())::float8 AS bytes`;
      return {
        events: r.events,
        authors: r.authors,
        kinds: byKind.slice(0, topKinds).map((k) => ({ kind: k.kind, count: k.count })),
        distinctKinds: byKind.length,
        oldest: r.oldest,
        newest: r.newest,
        tagRows: r.tags,
        deletedIds: r.deleted_ids,
        deletedAddresses: r.deleted_addresses,
        vanished: r.vanished,
        expiring: r.expiring,
        schemaVersion: r.schema,
        fileBytes: r.bytes,
        walBytes: 0,
        freeBytes: null,
      };
    });
  }

  /**
   * `pg_dump --format=custom --file=DEST` (restore: `pg_restore --dbname=URL DEST`) of the
   * snapshot this transaction exported, in which the events are counted; to a temporary file
   * renamed into place. The password goes to pg_dump in its environment, not its arguments.
   */
  async backup(dest: string, watch?: GrowthWatch): Promise<BackupResult> {
    const started = performance.now();
    const tmp = `${dest}.partial-${process.pid}`;
    mkdirSync(dirname(dest), { recursive: true });
    rmSync(tmp, { force: true });
    const url = new URL(this.url);
    const password = decodeURIComponent(url.password);
    url.password = "";
    const events = await this.sql.begin(async (tx) => {
      await tx.unsafe("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
      await tx`SET LOCAL statement_timeout = 0`;
      const [snap] = await tx`SELECT pg_export_snapshot() AS id, pg_database_size(current_database())::float8 AS bytes`;
      const [count] = await tx`SELECT count(*)::float8 AS n FROM events`;
      const stop = await (watch ?? (async () => () => {}))(tmp, snap.bytes as number);
      try {
        await pgDump(["--format=custom", `--snapshot=${snap.id}`, `--file=${tmp}`, `--dbname=${url.href}`], password);
      } catch (e) {
        rmSync(tmp, { force: true });
        throw e;
      } finally {
        stop();
      }
      return count.n as number;
    });
    renameSync(tmp, dest);
    return { file: dest, bytes: statSync(dest).size, events, seconds: (performance.now() - started) / 1000 };
  }

  /**
   * VACUUM (ANALYZE) of the database: the space of deleted rows is reused (not given back to the
   * file system: VACUUM FULL would lock every table for its length), the planner's statistics
   * refreshed. The nodes keep reading and writing meanwhile.
   */
  async compact(): Promise<CompactResult> {
    const started = performance.now();
    const size = async () => ({ file: Number((await this.sql`SELECT pg_database_size(current_database())::float8 AS b`)[0].b), wal: 0 });
    const before = await size();
    const conn = await this.sql.reserve();
    try {
      await conn`SET statement_timeout = 0`;
      await conn.unsafe("VACUUM (ANALYZE)");
      await conn`RESET statement_timeout`;
    } finally {
      conn.release();
    }
    const seconds = (performance.now() - started) / 1000;
    return { before, after: await size(), freePagesBefore: 0, checkpointBusy: false, seconds, phases: { vacuum: seconds } };
  }

  close(): Promise<void> {
    return this.store.close();
  }
}

async function pgDump(args: string[], password: string): Promise<void> {
  let proc;
  try {
    proc = Bun.spawn(["pg_dump", ...args], {
      env: { ...process.env, ...(password ? { PGPASSWORD: password } : {}) },
      stdin: "ignore",
      stdout: "ignore",
      stderr: "pipe",
    });
  } catch (e) {
    throw new Error(
      `backup on Postgres runs pg_dump, which could not be started (Debian: apt install postgresql-client): ${(e as Error).message}`,
    );
  }
  const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`pg_dump exited ${code}: ${stderr.trim()}`);
}
