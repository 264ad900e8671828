// Issue 33: who is admitted and why (AdmissionStore), in the relay's own database, as the admin
// state is (store/sqlite/admin.ts): reads on the calling thread's connection, writes on the
// writer's connection, each its own small transaction, between two batches when the writer is a
// thread (ThreadAdmission's calls) or at once on this thread (InlineAdmission). The writer
// handles its messages in order, so settleInvoice and takeInvite are each decided once, whoever
// races for them (a webhook and the poller; two joins with one code); a paid settle writes what
// was bought in its own transaction.
import type { Database } from "bun:sqlite";
import {
  paidRow,
  type AdmissionRow,
  type AdmissionStore,
  type InviteRow,
  type InvoiceRow,
  type IssuedInvite,
  type Nip05Row,
  type PaidEffect,
} from "../types.ts";
import type { AdmissionWrite, WriterThread } from "./writer-thread.ts";

/** Reads, on the connection of this thread. */
class AdmissionReads {
  private readonly st;

  constructor(db: Database) {
    const q = (sql: string) => db.prepare(sql);
    this.st = {
      rows: q("SELECT pubkey, basis, since, until, evidence FROM admissions ORDER BY since, pubkey, basis"),
      rowsOf: q("SELECT pubkey, basis, since, until, evidence FROM admissions WHERE pubkey IN (SELECT value FROM json_each(?))"),
      invoice: q("SELECT * FROM invoices WHERE payment_hash = ?"),
      openInvoice: q(
        "SELECT * FROM invoices WHERE pubkey = ? AND purpose = ? AND status = 'unpaid' AND expires_at > ? ORDER BY created_at DESC LIMIT 1",
      ),
      openInvoices: q("SELECT count(*) AS n FROM invoices WHERE status = 'unpaid' AND expires_at > ?"),
      dueInvoices: q(
        "SELECT * FROM invoices WHERE status = 'unpaid' AND expires_at > ? ORDER BY coalesce(checked_at, 0), created_at LIMIT ?",
      ),
      recentInvoices: q("SELECT * FROM invoices ORDER BY created_at DESC, payment_hash LIMIT ?"),
      balances: q("SELECT pubkey, sats FROM balances"),
      nip05: q("SELECT * FROM nip05 WHERE pubkey = ?"),
      dueNip05: q("SELECT * FROM nip05 WHERE checked_at < ? ORDER BY verified_at IS NULL, checked_at LIMIT ?"),
      invitesBy: q("SELECT * FROM invites WHERE issuer = ? ORDER BY created_at, code"),
    };
  }

  rows = () => this.st.rows.all() as AdmissionRow[];
  rowsOf = (pubkeys: readonly string[]) => this.st.rowsOf.all(JSON.stringify(pubkeys)) as AdmissionRow[];
  invoice = (hash: string) => (this.st.invoice.get(hash) as InvoiceRow | null) ?? undefined;
  openInvoice = (pubkey: string, purpose: string, now: number) =>
    (this.st.openInvoice.get(pubkey, purpose, now) as InvoiceRow | null) ?? undefined;
  openInvoices = (now: number) => (this.st.openInvoices.get(now) as { n: number }).n;
  dueInvoices = (now: number, graceS: number, max: number) => this.st.dueInvoices.all(now - graceS, max) as InvoiceRow[];
  recentInvoices = (limit: number) => this.st.recentInvoices.all(limit) as InvoiceRow[];
  balances = () => this.st.balances.all() as { pubkey: string; sats: number }[];
  nip05 = (pubkey: string) => (this.st.nip05.get(pubkey) as Nip05Row | null) ?? undefined;
  dueNip05 = (before: number, max: number) => this.st.dueNip05.all(before, max) as Nip05Row[];
  invitesBy = (issuer: string) => this.st.invitesBy.all(issuer) as InviteRow[];
}

/** Writes, on the writer's connection (the writer thread's, or this thread's without one). */
export class SqliteAdmission {
  private readonly st;

  constructor(private readonly db: Database) {
    const q = (sql: string) => db.prepare(sql);
    this.st = {
      put: q(
        `INSERT INTO admissions (pubkey, basis, since, until, evidence) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT DO UPDATE SET until = excluded.until, evidence = excluded.evidence`,
      ),
      remove: q("DELETE FROM admissions WHERE pubkey = ? AND basis = ?"),
      putInvoice: q(
        `INSERT INTO invoices (payment_hash, pubkey, purpose, amount_sats, bolt11, status, created_at, expires_at, paid_at, checked_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET
         status = excluded.status, paid_at = excluded.paid_at, checked_at = excluded.checked_at, expires_at = excluded.expires_at`,
      ),
      checked: q("UPDATE invoices SET checked_at = ? WHERE payment_hash = ?"),
      settle: q("UPDATE invoices SET status = ?, paid_at = ?, checked_at = ? WHERE payment_hash = ? AND status = 'unpaid'"),
      legacyPaid: q("UPDATE invoices SET checked_at = NULL WHERE status = 'paid' AND checked_at IS NOT NULL RETURNING *"),
      hasPaid: q("SELECT 1 FROM admissions WHERE pubkey = ? AND basis = 'paid'"),
      addBalance: q("INSERT INTO balances (pubkey, sats) VALUES (?, ?) ON CONFLICT DO UPDATE SET sats = sats + excluded.sats"),
      putNip05: q(
        `INSERT INTO nip05 (pubkey, address, verified_at, checked_at, failures, error) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT DO UPDATE SET address = excluded.address, verified_at = excluded.verified_at, checked_at = excluded.checked_at,
         failures = excluded.failures, error = excluded.error`,
      ),
      removeNip05: q("DELETE FROM nip05 WHERE pubkey = ?"),
      putInvite: q(
        `INSERT INTO invites (code, issuer, created_at, expires_at, used_by, used_at) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT DO UPDATE SET expires_at = excluded.expires_at, used_by = excluded.used_by, used_at = excluded.used_at`,
      ),
      invite: q("SELECT * FROM invites WHERE code = ?"),
      useInvite: q("UPDATE invites SET used_by = ?, used_at = ? WHERE code = ? AND used_by IS NULL"),
      openInvite: q("SELECT * FROM invites WHERE issuer = ? AND used_by IS NULL AND expires_at > ? ORDER BY created_at, code LIMIT 1"),
      usedInvites: q("SELECT count(*) AS n FROM invites WHERE issuer = ? AND used_by IS NOT NULL"),
    };
  }

  put(r: AdmissionRow): void {
    this.st.put.run(r.pubkey, r.basis, r.since, r.until, r.evidence);
  }

  remove(pubkey: string, basis: string): void {
    this.st.remove.run(pubkey, basis);
  }

  putInvoice(i: InvoiceRow): void {
    this.st.putInvoice.run(
      i.payment_hash,
      i.pubkey,
      i.purpose,
      i.amount_sats,
      i.bolt11,
      i.status,
      i.created_at,
      i.expires_at,
      i.paid_at,
      i.checked_at,
    );
  }

  checkedInvoice(hash: string, at: number): void {
    this.st.checked.run(at, hash);
  }

  settleInvoice(hash: string, status: "paid" | "expired", at: number, effect?: PaidEffect): boolean {
    return this.db.transaction(() => {
      const paid = status === "paid";
      if (this.st.settle.run(status, paid ? at : null, paid && effect ? null : at, hash).changes !== 1) return false;
      if (paid && effect && "admission" in effect) this.put(effect.admission);
      else if (paid && effect && "credit" in effect) this.st.addBalance.run(effect.credit.pubkey, effect.credit.sats);
      return true;
    })();
  }

  reconcilePaid(at: number): InvoiceRow[] {
    return this.db.transaction(() => {
      const mended: InvoiceRow[] = [];
      for (const i of this.st.legacyPaid.all() as InvoiceRow[]) {
        if (i.purpose !== "admission" || this.st.hasPaid.get(i.pubkey)) continue;
        this.put(paidRow(i, at));
        mended.push(i);
      }
      return mended;
    })();
  }

  addBalances(deltas: { pubkey: string; sats: number }[]): void {
    this.db.transaction(() => {
      for (const d of deltas) this.st.addBalance.run(d.pubkey, d.sats);
    })();
  }

  putNip05(r: Nip05Row): void {
    this.st.putNip05.run(r.pubkey, r.address, r.verified_at, r.checked_at, r.failures, r.error);
  }

  removeNip05(pubkey: string): void {
    this.st.removeNip05.run(pubkey);
  }

  putInvite(i: InviteRow): void {
    this.st.putInvite.run(i.code, i.issuer, i.created_at, i.expires_at, i.used_by, i.used_at);
  }

  takeInvite(code: string, pubkey: string, now: number): InviteRow | "unknown" | "expired" | "used" {
    return this.db.transaction(() => {
      const row = this.st.invite.get(code) as InviteRow | null;
      if (!row) return "unknown" as const;
      if (row.used_by !== null) return "used" as const;
      if (row.expires_at <= now) return "expired" as const;
      this.st.useInvite.run(pubkey, now, code);
      return row;
    })();
  }

  issueInvite(row: InviteRow, quota: number | null, now: number): IssuedInvite {
    return this.db.transaction((): IssuedInvite => {
      const open = this.st.openInvite.get(row.issuer, now) as InviteRow | null;
      if (open) return { row: open, fresh: false };
      if (quota !== null && (this.st.usedInvites.get(row.issuer) as { n: number }).n >= quota) return "none-left";
      this.putInvite(row);
      return { row, fresh: true };
    })();
  }
}

/** AdmissionStore from reads on this connection and writes wherever the writer is. */
function admissionStore(db: Database, write: <T>(method: AdmissionWrite, args: unknown[]) => Promise<T>): AdmissionStore {
  const r = new AdmissionReads(db);
  return {
    rows: async () => r.rows(),
    rowsOf: async (pubkeys) => r.rowsOf(pubkeys),
    put: (row) => write("put", [row]),
    remove: (pubkey, basis) => write("remove", [pubkey, basis]),
    putInvoice: (i) => write("putInvoice", [i]),
    invoice: async (hash) => r.invoice(hash),
    openInvoice: async (pubkey, purpose, now) => r.openInvoice(pubkey, purpose, now),
    openInvoices: async (now) => r.openInvoices(now),
    dueInvoices: async (now, graceS, max) => r.dueInvoices(now, graceS, max),
    checkedInvoice: (hash, at) => write("checkedInvoice", [hash, at]),
    settleInvoice: (hash, status, at, effect) => write("settleInvoice", [hash, status, at, effect]),
    reconcilePaid: (at) => write("reconcilePaid", [at]),
    recentInvoices: async (limit) => r.recentInvoices(limit),
    balances: async () => r.balances(),
    addBalances: (deltas) => write("addBalances", [deltas]),
    nip05: async (pubkey) => r.nip05(pubkey),
    putNip05: (row) => write("putNip05", [row]),
    removeNip05: (pubkey) => write("removeNip05", [pubkey]),
    dueNip05: async (before, max) => r.dueNip05(before, max),
    putInvite: (i) => write("putInvite", [i]),
    takeInvite: (code, pubkey, now) => write("takeInvite", [code, pubkey, now]),
    invitesBy: async (issuer) => r.invitesBy(issuer),
    issueInvite: (row, quota, now) => write("issueInvite", [row, quota, now]),
  };
}

/** With a writer thread: the writes are calls to it (store/sqlite/writer-worker.ts), between batches. */
export const threadAdmission = (db: Database, thread: WriterThread): AdmissionStore =>
  admissionStore(db, (method, args) => thread.admission(method, args));

/** Without one (an in-memory database, tools): the writes at once, on this thread's connection. */
export function inlineAdmission(db: Database): AdmissionStore {
  const w = new SqliteAdmission(db);
  return admissionStore(db, async <T>(method: AdmissionWrite, args: unknown[]) => (w[method] as (...a: unknown[]) => T)(...args));
}
