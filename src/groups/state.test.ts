import { describe, expect, test } from "bun:test";
import { finalizeEvent, generateSecretKey, getPublicKey } from "nostr-tools/pure";
import { defaults, type Config } from "../config/schema.ts";
import type { NostrEvent } from "../protocol/event.ts";
import { refusalText } from "../protocol/reasons.ts";
import type { GroupRecords } from "../store/types.ts";
import { GroupState, MAX_DELETED_IDS } from "./state.ts";

const NOW = 1_800_000_000;
const key = () => {
  const sk = generateSecretKey();
  return { sk, pk: getPublicKey(sk) };
};
const relay = key();
const owner = key();
const mod = key();
const member = key();
const outsider = key();
let tick = 0;
/** A signed event, each one different (its content counts). */
const sign = (who: { sk: Uint8Array }, kind: number, tags: string[][], created_at = NOW - 100 + (tick % 50)): NostrEvent =>
  finalizeEvent({ kind, tags, content: `${tick++}`, created_at }, who.sk) as NostrEvent;

function configWith(patch: Partial<Config["groups"]> = {}): Config {
  const c = defaults();
  c.groups = { ...c.groups, enabled: true, creators: ["anyone"], ...patch };
  return c;
}

/** GroupRecords over a list of committed events (their index is their seq). */
function recordsOf(events: readonly NostrEvent[]): GroupRecords & { reads: number } {
  const r = {
    reads: 0,
    async inOrder(kinds: readonly number[], afterSeq: number, max: number) {
      r.reads++;
      return events
        .map((e, i) => ({ seq: i + 1, e }))
        .filter(({ seq, e }) => seq > afterSeq && kinds.includes(e.kind))
        .slice(0, max)
        .map(({ seq, e }) => ({ seq, json: JSON.stringify(e) }));
    },
    async recentByGroup(perGroup: number) {
      r.reads++;
      const out = new Map<string, string[]>();
      for (const e of [...events].reverse()) {
        const h = e.tags.find((t) => t[0] === "h")?.[1];
        if (h === undefined) continue;
        const ids = out.get(h) ?? [];
        if (ids.length < perGroup) ids.push(e.id);
        out.set(h, ids);
      }
      return out;
    },
  };
  return r;
}

/** An event of group "g": ["h", "g"] first. */
const inG = (who: { sk: Uint8Array }, kind: number, ...tags: string[][]): NostrEvent => sign(who, kind, [["h", "g"], ...tags]);

/** A ready state, the events it applied (for a replay), and judge-then-apply as the relay does. */
async function fixture(patch: Partial<Config["groups"]> = {}) {
  const config = configWith(patch);
  const state = new GroupState({ config: () => config, relayPubkey: relay.pk });
  await state.rebuild(recordsOf([]));
  const log: NostrEvent[] = [];
  const ctx = (authed: string[] = []) => ({ config, now: NOW, authed: new Set(authed) });
  /** judge as the author (AUTHed), and apply when it passes: the refusal text, or "ok". */
  const send = (e: NostrEvent, authed = [e.pubkey]) => {
    const r = state.judge(ctx(authed), e);
    if (r) return refusalText(r);
    log.push(e);
    state.applyCommitted(e);
    return "ok";
  };
  const commit = (e: NostrEvent) => {
    log.push(e);
    return state.applyCommitted(e);
  };
  return { config, state, log, ctx, send, commit };
}

describe("GroupState: create, roles, rights", () => {
  test("9007 needs AUTH as its author, the creators rule and the limits; the creator is admin", async () => {
    const { state, send, config } = await fixture({ max_groups_per_pubkey: 2 });
    expect(send(sign(owner, 9007, [["h", "g1"]]), [])).toBe("auth-required: authenticate to create a group");
    expect(send(sign(owner, 9007, [["h", "g1"]]))).toBe("ok");
    expect(send(sign(owner, 9007, [["h", "g1"]]))).toBe('duplicate: group "g1" already exists');
    expect(send(sign(owner, 9007, [["h", "g2"]]))).toBe("ok");
    expect(send(sign(owner, 9007, [["h", "g3"]]))).toBe("blocked: you have created the most groups allowed (2)");
    expect(state.members("g1")).toEqual([{ pubkey: owner.pk, roles: ["admin"] }]);
    config.groups.creators = ["admins"];
    expect(send(sign(mod, 9007, [["h", "g4"]]))).toBe("restricted: you may not create groups on this relay");
    config.admin.pubkeys = [mod.pk];
    expect(send(sign(mod, 9007, [["h", "g4"]]))).toBe("ok");
    config.groups.creators = [outsider.pk];
    expect(send(sign(outsider, 9007, [["h", "g5"]]))).toBe("ok");
    config.groups.max_groups = 4;
    expect(send(sign(outsider, 9007, [["h", "g6"]]))).toBe("blocked: this relay hosts the most groups it allows (4)");
    expect(state.list().map((g) => g.id)).toEqual(["g1", "g2", "g4", "g5"]);
  });

  test("apply enforces the limits again: creates admitted at once leave max_groups_per_pubkey groups", async () => {
    const { state, ctx, commit } = await fixture({ max_groups_per_pubkey: 2 });
    const creates = Array.from({ length: 20 }, (_, i) => sign(owner, 9007, [["h", `c${i}`]]));
    expect(creates.every((e) => state.judge(ctx([owner.pk]), e) === undefined)).toBe(true); // judged before any commit
    for (const e of creates) commit(e);
    expect(state.list().length).toBe(2);
    expect(state.skippedBecause(creates[0]!.id)).toBeUndefined();
    expect(refusalText(state.skippedBecause(creates[2]!.id)!)).toBe("blocked: you have created the most groups allowed (2)");
    const joins = Array.from({ length: 5 }, () => sign(member, 9021, [["h", "c0"]]));
    for (const e of joins) commit(e);
    expect(joins.map((e) => state.skippedBecause(e.id) && refusalText(state.skippedBecause(e.id)!))).toEqual([
      undefined,
      ...Array(4).fill("duplicate: already a member"),
    ]);
  });

  test("the rights table: moderators add and remove members, not role holders nor roles; admins all; the last admin stays", async () => {
    const { state, send } = await fixture();
    send(inG(owner, 9007));
    expect(send(inG(member, 9000, ["p", outsider.pk]))).toBe("restricted: only the group's admins and moderators can do this");
    expect(send(inG(owner, 9000, ["p", mod.pk, "moderator"]))).toBe("ok");
    expect(send(inG(mod, 9000, ["p", member.pk]))).toBe("ok");
    expect(send(inG(mod, 9000, ["p", outsider.pk, "moderator"]))).toBe("restricted: a moderator cannot change roles");
    expect(send(inG(mod, 9001, ["p", owner.pk]))).toBe("restricted: a moderator cannot act on an admin");
    expect(send(inG(mod, 9002, ["name", "x"]))).toBe("restricted: your role in this group cannot do this (kind 9002)");
    expect(send(inG(mod, 9008))).toBe("restricted: your role in this group cannot do this (kind 9008)");
    expect(send(inG(mod, 9009, ["code", "c1"]))).toBe("ok");
    expect(send(inG(mod, 9001, ["p", member.pk]))).toBe("ok");
    expect(send(inG(owner, 9001, ["p", owner.pk]))).toBe("restricted: the group's last admin cannot be removed");
    expect(send(inG(owner, 9000, ["p", owner.pk, "moderator"]))).toBe("restricted: the group's last admin cannot be removed");
    expect(send(inG(owner, 9001, ["p", mod.pk]))).toBe("ok");
    expect(state.members("g")).toEqual([{ pubkey: owner.pk, roles: ["admin"] }]);
    expect(state.render("g", 39001)).toEqual([
      ["d", "g"],
      ["p", owner.pk, "admin"],
    ]);
  });

  test("the last admin may not leave (9022) either; another admin may", async () => {
    const { state, send, commit } = await fixture();
    send(inG(owner, 9007));
    const leave = inG(owner, 9022);
    expect(send(leave)).toBe("restricted: the group's last admin cannot leave: make another member admin (kind 9000) first");
    expect(commit(leave)).toBeUndefined(); // apply holds the same rule
    expect(state.members("g")).toEqual([{ pubkey: owner.pk, roles: ["admin"] }]);
    expect(send(inG(owner, 9000, ["p", mod.pk, "admin"]))).toBe("ok");
    expect(send(inG(owner, 9022))).toBe("ok");
    expect(send(inG(outsider, 9022))).toBe("invalid: not a member of this group");
    expect(state.members("g")).toEqual([{ pubkey: mod.pk, roles: ["admin"] }]);
  });

  test("bounded state: removals capped by max_members_per_group, 9005 ids per group, deleted groups count against the limits", async () => {
    const { state, send } = await fixture({ max_members_per_group: 150, max_groups_per_pubkey: 3, max_groups: 6 });
    send(inG(owner, 9007));
    const hex = () => Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("hex"); // any 64-hex pubkey or id
    const random = (n: number) => Array.from({ length: n }, () => ["p", hex()]);
    expect(send(inG(owner, 9001, ...random(100)))).toBe("ok");
    expect(send(inG(owner, 9001, ...random(100)))).toBe(
      "blocked: this group's list of removed users is full (150): put some back (kind 9000) first",
    );
    // A member's removal is refused too past it (never an old removal forgotten: the removed stay out).
    expect(send(inG(owner, 9000, ["p", member.pk]))).toBe("ok");
    expect(send(inG(owner, 9001, ["p", member.pk], ...random(50)))).toMatch(/^blocked: this group's list of removed users is full/);
    expect(send(inG(owner, 9001, ["p", member.pk], ...random(49)))).toBe("ok");
    expect(send(inG(member, 9021))).toBe("blocked: you were removed from this group");

    const first = hex();
    expect(send(inG(owner, 9005, ["e", first]))).toBe("ok");
    for (let n = 0; n < MAX_DELETED_IDS; n += 100) send(inG(owner, 9005, ...Array.from({ length: 100 }, () => ["e", hex()])));
    const kept = state.deletedByModerators()[0]!.ids;
    expect(kept.length).toBe(MAX_DELETED_IDS);
    expect(kept).not.toContain(first);

    // A create-then-delete loop: each deleted group counts against its deleter's and the relay's limits.
    expect(send(sign(outsider, 9007, [["h", "x1"]]))).toBe("ok");
    expect(send(sign(outsider, 9008, [["h", "x1"]]))).toBe("ok");
    expect(send(sign(outsider, 9007, [["h", "x2"]]))).toBe("ok");
    expect(send(sign(outsider, 9008, [["h", "x2"]]))).toBe("ok");
    expect(send(sign(outsider, 9007, [["h", "x3"]]))).toBe("ok");
    expect(send(sign(outsider, 9007, [["h", "x4"]]))).toBe("blocked: you have created the most groups allowed (3)");
    expect(state.stats()).toMatchObject({ groups: 2, deleted: 2 });
    expect(send(sign(member, 9007, [["h", "y1"]]))).toBe("ok");
    expect(send(sign(mod, 9007, [["h", "y2"]]))).toBe("ok");
    expect(send(sign(mod, 9007, [["h", "y3"]]))).toBe("blocked: this relay hosts the most groups it allows (6)");
  });

  test("apply skips what the author may not do at its commit (a stale admission elsewhere changes nothing)", async () => {
    const { state, commit } = await fixture();
    commit(inG(owner, 9007));
    expect(commit(inG(member, 9000, ["p", member.pk, "admin"]))).toBeUndefined();
    expect(commit(inG(owner, 9000, ["p", member.pk]))).toEqual({ group: "g", regenerate: [39002], followUps: [] });
    expect(commit(inG(owner, 9000, ["p", member.pk, "moderator"]))?.regenerate).toEqual([39001, 39002]);
    expect(state.members("g")!.find((m) => m.pubkey === member.pk)!.roles).toEqual(["moderator"]);
  });

  test("the relay key and former relay keys may do anything; 9008 tombstones", async () => {
    const former = key();
    const { state, send, commit } = await fixture({ former_relay_keys: [former.pk] });
    send(inG(owner, 9007));
    expect(commit(inG(former, 9000, ["p", member.pk, "admin"]))?.regenerate).toEqual([39001, 39002]);
    expect(commit(inG(relay, 9008))).toEqual({ group: "g", regenerate: [], followUps: [], deleteGroup: true });
    expect(state.list()).toEqual([]);
    expect(state.render("g", 39000)).toBeUndefined();
    expect(send(inG(member, 9))).toBe('blocked: group "g" was deleted');
    expect(send(inG(owner, 9007))).toBe('blocked: group "g" was deleted');
    expect(state.judgeArchive(inG(member, 9))).toMatchObject({ prefix: "blocked" });
  });
  test("[mirror]: a 9008 of a group this relay does not have is refused (stored, a rebuild would tombstone the id and drop the group created after it)", async () => {
    const { config, state, send } = await fixture();
    const stray = inG(outsider, 9008);
    expect(refusalText(state.judgeArchive(stray, true)!)).toBe('invalid: no group "g" on this relay');
    // Why: what the rebuild makes of such a 9008 stored before the group's 9007.
    const create = inG(owner, 9007);
    expect(send(create)).toBe("ok");
    const again = new GroupState({ config: () => config, relayPubkey: relay.pk });
    await again.rebuild(recordsOf([stray, create]));
    expect(again.list()).toEqual([]);
    expect(state.list().map((g) => g.id)).toEqual(["g"]);
    // A group it has: a non-admin's 9008 is skipped at its commit and at a rebuild alike, so it passes.
    expect(state.judgeArchive(inG(outsider, 9008), true)).toBeUndefined();
  });
  test("subgroups: the parent must exist, be no descendant, and the author must be its admin; the same parent again keeps its attestation", async () => {
    const { state, send, commit } = await fixture({ max_groups_per_pubkey: 5 });
    const edit = (who: { sk: Uint8Array }, id: string, ...tags: string[][]) => send(sign(who, 9002, [["h", id], ...tags]));
    for (const id of ["tech", "nostr", "nip29"]) send(sign(owner, 9007, [["h", id]]));
    send(sign(mod, 9007, [["h", "music"]]));
    expect(edit(owner, "nostr", ["parent", "nostr"])).toBe("invalid: a group cannot be its own parent");
    expect(edit(owner, "nostr", ["parent", "nope"])).toBe('invalid: no group "nope" to be the parent');
    expect(edit(owner, "nostr", ["parent", "music"])).toBe('restricted: only an admin of group "music" can put a group under it');
    expect(edit(owner, "nostr", ["parent", "tech"])).toBe("ok");
    expect(edit(owner, "nip29", ["parent", "nostr"])).toBe("ok");
    expect(edit(owner, "tech", ["parent", "nip29"])).toBe('invalid: group "nip29" is inside this group: that parent would make a cycle');
    expect(state.render("nip29", 39000)).toEqual([
      ["d", "nip29"],
      ["parent", "nostr", owner.pk],
    ]);
    // Another admin of nostr, not of tech, edits it the nostr-tools way (the parent sent again): allowed, attestation kept.
    send(
      sign(owner, 9000, [
        ["h", "nostr"],
        ["p", mod.pk, "admin"],
      ]),
    );
    expect(edit(mod, "nostr", ["name", "Nostr"], ["parent", "tech"], ["private"])).toBe("ok");
    expect(state.render("nostr", 39000)).toEqual([["d", "nostr"], ["name", "Nostr"], ["private"], ["parent", "tech", owner.pk]]);
    // apply checks again: a cycle admitted on a stale view is skipped at its commit.
    expect(
      commit(
        sign(owner, 9002, [
          ["h", "tech"],
          ["parent", "nostr"],
        ]),
      ),
    ).toBeUndefined();
    expect(state.render("tech", 39000)).toEqual([["d", "tech"]]);
  });
});

describe("GroupState: joins, leaves, posts", () => {
  test("open and closed joins, codes, duplicates, removal, full; the relay's answers", async () => {
    const { state, send, commit } = await fixture({ max_members_per_group: 3 });
    send(inG(owner, 9007));
    const join = inG(member, 9021);
    expect(state.judge({ config: configWith(), now: NOW, authed: new Set() }, join)).toBeUndefined(); // no AUTH needed
    expect(commit(join)).toEqual({
      group: "g",
      regenerate: [39002],
      followUps: [
        {
          kind: 9000,
          content: "",
          tags: [
            ["h", "g"],
            ["p", member.pk],
            ["e", join.id],
          ],
        },
      ],
    });
    expect(commit(inG(relay, 9000, ["p", member.pk], ["e", join.id]))?.regenerate).toEqual([]); // the answer changes nothing
    expect(send(inG(member, 9021))).toBe("duplicate: already a member");
    const leave = inG(member, 9022);
    expect(commit(leave)?.followUps).toEqual([
      {
        kind: 9001,
        content: "",
        tags: [
          ["h", "g"],
          ["p", member.pk],
          ["e", leave.id],
        ],
      },
    ]);
    expect(commit(inG(relay, 9001, ["p", member.pk], ["e", leave.id]))?.regenerate).toEqual([]);
    expect(send(inG(member, 9022))).toBe("invalid: not a member of this group");
    expect(send(inG(member, 9021))).toBe("ok"); // who left may come back
    expect(send(inG(owner, 9001, ["p", member.pk]))).toBe("ok");
    expect(send(inG(member, 9021))).toBe("blocked: you were removed from this group");
    expect(send(inG(member, 9))).toBe("blocked: you were removed from this group");
    expect(send(inG(owner, 9000, ["p", member.pk]))).toBe("ok");
    expect(send(inG(member, 9))).toBe("ok");
    send(inG(owner, 9002, ["closed"]));
    expect(send(inG(outsider, 9021))).toBe("restricted: this group is closed: joining needs an invite code");
    expect(send(inG(outsider, 9021, ["code", "nope"]))).toBe("restricted: unknown invite code");
    send(inG(owner, 9009, ["code", "k"]));
    expect(send(inG(owner, 9009, ["code", "k"]))).toBe("duplicate: invite code exists");
    send(inG(owner, 9009, ["code", "k2"]));
    expect(send(inG(outsider, 9021, ["code", "k"]))).toBe("ok");
    // A code admits one join: the 9021 that used it is readable by whoever reads the group.
    expect(send(inG(mod, 9021, ["code", "k"]))).toBe("restricted: unknown invite code");
    expect(send(inG(mod, 9021, ["code", "k2"]))).toBe("blocked: group is full (3 members)");
    expect(send(inG(owner, 9000, ["p", mod.pk]))).toBe("blocked: group is full (3 members)");
    expect(state.invites("g")).toEqual(["k2"]);
  });

  test("the relay's answer arriving after a moderator acted does not undo it", async () => {
    const { state, commit } = await fixture();
    commit(inG(owner, 9007));
    const join = inG(member, 9021);
    commit(join);
    commit(inG(owner, 9001, ["p", member.pk])); // removed before the relay's 9000 commits
    expect(commit(inG(relay, 9000, ["p", member.pk], ["e", join.id]))?.regenerate).toEqual([]);
    expect(state.members("g")!.map((m) => m.pubkey)).toEqual([owner.pk]);
    expect(state.judge({ config: configWith(), now: NOW, authed: new Set() }, inG(member, 9))).toMatchObject({ prefix: "blocked" });
    const leave = inG(mod, 9022);
    commit(inG(mod, 9021));
    commit(leave);
    commit(inG(mod, 9021)); // back before the relay's 9001 commits
    commit(inG(relay, 9001, ["p", mod.pk], ["e", leave.id]));
    expect(state.members("g")!.map((m) => m.pubkey)).toEqual([owner.pk, mod.pk]);
    // Without the e tag the relay's 9000/9001 are moderation like any other (the console's).
    commit(inG(relay, 9001, ["p", mod.pk]));
    expect(state.judge({ config: configWith(), now: NOW, authed: new Set() }, inG(mod, 9021))).toMatchObject({ prefix: "blocked" });
  });

  test("posts: restricted, supported_kinds, default_kinds, deleted ids; kind 5 always passes", async () => {
    const { send, commit } = await fixture({ default_kinds: [9, 11] });
    send(inG(owner, 9007));
    expect(send(inG(outsider, 1))).toBe("blocked: kind 1 is not accepted in this group");
    const x = inG(outsider, 9);
    expect(send(x)).toBe("ok");
    send(inG(owner, 9002, ["restricted"], ["supported_kinds", "1"]));
    expect(send(inG(outsider, 1))).toBe("restricted: only members can write in this group");
    expect(send(inG(owner, 9))).toBe("blocked: kind 9 is not accepted in this group");
    expect(send(inG(owner, 1))).toBe("ok");
    expect(commit(inG(owner, 9005, ["e", x.id]))?.deleteIds).toEqual([x.id]);
    send(inG(owner, 9002, ["supported_kinds", "9"])); // restricted off again
    expect(send(x)).toBe("blocked: this event was deleted by the group's moderators");
    expect(send(inG(outsider, 5, ["e", x.id]))).toBe("ok");
  });

  test("the judge order's shape refusals, loading, late publication", async () => {
    const { state, send, config } = await fixture();
    send(inG(owner, 9007));
    expect(send(sign(owner, 9000, [["p", member.pk]]))).toBe("invalid: group moderation events need an h tag");
    expect(send(inG(owner, 9, ["h", "g2"]))).toBe("invalid: an event belongs to one group (one h tag)");
    expect(send(sign(owner, 9, [["h", "no way"]]))).toBe("invalid: group id must be 1-64 characters of a-z, A-Z, 0-9, - and _");
    expect(send(sign(owner, 39000, [["d", "g"]]))).toBe("blocked: only the relay signs group metadata (kinds 39000-39009)");
    expect(send(sign(owner, 39002, [["d", "g"]]))).toBe("blocked: only the relay signs group metadata (kinds 39000-39009)");
    expect(send(sign(owner, 9, [["h", "nope"]]))).toBe('invalid: no group "nope" on this relay');
    expect(
      send(
        sign(owner, 9000, [
          ["h", "nope"],
          ["p", member.pk],
        ]),
      ),
    ).toBe('invalid: no group "nope" on this relay');
    expect(send(inG(owner, 9000, ["p", "x"]))).toBe("invalid: 9000 needs a p tag with a 64-hex pubkey");
    expect(send(inG(owner, 9000, ["p", member.pk, "king"]))).toBe('invalid: unknown role "king" (roles: admin, moderator)');
    expect(send(sign(owner, 9, [["h", "g"]], NOW - 7200))).toBe(
      "invalid: event is older than this group accepts (late publication, 3600 s)",
    );
    expect(
      send(
        sign(
          owner,
          9001,
          [
            ["h", "g"],
            ["p", member.pk],
          ],
          NOW - 3601,
        ),
      ),
    ).toMatch(/^invalid: event is older/);
    config.groups.late_publication_seconds = 0;
    expect(send(sign(owner, 9, [["h", "g"]], NOW - 7200))).toBe("ok");
    expect(send(sign(owner, 1, []))).toBe("ok"); // not a group event
    const loading = new GroupState({ config: () => config, relayPubkey: relay.pk });
    expect(refusalText(loading.judge({ config, now: NOW, authed: new Set() }, inG(owner, 9))!)).toBe(
      "error: groups are loading, try again",
    );
    expect(loading.judge({ config, now: NOW, authed: new Set() }, sign(owner, 1, []))).toBeUndefined();
    expect(state.ready).toBe(true);
  });

  test("previous: a recent prefix passes, a random one or a malformed one is refused; cold after a rebuild without the group's events", async () => {
    const { state, send, config, log } = await fixture();
    send(inG(owner, 9007));
    const x = inG(owner, 9);
    send(x);
    expect(send(inG(owner, 9, ["previous", x.id.slice(0, 8)]))).toBe("ok");
    expect(send(inG(owner, 9, ["previous", x.id]))).toBe("ok");
    expect(send(inG(owner, 9, ["previous", "00000000"]))).toBe(
      'invalid: previous reference "00000000" names no recent event of this group',
    );
    expect(send(inG(owner, 9, ["previous", "XYZ"]))).toBe("invalid: malformed previous reference");
    expect(send(inG(owner, 9, ["previous", ...Array(17).fill(x.id.slice(0, 8))]))).toBe("invalid: too many previous references (max 16)");
    // A window of 50: x falls out after 50 newer events.
    config.groups.previous_window = 50;
    const small = new GroupState({ config: () => config, relayPubkey: relay.pk });
    await small.rebuild(recordsOf(log));
    const ctx = { config, now: NOW, authed: new Set<string>() };
    expect(small.judge(ctx, inG(owner, 9, ["previous", x.id.slice(0, 8)]))).toBeUndefined();
    for (let i = 0; i < 50; i++) small.applyCommitted(inG(owner, 9));
    expect(small.judge(ctx, inG(owner, 9, ["previous", x.id.slice(0, 8)]))).toMatchObject({ prefix: "invalid" });
    // A rebuild whose scan held none of the group's events: references are not checked (cold).
    const cold = new GroupState({ config: () => config, relayPubkey: relay.pk });
    await cold.rebuild({ ...recordsOf(log), recentByGroup: async () => new Map() });
    expect(cold.judge(ctx, inG(owner, 9, ["previous", "00000000"]))).toBeUndefined();
    expect(state.ready).toBe(true);
  });
});

describe("GroupState: reads, replay, operators", () => {
  test("access, memberships and gates follow private, hidden and deleted", async () => {
    const { state, send } = await fixture();
    send(sign(owner, 9007, [["h", "p"]]));
    send(sign(owner, 9007, [["h", "o"]]));
    expect(state.gating).toBe(false);
    send(sign(owner, 9002, [["h", "p"], ["private"], ["hidden"]]));
    expect(state.gating).toBe(true);
    expect(state.access("p", new Set(), false)).toBe("auth-required");
    expect(state.access("p", new Set([outsider.pk]), false)).toBe("restricted");
    expect(state.access("p", new Set([outsider.pk, owner.pk]), true)).toBe("ok");
    expect(state.access("o", new Set(), false)).toBe("ok");
    expect(state.access("unknown", new Set(), false)).toBe("ok");
    // What the store is told: the reader's memberships in gated groups; which are gated, its group_gates (gates()).
    expect(state.memberships(new Set([outsider.pk]))).toEqual([]);
    expect(state.memberships(new Set([owner.pk]))).toEqual(["p"]);
    expect(state.memberships(new Set([outsider.pk, owner.pk]))).toEqual(["p"]);
    expect(state.gates()).toEqual([{ group: "p", events: true, metadata: true }]);
    send(
      sign(owner, 9000, [
        ["h", "p"],
        ["p", outsider.pk],
      ]),
    );
    expect(state.memberships(new Set([outsider.pk]))).toEqual(["p"]);
    send(sign(owner, 9002, [["h", "p"], ["hidden"]])); // private off, still hidden
    expect(state.gates()).toEqual([{ group: "p", events: false, metadata: true }]);
    expect(state.access("p", new Set(), false)).toBe("ok");
    send(sign(owner, 9002, [["h", "p"], ["visible"]])); // open: its members are no one's gated memberships
    expect(state.gates()).toEqual([]);
    expect(state.memberships(new Set([outsider.pk]))).toEqual([]);
    expect(state.gateOf("p")).toEqual({ group: "p", events: false, metadata: false });
    send(sign(owner, 9002, [["h", "p"], ["private"]])); // gated again: its members are indexed again
    expect(state.memberships(new Set([outsider.pk]))).toEqual(["p"]);
    send(sign(owner, 9008, [["h", "p"]])); // deleted: gated for all, a member of it no one
    expect(state.gates()).toEqual([{ group: "p", events: true, metadata: true }]);
    expect(state.memberships(new Set([outsider.pk, owner.pk]))).toEqual([]);
  });

  test("replay: a rebuild from the stored events gives the same state as the commits did", async () => {
    const { state, send, commit, log } = await fixture();
    send(inG(owner, 9007));
    send(inG(owner, 9002, ["name", "G"], ["private"], ["closed"]));
    send(inG(owner, 9009, ["code", "k"]));
    send(inG(member, 9021, ["code", "k"]));
    commit(inG(relay, 9000, ["p", member.pk]));
    send(inG(owner, 9000, ["p", mod.pk, "moderator"]));
    send(inG(mod, 9001, ["p", outsider.pk]));
    send(inG(owner, 9010, ["e", owner.pk]));
    send(sign(outsider, 9007, [["h", "h2"]]));
    send(sign(outsider, 9022, [["h", "h2"]]));
    commit(inG(member, 9000, ["p", member.pk, "admin"])); // not allowed: skipped both times
    commit(
      sign(outsider, 39000, [
        ["d", "g"],
        ["name", "fake"],
      ]),
    );
    const relay39000 = sign(relay, 39000, [
      ["d", "g"],
      ["name", "G"],
    ]);
    commit(relay39000);
    commit(sign(relay, 9008, [["h", "h2"]])); // its creator left: only the relay can
    const again = new GroupState({ config: () => configWith(), relayPubkey: relay.pk });
    const built = await again.rebuild(recordsOf(log));
    expect(built).toMatchObject({ groups: 1, members: 3, skipped: 1 });
    expect(again.list()).toEqual(state.list());
    expect(again.members("g")).toEqual(state.members("g"));
    expect(again.invites("g")).toEqual(state.invites("g")!);
    for (const kind of [39000, 39001, 39002, 39003, 39005] as const) expect(again.render("g", kind)).toEqual(state.render("g", kind)!);
    expect(again.published("g", 39000)).toEqual({ tags: relay39000.tags, created_at: relay39000.created_at });
    expect(again.memberships(new Set([outsider.pk]))).toEqual(state.memberships(new Set([outsider.pk])));
    expect(again.gates()).toEqual(state.gates());
    expect(
      again.judge({ config: configWith(), now: NOW, authed: new Set([outsider.pk]) }, sign(outsider, 9007, [["h", "h2"]])),
    ).toMatchObject({
      prefix: "blocked",
    });
  });

  test("replay of random histories: the rebuilt state equals the live one (seeded)", async () => {
    for (const seed of [1, 7, 42]) {
      let x = seed;
      const rand = (n: number) => {
        x = (Math.imul(x, 1103515245) + 12345) >>> 0;
        return (x >>> 16) % n; // the high bits: an LCG's low bits repeat quickly
      };
      const actors = [owner, mod, member, outsider, relay].map((k) => k.pk);
      const groups = ["a", "b", "c", "d", "e"];
      const { state, commit, log } = await fixture({ max_members_per_group: 4, max_invites_per_group: 3 });
      let n = 0;
      const fake = (pubkey: string, kind: number, tags: string[][]): NostrEvent => ({
        id: (seed * 1_000_000 + n++).toString(16).padStart(64, "0"),
        pubkey,
        created_at: NOW,
        kind,
        tags,
        content: "",
        sig: "",
      });
      const kinds = [9000, 9000, 9001, 9002, 9005, 9007, 9008, 9009, 9010, 9021, 9021, 9022, 9];
      for (let i = 0; i < 400; i++) {
        const picked = kinds[rand(kinds.length)]!;
        const kind = picked === 9008 && rand(8) !== 0 ? 9 : picked; // a deletion now and then, not the end of every group
        const h = ["h", groups[rand(groups.length)]!];
        const who = actors[rand(actors.length)]!;
        const target = actors[rand(actors.length)]!;
        const extra: Record<number, string[][]> = {
          9000: [["p", target, ...(rand(3) === 0 ? [["admin", "moderator"][rand(2)]!] : [])]],
          9001: [["p", target]],
          9002: rand(2) ? [["private"]] : [["closed"], ["name", `n${i}`]],
          9005: [["e", "e".repeat(64)]],
          9009: [["code", `k${rand(5)}`]],
          9010: [["e", "f".repeat(64)]],
          9021: rand(2) ? [["code", `k${rand(5)}`]] : [],
        };
        commit(fake(who, kind, [h, ...(extra[kind] ?? [])]));
      }
      const again = new GroupState({
        config: () => configWith({ max_members_per_group: 4, max_invites_per_group: 3 }),
        relayPubkey: relay.pk,
      });
      await again.rebuild(recordsOf(log));
      expect(again.list()).toEqual(state.list());
      for (const g of groups) {
        expect(again.members(g)).toEqual(state.members(g));
        expect(again.invites(g)).toEqual(state.invites(g));
        for (const kind of [39000, 39001, 39002, 39005] as const) expect(again.render(g, kind)).toEqual(state.render(g, kind));
      }
      for (const a of actors) expect(again.memberships(new Set([a])).toSorted()).toEqual(state.memberships(new Set([a])).toSorted());
      expect(again.gates()).toEqual(state.gates());
      expect(state.list().length).toBeGreaterThan(0); // the history made groups
    }
  });

  test("events the feed brings during a rebuild are applied after it, once", async () => {
    const config = configWith();
    const create = inG(owner, 9007);
    const join = inG(member, 9021);
    const state = new GroupState({ config: () => config, relayPubkey: relay.pk });
    const records = recordsOf([create]);
    const slow: GroupRecords = {
      async inOrder(kinds, after, max) {
        const page = await records.inOrder(kinds, after, max);
        state.applyCommitted(create); // already read: skipped
        state.applyCommitted(join); // after everything read
        return page;
      },
      recentByGroup: records.recentByGroup,
    };
    await state.rebuild(slow);
    expect(
      state
        .members("g")!
        .map((m) => m.pubkey)
        .sort(),
    ).toEqual([owner.pk, member.pk].sort());
    expect(state.list().length).toBe(1);
  });

  test("judge, access and memberships never query the store once built", async () => {
    const config = configWith();
    const state = new GroupState({ config: () => config, relayPubkey: relay.pk });
    const create = inG(owner, 9007);
    const base = recordsOf([create]);
    let built = false;
    const guard = (): never => {
      throw new Error("queried the store after the rebuild");
    };
    await state.rebuild({
      inOrder: (...a) => (built ? guard() : base.inOrder(...a)),
      recentByGroup: (...a) => (built ? guard() : base.recentByGroup(...a)),
    });
    built = true;
    const ctx = { config, now: NOW, authed: new Set([member.pk]) };
    expect(state.judge(ctx, inG(member, 9021))).toBeUndefined();
    state.applyCommitted(inG(member, 9021));
    expect(state.judge(ctx, inG(member, 9, ["previous", create.id.slice(0, 8)]))).toBeUndefined();
    expect(state.access("g", ctx.authed, false)).toBe("ok");
    expect(state.memberships(ctx.authed)).toEqual([]);
    expect(base.reads).toBe(2);
  });

  test("operator views: list, members, invites, stats", async () => {
    const { state, send } = await fixture();
    send(inG(owner, 9007));
    send(inG(owner, 9002, ["name", "G"], ["picture", "https://p/x.png"], ["closed"]));
    send(inG(owner, 9009, ["code", "k"]));
    send(inG(owner, 9009, ["code", "k2"]));
    send(inG(member, 9021, ["code", "k"]));
    const [g] = state.list();
    expect(g).toMatchObject({
      id: "g",
      name: "G",
      picture: "https://p/x.png",
      closed: true,
      private: false,
      members: 2,
      admins: 1,
      invites: 1,
      createdBy: owner.pk,
    });
    expect(state.members("g")).toEqual([
      { pubkey: owner.pk, roles: ["admin"] },
      { pubkey: member.pk, roles: [] },
    ]);
    expect(state.members("nope")).toBeUndefined();
    expect(state.invites("nope")).toBeUndefined();
    const s = state.stats();
    expect(s).toMatchObject({ groups: 1, members: 2 });
    expect(s.bytes).toBeGreaterThan(0);
  });
});
