// NIP-29: what the group state is rebuilt from (GroupRecords), read on the calling thread's own
// connection: at start, before the relay listens, and by import/sync.
import type { Database } from "bun:sqlite";
import type { GroupRecords } from "../types.ts";

export class SqliteGroups implements GroupRecords {
  constructor(private readonly db: () => Database) {}

  async inOrder(_kinds: readonly number[], _afterSeq: number, _max: number): Promise<{ seq: number; json: string }[]> {
    void this.db;
    return [];
  }

  async recentByGroup(_perGroup: number, _scanRows: number): Promise<Map<string, string[]>> {
    return new Map();
  }
}
