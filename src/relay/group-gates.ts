// NIP-29: the store's group_gates (which groups a read hides from non-members, nips/nip29.ts
// GroupGate) kept equal to the group state. The writer raises a gate itself, in the transaction of
// the 9002 or 9008 that may gate (raisedGate), before the state has judged that event: so no
// event committed after a group turned private is read by a non-member in between. What only the
// state knows (the event was skipped at its commit, or it opened the group) is written after it
// applied the event: only when the writer's raise left the row other than the state says, and
// only over a row no later commit set (GateAsOf). At start, after the rebuild and before the
// first read, the table is reconciled with the state (a start after schema 14 / migration 7, an
// import into a stopped relay, a correction a crash lost): it cannot drift for longer.
import { log } from "../log.ts";
import type { GroupChange, GroupState } from "../groups/state.ts";
import { hTags, raisedGate, type GroupGate } from "../nips/nip29.ts";
import type { NostrEvent } from "../protocol/event.ts";
import type { Store } from "../store/types.ts";

/** Rows per setGroupGates call at start (100,000 gated groups: 20 calls). */
const RECONCILE_ROWS = 5000;

export class GroupGates {
  /** Corrections not yet committed (written() waits for them). */
  private readonly writing = new Set<Promise<void>>();

  constructor(
    private readonly state: GroupState,
    private readonly store: Store,
  ) {}

  /** Applies a committed event to the state (GroupState.applyCommitted), then corrects its group's gate if the writer's raise left it other. */
  apply(e: NostrEvent): GroupChange | undefined {
    if ((e.kind !== 9002 && e.kind !== 9008) || !this.state.ready) return this.state.applyCommitted(e);
    const h = hTags(e);
    const before = h.length === 1 ? this.state.gateOf(h[0]!) : undefined;
    const change = this.state.applyCommitted(e);
    if (!before) return change;
    const raised = raisedGate(e);
    const row = { events: before.events || raised?.events === true, metadata: before.metadata || raised?.metadata === true };
    const after = this.state.gateOf(before.group);
    if (row.events !== after.events || row.metadata !== after.metadata) this.write([after], { id: e.id });
    return change;
  }

  /** At start, after the rebuild: every row that differs from the state is written as the state says. */
  async reconcile(): Promise<number> {
    const stored = (await this.store.groups.gates?.()) ?? [];
    // From here to the writes' enqueueing nothing awaits: the state and the seq are of one moment.
    const asOf = this.store.lastSeq();
    const want = new Map(this.state.gates().map((g) => [g.group, g]));
    const differ: GroupGate[] = [];
    for (const row of stored) {
      const now = want.get(row.group) ?? this.state.gateOf(row.group);
      want.delete(row.group);
      if (now.events !== row.events || now.metadata !== row.metadata) differ.push(now);
    }
    differ.push(...want.values());
    const writes: Promise<void>[] = [];
    for (let i = 0; i < differ.length; i += RECONCILE_ROWS)
      writes.push(this.store.admin.setGroupGates(differ.slice(i, i + RECONCILE_ROWS), { seq: asOf }));
    await Promise.all(writes);
    return differ.length;
  }

  /** The corrections sent so far are committed (tests). */
  async written(): Promise<void> {
    await Promise.all(this.writing);
  }

  private write(gates: GroupGate[], asOf: { id: string }): void {
    // A lost write leaves a gate up (a group's events hidden from non-members, never shown): the next start mends it.
    const w = this.store.admin
      .setGroupGates(gates, asOf)
      .catch((err) => log.error("groups: correcting a group's read gate failed:", err))
      .finally(() => this.writing.delete(w));
    this.writing.add(w);
  }
}
