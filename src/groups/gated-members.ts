// Per pubkey, the gated groups (private or hidden) it is a member of: what a reader sends the
// store with each read (policy/visibility.ts visibilityFor), found in what that reader's own
// memberships cost, whatever the number of gated groups (100,000 private groups of sybil keys
// cost an anonymous reader nothing and a member the few it joined). Nothing is kept per reader,
// so fresh AUTH keys grow nothing, and a change to one group touches only its members' entries.
export class GatedMembers {
  private readonly byPubkey = new Map<string, Set<string>>();

  add(pubkey: string, group: string): void {
    let groups = this.byPubkey.get(pubkey);
    if (!groups) this.byPubkey.set(pubkey, (groups = new Set()));
    groups.add(group);
  }

  delete(pubkey: string, group: string): void {
    const groups = this.byPubkey.get(pubkey);
    if (!groups?.delete(group)) return;
    if (groups.size === 0) this.byPubkey.delete(pubkey);
  }

  /** The gated groups any of `authed` is a member of (each once). */
  of(authed: ReadonlySet<string>): string[] {
    if (authed.size === 1) {
      const groups = this.byPubkey.get(authed.values().next().value!);
      return groups ? [...groups] : [];
    }
    const out = new Set<string>();
    for (const pk of authed) for (const g of this.byPubkey.get(pk) ?? []) out.add(g);
    return [...out];
  }
}
