// NIP-86 admin state in the relay's own database: one keyed table of lists, the NIP-98 tokens
// already used, and the log of admin calls. Small and rare writes: plain statements on the
// writer connection, each its own transaction (SqliteAdmin, where the writer is). The Store's
// AdminStore: with a writer thread (ThreadAdmin) the writes are calls to it, between two
// batches, and the lists are read on this thread's connection; without one (InlineAdmin), the
// writer's SqliteAdmin behind the same promises.
import type { Database } from "bun:sqlite";
import type { GroupGate } from "../../nips/nip29.ts";
import type { AdminEntry, AdminLogEntry, AdminStore, GateAsOf, HiddenEntry, HiddenWhat } from "../types.ts";
import type { SqliteWriter } from "./write.ts";
import type { WriterThread } from "./writer-thread.ts";

/** What the admin state reads, on the connection of this thread. */
class AdminReads {
  private readonly all;
  private readonly recent;
  private readonly hiddenRows;

  constructor(db: Database) {
    this.all = db.prepare("SELECT list, key, value, at FROM admin_entries ORDER BY list, at, key");
    this.recent = db.prepare("SELECT at, pubkey, method, params, result FROM admin_log ORDER BY seq DESC LIMIT ?");
    this.hiddenRows = db.prepare("SELECT what, lower(hex(key)) AS key, since, purging FROM hidden ORDER BY since, what, key");
  }

  hidden(): HiddenEntry[] {
    return (this.hiddenRows.all() as (Omit<HiddenEntry, "purging"> & { purging: number })[]).map((r) => ({
      ...r,
      purging: r.purging === 1,
    }));
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

/** The admin state on the writer's connection, answering at once (the writer thread's, an import's, InlineAdmin's). */
export class SqliteAdmin extends AdminReads {
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

  deleteEvent(id: string, keepOut = false): boolean {
    return this.writer.removeById(id, keepOut);
  }

  deleteAuthor(pubkey: string): number {
    return this.writer.removeByAuthor(pubkey);
  }

  setGroupGates(gates: readonly GroupGate[], asOf: GateAsOf): void {
    this.writer.setGates(gates, asOf);
  }

  hide(what: HiddenWhat, key: string, since: number): void {
    this.writer.setHidden(what, key, since);
  }

  unhide(what: HiddenWhat, key: string): void {
    this.writer.setHidden(what, key, null);
  }

  purgeHidden(what: HiddenWhat, key: string): boolean {
    return this.writer.purgeHidden(what, key);
  }
}

/** The admin state when the writer connection is in the writer thread (store/sqlite/writer-worker.ts). */
export class ThreadAdmin implements AdminStore {
  private readonly reads: AdminReads;

  constructor(
    db: Database,
    private readonly thread: WriterThread,
  ) {
    this.reads = new AdminReads(db);
  }

  async entries(): Promise<AdminEntry[]> {
    return this.reads.entries();
  }

  async recentLog(limit: number): Promise<AdminLogEntry[]> {
    return this.reads.recentLog(limit);
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

  deleteEvent(id: string, keepOut = false): Promise<boolean> {
    return this.thread.admin("deleteEvent", id, keepOut);
  }

  deleteAuthor(pubkey: string): Promise<number> {
    return this.thread.admin("deleteAuthor", pubkey);
  }

  setGroupGates(gates: readonly GroupGate[], asOf: GateAsOf): Promise<void> {
    return this.thread.admin("setGroupGates", gates, asOf);
  }

  async hidden(): Promise<HiddenEntry[]> {
    return this.reads.hidden();
  }

  hide(what: HiddenWhat, key: string, since: number): Promise<void> {
    return this.thread.admin("hide", what, key, since);
  }

  unhide(what: HiddenWhat, key: string): Promise<void> {
    return this.thread.admin("unhide", what, key);
  }

  purgeHidden(what: HiddenWhat, key: string): Promise<boolean> {
    return this.thread.admin("purgeHidden", what, key);
  }
}

/** The admin state when the writer is on this thread (an in-memory database, tools): SqliteAdmin behind AdminStore's promises. */
export class InlineAdmin implements AdminStore {
  constructor(private readonly a: SqliteAdmin) {}

  async entries(): Promise<AdminEntry[]> {
    return this.a.entries();
  }

  async recentLog(limit: number): Promise<AdminLogEntry[]> {
    return this.a.recentLog(limit);
  }

  async put(e: AdminEntry): Promise<void> {
    this.a.put(e);
  }

  async remove(list: string, key: string): Promise<void> {
    this.a.remove(list, key);
  }

  async useToken(id: string, expires: number, now: number): Promise<boolean> {
    return this.a.useToken(id, expires, now);
  }

  async log(e: AdminLogEntry): Promise<void> {
    this.a.log(e);
  }

  async deleteEvent(id: string, keepOut = false): Promise<boolean> {
    return this.a.deleteEvent(id, keepOut);
  }

  async deleteAuthor(pubkey: string): Promise<number> {
    return this.a.deleteAuthor(pubkey);
  }

  async setGroupGates(gates: readonly GroupGate[], asOf: GateAsOf): Promise<void> {
    this.a.setGroupGates(gates, asOf);
  }

  async hidden(): Promise<HiddenEntry[]> {
    return this.a.hidden();
  }

  async hide(what: HiddenWhat, key: string, since: number): Promise<void> {
    this.a.hide(what, key, since);
  }

  async unhide(what: HiddenWhat, key: string): Promise<void> {
    this.a.unhide(what, key);
  }

  async purgeHidden(what: HiddenWhat, key: string): Promise<boolean> {
    return this.a.purgeHidden(what, key);
  }
}
