// NIP-86 admin state in the relay's own database: one keyed table of lists, the NIP-98 tokens
// already used, and the log of admin calls. Small and rare writes: plain statements on the
// writer connection, each its own transaction. With a writer thread (ThreadAdmin) the writes are
// calls to it, between two batches, and the lists are read on this thread's connection.
import type { Database } from "bun:sqlite";
import type { AdminEntry, AdminLogEntry, AdminStore } from "../types.ts";
import type { SqliteWriter } from "./write.ts";
import type { WriterThread } from "./writer-thread.ts";

/** What both kinds of admin state read, on the connection of this thread. */
abstract class AdminReads {
  private readonly all;
  private readonly recent;

  constructor(db: Database) {
    this.all = db.prepare("SELECT list, key, value, at FROM admin_entries ORDER BY list, at, key");
    this.recent = db.prepare("SELECT at, pubkey, method, params, result FROM admin_log ORDER BY seq DESC LIMIT ?");
  }

  entries(): AdminEntry[] {
    return this.all.all() as AdminEntry[];
  }

  recentLog(limit: number): AdminLogEntry[] {
    return this.recent.all(limit) as AdminLogEntry[];
  }
}

/** The admin state's writes, prepared on the writer connection. */
function adminWrites(db: Database) {
  const q = (sql: string) => db.prepare(sql);
  return {
    put: q(
      "INSERT INTO admin_entries (list, key, value, at) VALUES (?, ?, ?, ?) ON CONFLICT DO UPDATE SET value = excluded.value, at = excluded.at",
    ),
    remove: q("DELETE FROM admin_entries WHERE list = ? AND key = ?"),
    useToken: q("INSERT INTO admin_tokens (id, expires) VALUES (?, ?) ON CONFLICT DO NOTHING"),
    pruneTokens: q("DELETE FROM admin_tokens WHERE expires < ?"),
    log: q("INSERT INTO admin_log (at, pubkey, method, params, result) VALUES (?, ?, ?, ?, ?)"),
  };
}

export class SqliteAdmin extends AdminReads implements AdminStore {
  private readonly st: ReturnType<typeof adminWrites>;

  constructor(
    db: Database,
    private readonly writer: SqliteWriter,
  ) {
    super(db);
    this.st = adminWrites(db);
  }

  put(e: AdminEntry): void {
    this.st.put.run(e.list, e.key, e.value, e.at);
  }

  remove(list: string, key: string): void {
    this.st.remove.run(list, key);
  }

  useToken(id: string, expires: number, now: number): boolean {
    this.st.pruneTokens.run(now);
    return this.st.useToken.run(id, expires).changes === 1;
  }

  log(e: AdminLogEntry): void {
    this.st.log.run(e.at, e.pubkey, e.method, e.params, e.result);
  }

  deleteEvent(id: string): boolean {
    return this.writer.removeById(id);
  }

  deleteAuthor(pubkey: string): number {
    return this.writer.removeByAuthor(pubkey);
  }
}

/** The admin state when the writer connection is in the writer thread (store/sqlite/writer-worker.ts). */
export class ThreadAdmin extends AdminReads implements AdminStore {
  constructor(
    db: Database,
    private readonly thread: WriterThread,
  ) {
    super(db);
  }

  put(e: AdminEntry): Promise<void> {
    return this.thread.admin("put", e);
  }

  remove(list: string, key: string): Promise<void> {
    return this.thread.admin("remove", list, key);
  }

  useToken(id: string, expires: number, now: number): Promise<boolean> {
    return this.thread.admin("useToken", id, expires, now);
  }

  log(e: AdminLogEntry): Promise<void> {
    return this.thread.admin("log", e);
  }

  deleteEvent(id: string): Promise<boolean> {
    return this.thread.admin("deleteEvent", id);
  }

  deleteAuthor(pubkey: string): Promise<number> {
    return this.thread.admin("deleteAuthor", pubkey);
  }
}
