// NIP-29: what the group state is rebuilt from (GroupRecords), and the relay key's row, which
// every node of one database shares.
import type { SQL } from "bun";
import type { GroupRecords } from "../types.ts";

export class PostgresGroups implements GroupRecords {
  constructor(private readonly sql: SQL) {}

  async inOrder(_kinds: readonly number[], _afterSeq: number, _max: number): Promise<{ seq: number; json: string }[]> {
    return [];
  }

  async recentByGroup(_perGroup: number, _scanRows: number): Promise<Map<string, string[]>> {
    return new Map();
  }

  async claimRelayKey(secretHex: string): Promise<string> {
    void this.sql;
    return secretHex;
  }
}
