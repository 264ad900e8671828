// What the policies and the read rule see of the NIP-29 group state (groups/state.ts): types
// only, so policy/ depends on no implementation, and rules.ts and this file import nothing of
// each other's (a circle, even type-only, is refused by test/architecture.test.ts).
import type { Config } from "../config/schema.ts";
import type { NostrEvent } from "../protocol/event.ts";
import type { Refusal } from "../protocol/reasons.ts";

/** May a reader see a group's events: "auth-required" for an anonymous reader, "restricted" for one who is not a member. */
export type ReadAccess = "ok" | "auth-required" | "restricted";

export interface GroupView {
  /** False until the rebuild finished: group writes are refused "error: groups are loading, try again", group events unreadable. */
  readonly ready: boolean;
  /** Some group is private, hidden or deleted (else the read rule adds nothing to a query). */
  readonly gating: boolean;
  /** The write rule for one event (sync; Maps only). undefined = no opinion (not a group event) or allowed. */
  judge(ctx: GroupJudgeContext, e: NostrEvent): Refusal | undefined;
  /** The archive rule (import/sync/stream/mirror): shape, 39xxx by others, deleted groups/ids; no auth, no window, no previous; `posts` (the mirror): a post's membership, removal, kind and group checks too. */
  judgeArchive(e: NostrEvent, posts?: boolean): Refusal | undefined;
  /** Reading events of group `id` (metadata: the relay's 39000-39009 of it), for these authenticated pubkeys. */
  access(id: string, authed: ReadonlySet<string>, metadata: boolean): ReadAccess;
  /**
   * The gated groups (private or hidden) one of `authed` is a member of: what a stored read lets
   * through of the store's gates (Visibility.groups). Read from an index by pubkey, so it costs
   * what the reader's own memberships cost, whatever the number of gated groups; nothing is kept
   * per reader.
   */
  memberships(authed: ReadonlySet<string>): readonly string[];
}

/** What judge reads of the policy context (PolicyContext satisfies it). */
export interface GroupJudgeContext {
  config: Config;
  now: number;
  authed: ReadonlySet<string>;
}
