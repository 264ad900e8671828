// bunstr's NIP-86 group methods: the operator's view of the NIP-29 groups (read from the group
// state) and its moderation, which the relay publishes as its own 9001/9008/9009 (signed with the
// relay key, through the same commit path as a moderator's event: the change is in the group's
// history, replayed by a rebuild, carried by an export).
import { AdminError } from "../admin/state.ts";
import type { Config } from "../config/schema.ts";
import type { GroupState } from "../groups/state.ts";
import type { GroupCall } from "../nips/nip86.ts";
import { nowSeconds } from "../protocol/event.ts";
import { refusalText } from "../protocol/reasons.ts";
import type { WriteOutcome } from "../store/types.ts";

/** A moderation event for the relay to sign and publish (relay/groups.ts GroupRelay.act). */
export interface GroupTemplate {
  kind: number;
  content: string;
  tags: string[][];
}

/** What the group methods reach (RelayContext has it while [groups] enabled). */
export interface GroupAdminSource {
  readonly config: Config;
  readonly groups?: Pick<GroupState, "list" | "members" | "invites" | "judge">;
  readonly relayKey: { readonly pubkey: string };
  readonly groupRelay?: { act(t: GroupTemplate): Promise<WriteOutcome> };
}

const BASE32 = "abcdefghijklmnopqrstuvwxyz234567";

/** 16 base32 characters (80 bits): an invite code nobody guesses. */
export function randomCode(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => BASE32[b & 31]).join("");
}

/** Runs one group call; the NIP-86 result. Throws AdminError for a call that cannot be done. */
export async function groupCall(ctx: GroupAdminSource, call: GroupCall): Promise<unknown> {
  const { groups } = ctx;
  if (!ctx.config.groups.enabled || !groups) throw new AdminError("groups are not enabled on this relay ([groups] enabled)");
  if (call.method === "listgroups") return groups.list();
  const known = groups.members(call.group);
  if (!known) throw new AdminError(`no group "${call.group}" on this relay`);
  const h = ["h", call.group];
  const publish = async (t: GroupTemplate): Promise<true> => {
    if (!ctx.groupRelay) throw new AdminError("this relay cannot publish group events");
    // The write rule a moderator's event meets (an existing invite code, the limits): the relay's
    // own event goes to the writer without admission, where the state would skip it unsaid.
    const draft = { ...t, id: "", sig: "", pubkey: ctx.relayKey.pubkey, created_at: nowSeconds() };
    const refusal = groups.judge({ config: ctx.config, now: draft.created_at, authed: new Set([draft.pubkey]) }, draft);
    if (refusal) throw new AdminError(refusalText(refusal));
    return published(await ctx.groupRelay.act(t));
  };
  switch (call.method) {
    case "listgroupmembers":
      return known;
    case "listgroupinvites":
      return groups.invites(call.group) ?? [];
    case "removegroupmember":
      return publish({ kind: 9001, content: call.reason, tags: [h, ["p", call.pubkey]] });
    case "deletegroup":
      return publish({ kind: 9008, content: call.reason, tags: [h] });
    case "creategroupinvite": {
      const code = call.code || randomCode();
      await publish({ kind: 9009, content: "", tags: [h, ["code", code]] });
      return { code };
    }
  }
}

/** true once the relay's event is committed (or already was); its refusal as the call's error. */
function published(o: WriteOutcome): true {
  if (o.stored || o.duplicate) return true;
  throw new AdminError(refusalText(o.refusal));
}
