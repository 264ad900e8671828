// NIP-29: what the group state is rebuilt from (GroupRecords), and the relay key's row, which
// every node of one database shares (and pg_dump carries).
import type { SQL } from "bun";
import { newestPerGroup } from "../semantics.ts";
import type { GroupGate } from "../../nips/nip29.ts";
import type { GroupRecords } from "../types.ts";

export class PostgresGroups implements GroupRecords {
  constructor(private readonly sql: SQL) {}

  /**
   * Forward along the primary key (seq): commit order, which every node sees alike. Ordered by
   * the column (`e.seq`), not the float8 output of the same name, or every later match is sorted
   * again for each page.
   */
  async inOrder(kinds: readonly number[], afterSeq: number, max: number): Promise<{ seq: number; json: string }[]> {
    const rows = await this.sql.unsafe(
      `SELECT e.seq::float8 AS seq, e.json FROM events e
       WHERE e.seq > $1 AND e.kind = ANY(ARRAY(SELECT x::int FROM jsonb_array_elements_text($2::text::jsonb) x))
       ORDER BY e.seq LIMIT $3`,
      [afterSeq, JSON.stringify(kinds), max],
    );
    return (rows as { seq: number; json: string }[]).map((r) => ({ seq: r.seq, json: r.json }));
  }

  async recentByGroup(perGroup: number, scanRows: number): Promise<Map<string, string[]>> {
    const rows = (await this.sql.unsafe(
      `SELECT t.value AS g, encode(e.id, 'hex') AS id
       FROM (SELECT value, created_at, seq FROM tags WHERE name = 'h' ORDER BY created_at DESC, seq DESC LIMIT $1) t
       JOIN events e ON e.seq = t.seq
       ORDER BY t.created_at DESC, t.seq DESC`,
      [scanRows],
    )) as { g: string; id: string }[];
    return newestPerGroup(rows, perGroup);
  }

  async gates(): Promise<GroupGate[]> {
    const rows = (await this.sql`SELECT value, events, metadata FROM group_gates WHERE events OR metadata`) as {
      value: string;
      events: boolean;
      metadata: boolean;
    }[];
    return rows.map((r) => ({ group: r.value, events: r.events, metadata: r.metadata }));
  }

  /** The first node to ask stores its key; every node gets the stored one. */
  async claimRelayKey(secretHex: string): Promise<string> {
    await this.sql`INSERT INTO relay_key (id, secret) VALUES (1, ${secretHex}) ON CONFLICT DO NOTHING`;
    const [row] = await this.sql`SELECT secret FROM relay_key WHERE id = 1`;
    return (row as { secret: string }).secret;
  }
}
