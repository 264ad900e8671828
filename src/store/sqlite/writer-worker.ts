// The writer thread: it owns the SQLite write connection, so a batch's transaction (NIP-01/09/
// 40/50/62 storage, store/sqlite/write.ts) runs beside the main thread's websocket I/O, parsing
// and fanout instead of on it. The main thread (store/sqlite/writer-thread.ts) posts one message
// per batch: the batch's stored JSONs as one string and their lengths; this thread parses them,
// commits the batch in one transaction and answers with one seq per event. Purge steps, NIP-40
// sweeps and the admin writes come as calls between batches; messages are handled in order.
import type { Database } from "bun:sqlite";
import type { Prefix } from "../../protocol/reasons.ts";
import type { NostrEvent } from "../../protocol/event.ts";
import type { PendingWrite } from "../types.ts";
import { SqliteAdmin } from "./admin.ts";
import { SqliteAdmission } from "./admission.ts";
import { walBytes } from "./checkpointer.ts";
import { checkpointAndClose, openDatabase } from "./db.ts";
import { SqliteWriter } from "./write.ts";
import type { BatchHead, WriterCall, WriterReply, WriterRequest } from "./writer-thread.ts";

declare const self: Worker;

let db: Database | undefined;
let writer: SqliteWriter | undefined;
let admin: SqliteAdmin | undefined;
let admission: SqliteAdmission | undefined;

const reply = (r: WriterReply, transfer?: ArrayBuffer[]) => self.postMessage(r, transfer ?? []);

/** The batch's writes, cut from the one string they came in (writer-thread.ts BatchHead). */
function unpack(message: string): { head: BatchHead; writes: PendingWrite[] } {
  let at = message.indexOf("\n");
  const head = JSON.parse(message.slice(0, at)) as BatchHead;
  at++;
  const writes: PendingWrite[] = new Array(head.lengths.length);
  head.lengths.forEach((length, i) => {
    const json = message.slice(at, (at += length));
    writes[i] = { event: JSON.parse(json) as NostrEvent, json };
  });
  for (const [i, prefix, message] of head.vanishOnly) writes[i]!.vanishOnly = { prefix, message };
  return { head, writes };
}

function writeBatch(message: string): void {
  const w = writer!;
  const { head, writes } = unpack(message);
  const outcomes = w.writeBatchImmediate(writes, { ...head.rules, searchSkipKinds: new Set(head.rules.searchSkipKinds) });
  // One number per event: its seq when stored, 0 a duplicate, -1 refused (with the refusal).
  const seqs = new Float64Array(outcomes.length);
  const refusals: [number, Prefix, string][] = [];
  const purges: [number, number][] = [];
  outcomes.forEach((o, i) => {
    if (o.stored) {
      seqs[i] = o.seq;
      if (o.purge !== undefined) purges.push([i, o.purge]);
    } else if (o.duplicate) seqs[i] = 0;
    else {
      seqs[i] = -1;
      refusals.push([i, o.refusal.prefix, o.refusal.message]);
    }
  });
  // writeBatchImmediate looked for other processes' commits after its own (checkChanges).
  reply({ id: head.id, seqs, refusals, purges, seq: w.seq }, [seqs.buffer]);
}

function call(c: WriterCall): unknown {
  const w = writer!;
  switch (c.call) {
    case "purgeStep":
      return w.purgeStep(c.budgetMs);
    case "sweepExpired":
      return w.sweepExpired(c.now);
    case "admin":
      return (admin![c.method] as (...a: unknown[]) => unknown)(...c.args);
    case "admission":
      return (admission![c.method] as (...a: unknown[]) => unknown).apply(admission, c.args);
    case "changes":
      return w.checkChanges();
    case "walPages":
      if (c.pages !== undefined) setWalPages(c.pages);
      return (db!.query("PRAGMA wal_autocheckpoint").get() as { wal_autocheckpoint: number }).wal_autocheckpoint;
  }
}

/** After this long without a message (a batch, a duplicate check, a call) the cache is emptied. */
const IDLE_SHRINK_MS = 2_000;
/** When the last message came; Infinity once the cache was emptied after it (nothing to free). */
let lastMessage = Number.POSITIVE_INFINITY;
let idleTimer: ReturnType<typeof setInterval> | undefined;

/**
 * A relay that stops taking events gives its writer's cached pages back (PRAGMA shrink_memory
 * frees the clean ones): they would stay in the RSS through hours of reads otherwise. The next
 * batch reads what it needs again, from the kernel's page cache.
 */
function shrinkWhenIdle(): void {
  if (!db || performance.now() - lastMessage < IDLE_SHRINK_MS) return;
  lastMessage = Number.POSITIVE_INFINITY;
  db.exec("PRAGMA shrink_memory");
}

/**
 * The checkpointer thread copies the WAL as it grows; this connection's own checkpoint, past
 * `pages`, copies the rest and lets the next batch start the WAL over (checkpointer.ts). The WAL
 * file is kept up to that size when it starts over: a smaller limit (openDatabase's 64 MiB) had
 * it truncated and grown back, block by block, every cycle.
 */
function setWalPages(pages: number): void {
  const { page_size } = db!.query("PRAGMA page_size").get() as { page_size: number };
  db!.exec(`PRAGMA wal_autocheckpoint = ${pages}`);
  db!.exec(`PRAGMA journal_size_limit = ${walBytes(pages, page_size)}`);
}

function open(path: string, synchronous: "normal" | "full", walPages: number): void {
  db = openDatabase({ path, synchronous });
  // Pages through its own cache (openDatabase's 32 MB), not a map of the file: the map's pages
  // counted in the relay's RSS up to the whole database (223 of 540 MiB at 100k events).
  db.exec("PRAGMA mmap_size = 0");
  setWalPages(walPages);
  idleTimer = setInterval(shrinkWhenIdle, 1_000);
  writer = new SqliteWriter(db);
  // Recorded purges (a request to vanish, a ban): the main thread's queue runs the steps.
  writer.onPurge = () => reply({ purge: true });
  // Purges finished (a deletion's OK waits for its own), told before the answer of their call.
  writer.onPurged = (ids) => reply({ purged: ids });
  // Deletions and others' commits, each told before the answer of the call that found it.
  writer.onChanges = (changes) => reply({ changes });
  admin = new SqliteAdmin(db, writer);
  admission = new SqliteAdmission(db);
  reply({ ready: true, seq: writer.seq });
}

self.onmessage = (msg: MessageEvent) => {
  lastMessage = performance.now();
  const m = msg.data as WriterRequest;
  let id = 0;
  try {
    if (typeof m === "string" && m.startsWith("?")) {
      const comma = m.indexOf(",");
      id = Number(m.slice(1, comma));
      let found = "";
      for (let at = comma + 1; at < m.length; at += 64) found += writer!.has(m.slice(at, at + 64)) ? "1" : "0";
      return reply({ id, result: found });
    }
    if (typeof m === "string") {
      id = Number(m.slice('{"id":'.length, m.indexOf(","))); // for an error reply, before parsing

      return writeBatch(m);
    }
    if ("open" in m) return open(m.open, m.synchronous, m.walPages);
    if ("close" in m) {
      clearInterval(idleTimer);
      const warnings = db ? checkpointAndClose(db) : [];
      db = writer = admin = admission = undefined;
      return reply({ closed: true, warnings });
    }
    id = m.id;
    reply({ id, result: call(m) });
  } catch (e) {
    const err = e as { message?: unknown; code?: unknown; name?: unknown };
    reply({
      id,
      error: {
        message: String(err?.message ?? e),
        code: err?.code === undefined ? undefined : String(err.code),
        name: String(err?.name ?? "Error"),
      },
    });
  }
};
