// Issue 33: who is admitted and why (AdmissionStore) in Postgres, shared by every node. Plain
// statements; put and remove log the pubkey in admission_changes (in the same statement) and tell
// the bus, so every node reads that pubkey's rows again (postgres/store.ts admissionsSince), not
// the whole table and the admin state (issue 33 review, M7). settleInvoice and takeInvite are one conditional
// UPDATE each: of nodes (or a webhook and the poller) racing, exactly one moves the row (and a
// paid settle writes what was bought in the same transaction). chargeBalance is the per-event
// charge of every node (access/ledger.ts): the balance lives here, not in any node's memory.
import type { SQL } from "bun";
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

// bigint columns as numbers (Bun's client answers int8 as strings).
const INVOICE = `payment_hash, pubkey, purpose, amount_sats::float8 AS amount_sats, bolt11, status, created_at::float8 AS created_at,
  expires_at::float8 AS expires_at, paid_at::float8 AS paid_at, checked_at::float8 AS checked_at`;
const NIP05 = `pubkey, address, verified_at::float8 AS verified_at, checked_at::float8 AS checked_at, failures::float8 AS failures, error`;
const INVITE = `code, issuer, created_at::float8 AS created_at, expires_at::float8 AS expires_at, used_by, used_at::float8 AS used_at`;

export class PostgresAdmission implements AdmissionStore {
  constructor(
    private readonly sql: SQL,
    private readonly changed: () => void,
  ) {}

  async rows(): Promise<AdmissionRow[]> {
    const rows = await this.sql`SELECT pubkey, basis, since::float8 AS since, until::float8 AS until, evidence FROM admissions
                                ORDER BY since, pubkey, basis`;
    return [...rows] as AdmissionRow[];
  }

  async rowsOf(pubkeys: readonly string[]): Promise<AdmissionRow[]> {
    if (pubkeys.length === 0) return [];
    const rows = await this.sql`SELECT pubkey, basis, since::float8 AS since, until::float8 AS until, evidence FROM admissions
                                WHERE pubkey = ANY(ARRAY(SELECT jsonb_array_elements_text(${JSON.stringify(pubkeys)}::text::jsonb)))`;
    return [...rows] as AdmissionRow[];
  }

  /** Pubkeys whose admissions changed after change `after` up to `upTo` (at most `max` + 1 of them: more means "reload all"). */
  async changedSince(after: number, upTo: number, max: number): Promise<string[]> {
    const rows = await this.sql`SELECT DISTINCT pubkey FROM admission_changes WHERE seq > ${after} AND seq <= ${upTo} LIMIT ${max + 1}`;
    return rows.map((r: { pubkey: string }) => r.pubkey);
  }

  /** The change log kept for an hour: a node further behind than that reloads everything. */
  async pruneChanges(before: number): Promise<void> {
    await this.sql`DELETE FROM admission_changes WHERE at < ${before}`;
  }

  async put(r: AdmissionRow): Promise<void> {
    await putRow(this.sql, r);
    this.changed();
  }

  async remove(pubkey: string, basis: string): Promise<void> {
    await this.sql`WITH gone AS (DELETE FROM admissions WHERE pubkey = ${pubkey} AND basis = ${basis})
                   INSERT INTO admission_changes (pubkey, at) VALUES (${pubkey}, ${Math.floor(Date.now() / 1000)})`;
    this.changed();
  }

  async putInvoice(i: InvoiceRow): Promise<void> {
    await this
      .sql`INSERT INTO invoices (payment_hash, pubkey, purpose, amount_sats, bolt11, status, created_at, expires_at, paid_at, checked_at)
                   VALUES (${i.payment_hash}, ${i.pubkey}, ${i.purpose}, ${i.amount_sats}, ${i.bolt11}, ${i.status}, ${i.created_at},
                           ${i.expires_at}, ${i.paid_at}, ${i.checked_at})
                   ON CONFLICT (payment_hash) DO UPDATE SET status = excluded.status, paid_at = excluded.paid_at,
                     checked_at = excluded.checked_at, expires_at = excluded.expires_at`;
  }

  async invoice(hash: string): Promise<InvoiceRow | undefined> {
    const [row] = await this.sql.unsafe(`SELECT ${INVOICE} FROM invoices WHERE payment_hash = $1`, [hash]);
    return row as InvoiceRow | undefined;
  }

  async openInvoice(pubkey: string, purpose: string, now: number): Promise<InvoiceRow | undefined> {
    const [row] = await this.sql.unsafe(
      `SELECT ${INVOICE} FROM invoices WHERE pubkey = $1 AND purpose = $2 AND status = 'unpaid' AND expires_at > $3
       ORDER BY created_at DESC LIMIT 1`,
      [pubkey, purpose, now],
    );
    return row as InvoiceRow | undefined;
  }

  async openInvoices(now: number): Promise<number> {
    const [row] = await this.sql`SELECT count(*)::float8 AS n FROM invoices WHERE status = 'unpaid' AND expires_at > ${now}`;
    return row.n as number;
  }

  async dueInvoices(now: number, graceS: number, max: number): Promise<InvoiceRow[]> {
    const rows = await this.sql.unsafe(
      `SELECT ${INVOICE} FROM invoices WHERE status = 'unpaid' AND expires_at > $1 ORDER BY coalesce(checked_at, 0), created_at LIMIT $2`,
      [now - graceS, max],
    );
    return [...rows] as InvoiceRow[];
  }

  async checkedInvoice(hash: string, at: number): Promise<void> {
    await this.sql`UPDATE invoices SET checked_at = ${at} WHERE payment_hash = ${hash}`;
  }

  async settleInvoice(hash: string, status: "paid" | "expired", at: number, effect?: PaidEffect): Promise<boolean> {
    const paid = status === "paid";
    const paidAt = paid ? at : null;
    const checkedAt = paid && effect ? null : at;
    const admission = paid && effect && "admission" in effect ? effect.admission : undefined;
    const moved = await this.sql.begin(async (tx) => {
      const [row] = await tx`UPDATE invoices SET status = ${status}, paid_at = ${paidAt}, checked_at = ${checkedAt}
                             WHERE payment_hash = ${hash} AND status = 'unpaid' RETURNING payment_hash`;
      if (!row) return false;
      if (admission) await putRow(tx, admission);
      else if (paid && effect && "credit" in effect) await addBalance(tx, effect.credit.pubkey, effect.credit.sats);
      return true;
    });
    if (moved && admission) this.changed();
    return moved;
  }

  async reconcilePaid(at: number): Promise<InvoiceRow[]> {
    const missed = await this.sql.begin(async (tx) => {
      // Claimed and marked in one statement: nodes starting at once each mend their own rows.
      const legacy = [
        ...(await tx.unsafe(`UPDATE invoices SET checked_at = NULL WHERE status = 'paid' AND checked_at IS NOT NULL RETURNING ${INVOICE}`)),
      ] as InvoiceRow[];
      const mended: InvoiceRow[] = [];
      for (const i of legacy) {
        if (i.purpose !== "admission") continue;
        const [has] = await tx`SELECT 1 FROM admissions WHERE pubkey = ${i.pubkey} AND basis = 'paid'`;
        if (has) continue;
        await putRow(tx, paidRow(i, at));
        mended.push(i);
      }
      return mended;
    });
    if (missed.length > 0) this.changed();
    return missed;
  }

  async recentInvoices(limit: number): Promise<InvoiceRow[]> {
    const rows = await this.sql.unsafe(`SELECT ${INVOICE} FROM invoices ORDER BY created_at DESC, payment_hash LIMIT $1`, [limit]);
    return [...rows] as InvoiceRow[];
  }

  async balances(): Promise<{ pubkey: string; sats: number }[]> {
    const rows = await this.sql`SELECT pubkey, sats::float8 AS sats FROM balances`;
    return [...rows] as { pubkey: string; sats: number }[];
  }

  async addBalances(deltas: { pubkey: string; sats: number }[]): Promise<void> {
    if (deltas.length === 0) return;
    await this.sql.begin(async (tx) => {
      for (const d of deltas) await addBalance(tx, d.pubkey, d.sats);
    });
  }

  async chargeBalance(pubkey: string, sats: number): Promise<{ charged: boolean; sats: number }> {
    const [left] = await this.sql`UPDATE balances SET sats = sats - ${sats} WHERE pubkey = ${pubkey} AND sats >= ${sats}
                                  RETURNING sats::float8 AS sats`;
    if (left) return { charged: true, sats: left.sats as number };
    const [row] = await this.sql`SELECT sats::float8 AS sats FROM balances WHERE pubkey = ${pubkey}`;
    return { charged: false, sats: (row?.sats as number | undefined) ?? 0 };
  }

  async nip05(pubkey: string): Promise<Nip05Row | undefined> {
    const [row] = await this.sql.unsafe(`SELECT ${NIP05} FROM nip05 WHERE pubkey = $1`, [pubkey]);
    return row as Nip05Row | undefined;
  }

  async putNip05(r: Nip05Row): Promise<void> {
    await this.sql`INSERT INTO nip05 (pubkey, address, verified_at, checked_at, failures, error)
                   VALUES (${r.pubkey}, ${r.address}, ${r.verified_at}, ${r.checked_at}, ${r.failures}, ${r.error})
                   ON CONFLICT (pubkey) DO UPDATE SET address = excluded.address, verified_at = excluded.verified_at,
                     checked_at = excluded.checked_at, failures = excluded.failures, error = excluded.error`;
  }

  async removeNip05(pubkey: string): Promise<void> {
    await this.sql`DELETE FROM nip05 WHERE pubkey = ${pubkey}`;
  }

  async dueNip05(before: number, max: number): Promise<Nip05Row[]> {
    const rows = await this.sql.unsafe(
      `SELECT ${NIP05} FROM nip05 WHERE checked_at < $1 ORDER BY verified_at IS NULL, checked_at LIMIT $2`,
      [before, max],
    );
    return [...rows] as Nip05Row[];
  }

  async putInvite(i: InviteRow): Promise<void> {
    await this.sql`INSERT INTO invites (code, issuer, created_at, expires_at, used_by, used_at)
                   VALUES (${i.code}, ${i.issuer}, ${i.created_at}, ${i.expires_at}, ${i.used_by}, ${i.used_at})
                   ON CONFLICT (code) DO UPDATE SET expires_at = excluded.expires_at, used_by = excluded.used_by, used_at = excluded.used_at`;
  }

  async takeInvite(code: string, pubkey: string, now: number): Promise<InviteRow | "unknown" | "expired" | "used"> {
    const [taken] = await this.sql.unsafe(
      `UPDATE invites SET used_by = $2, used_at = $3 WHERE code = $1 AND used_by IS NULL AND expires_at > $3 RETURNING ${INVITE}`,
      [code, pubkey, now],
    );
    if (taken) return { ...(taken as InviteRow), used_by: null, used_at: null }; // as it was
    const [row] = await this.sql.unsafe(`SELECT ${INVITE} FROM invites WHERE code = $1`, [code]);
    if (!row) return "unknown";
    return (row as InviteRow).used_by !== null ? "used" : "expired";
  }

  /** The issuer's transaction-scoped advisory lock makes two nodes asking at once take turns: each counts what the other wrote. */
  async issueInvite(row: InviteRow, quota: number | null, now: number): Promise<IssuedInvite> {
    return this.sql.begin(async (tx): Promise<IssuedInvite> => {
      await tx`SELECT pg_advisory_xact_lock(hashtextextended(${`bunstr-invite:${row.issuer}`}, 0))`;
      const [open] = await tx.unsafe(
        `SELECT ${INVITE} FROM invites WHERE issuer = $1 AND used_by IS NULL AND expires_at > $2 ORDER BY created_at, code LIMIT 1`,
        [row.issuer, now],
      );
      if (open) return { row: open as InviteRow, fresh: false };
      if (quota !== null) {
        const [used] = await tx`SELECT count(*)::float8 AS n FROM invites WHERE issuer = ${row.issuer} AND used_by IS NOT NULL`;
        if ((used.n as number) >= quota) return "none-left";
      }
      await tx`INSERT INTO invites (code, issuer, created_at, expires_at, used_by, used_at)
               VALUES (${row.code}, ${row.issuer}, ${row.created_at}, ${row.expires_at}, ${row.used_by}, ${row.used_at})`;
      return { row, fresh: true };
    });
  }

  async invitesBy(issuer: string): Promise<InviteRow[]> {
    const rows = await this.sql.unsafe(`SELECT ${INVITE} FROM invites WHERE issuer = $1 ORDER BY created_at, code`, [issuer]);
    return [...rows] as InviteRow[];
  }
}

/**
 * An admission row upserted (its `since` kept) and its pubkey logged in admission_changes in the
 * same statement: the other nodes read that pubkey's rows again (issue 33 review, M7).
 */
async function putRow(sql: SQL, r: AdmissionRow): Promise<void> {
  await sql`WITH put AS (INSERT INTO admissions (pubkey, basis, since, until, evidence)
                         VALUES (${r.pubkey}, ${r.basis}, ${r.since}, ${r.until}, ${r.evidence})
                         ON CONFLICT (pubkey, basis) DO UPDATE SET until = excluded.until, evidence = excluded.evidence)
            INSERT INTO admission_changes (pubkey, at) VALUES (${r.pubkey}, ${Math.floor(Date.now() / 1000)})`;
}

const addBalance = (sql: SQL, pubkey: string, sats: number) =>
  sql`INSERT INTO balances (pubkey, sats) VALUES (${pubkey}, ${sats})
      ON CONFLICT (pubkey) DO UPDATE SET sats = balances.sats + excluded.sats`;
