// NIP-29 with real client libraries over real websockets: the nostr-tools `nip29` helpers round
// trip (create, edit to private and closed, invite, join with the code, post with `previous`,
// read as a member and as an outsider, remove, leave and the relay's 9001), each user a
// SimplePool with automaticallyAuth (it answers the relay's challenge at connect); and NDK's
// NDKSimpleGroup (createGroup, setMetadata, getMetadata).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import NDK, { NDKPrivateKeySigner, NDKRelayAuthPolicies, NDKRelaySet, NDKSimpleGroup } from "@nostr-dev-kit/ndk";
import {
  generateCreateGroupEventTemplate,
  generateCreateInviteEventTemplate,
  generateEditGroupMetadataEventTemplate,
  generateGroupJoinRequestEventTemplate,
  generateGroupLeaveRequestEventTemplate,
  generateRemoveUserEventTemplate,
  loadGroup,
  type Group,
} from "nostr-tools/nip29";
import type { Filter } from "nostr-tools/filter";
import { SimplePool } from "nostr-tools/pool";
import { finalizeEvent, generateSecretKey, getPublicKey, type EventTemplate } from "nostr-tools/pure";
import { groupRelay } from "./groups-helpers.ts";
import type { TestRelay } from "./helpers.ts";

const T = 20_000;
let relay: TestRelay;
const cleanups: (() => unknown)[] = [];

beforeAll(async () => {
  relay = await groupRelay();
});
afterAll(async () => {
  for (const c of cleanups.reverse()) {
    try {
      await c();
    } catch {
      // a client already closed
    }
  }
  await relay.stop();
});

/** One user: a key and a pool that authenticates as it whenever a relay asks (NIP-42). */
function user() {
  const sk = generateSecretKey();
  const onauth = async (t: EventTemplate) => finalizeEvent(t, sk);
  const pool = new SimplePool();
  // Answers the challenge sent at connect (the field the constructor's type leaves out).
  pool.automaticallyAuth = () => onauth;
  cleanups.push(() => pool.destroy());
  return {
    pk: getPublicKey(sk),
    pool,
    /** Reads, authenticating again on a CLOSED "auth-required: " (an AUTH still in flight at the REQ). */
    // (querySync hands onauth on to the subscription, though its type leaves it out.)
    query: (filter: Filter) => pool.querySync([relay.url], filter, { onauth } as { maxWait?: number }),
    /** Signs and publishes; on OK false "auth-required: " the pool AUTHs and sends it once more. Rejects with the refusal. */
    publish: (t: EventTemplate) => {
      const e = finalizeEvent(t, sk);
      return Promise.all(pool.publish([relay.url], e, { onauth })).then(() => e);
    },
  };
}

/** The refusal a publish ends with (nostr-tools rejects with an Error holding the OK's reason). */
const refusal = (p: Promise<unknown>): Promise<string> =>
  p.then(
    () => "accepted",
    (err) => String(err instanceof Error ? err.message : err),
  );

describe("nostr-tools nip29", () => {
  test(
    "create, edit to private and closed, invite, join with the code, post, read as member and outsider, remove, leave",
    async () => {
      const [owner, joiner, second, outsider] = [user(), user(), user(), user()];
      const id = "tools-room";
      const created = await owner.publish(generateCreateGroupEventTemplate(id));
      const group: Group = {
        relay: relay.url,
        reference: { id, host: relay.url },
        metadata: { id, pubkey: relay.ctx.relayKey.pubkey, name: "Tools room", about: "from nostr-tools", isPrivate: true, isClosed: true },
      };
      const edit = await owner.publish(generateEditGroupMetadataEventTemplate(group));
      await owner.publish(generateCreateInviteEventTemplate(id, "open-sesame"));
      await owner.publish(generateCreateInviteEventTemplate(id, "open-sesame-2"));
      expect(await refusal(joiner.publish(generateGroupJoinRequestEventTemplate(id)))).toStartWith("restricted:");
      await joiner.publish(generateGroupJoinRequestEventTemplate(id, "open-sesame"));
      // A code admits one join.
      expect(await refusal(second.publish(generateGroupJoinRequestEventTemplate(id, "open-sesame")))).toBe(
        "restricted: unknown invite code",
      );
      await second.publish(generateGroupJoinRequestEventTemplate(id, "open-sesame-2"));

      // NIP-11 `pubkey` is the relay key (none configured): loadGroup finds the relay's 39000-39002.
      const loaded = await loadGroup({ pool: owner.pool, groupReference: group.reference, normalizedRelayURL: relay.url });
      expect(loaded.metadata).toMatchObject({ id, name: "Tools room", about: "from nostr-tools", isPrivate: true, isClosed: true });
      expect(loaded.admins).toEqual([{ pubkey: owner.pk, label: "admin", permissions: [] }]);
      expect(loaded.members!.map((m) => m.pubkey).sort()).toEqual([owner.pk, joiner.pk, second.pk].sort());

      // A message naming recent events of the group (first 8 characters), as clients send them.
      const post = await joiner.publish({
        kind: 9,
        created_at: Math.floor(Date.now() / 1000),
        content: "hello members",
        tags: [
          ["h", id],
          ["previous", created.id.slice(0, 8), edit.id.slice(0, 8)],
        ],
      });
      expect(
        await refusal(
          joiner.publish({
            kind: 9,
            created_at: Math.floor(Date.now() / 1000),
            content: "x",
            tags: [
              ["h", id],
              ["previous", "0badc0de"],
            ],
          }),
        ),
      ).toStartWith("invalid:");

      const asMember = await second.query({ kinds: [9], "#h": [id] });
      expect(asMember.map((e) => e.id)).toEqual([post.id]);
      expect(await outsider.query({ kinds: [9], "#h": [id] })).toEqual([]);
      expect((await outsider.query({ kinds: [9] })).map((e) => e.id)).not.toContain(post.id);
      // Nobody authenticated: nothing either.
      const anonymous = new SimplePool();
      cleanups.push(() => anonymous.destroy());
      expect((await anonymous.querySync([relay.url], { kinds: [9] })).map((e) => e.id)).not.toContain(post.id);

      await owner.publish(generateRemoveUserEventTemplate(id, joiner.pk));
      expect(
        await refusal(joiner.publish({ kind: 9, created_at: Math.floor(Date.now() / 1000), content: "still here?", tags: [["h", id]] })),
      ).toStartWith("blocked:");

      const leave = await second.publish(generateGroupLeaveRequestEventTemplate(id));
      const answers = await owner.query({ kinds: [9001], authors: [relay.ctx.relayKey.pubkey], "#h": [id] });
      expect(
        answers.some(
          (e) => e.tags.some((t) => t[0] === "e" && t[1] === leave.id) && e.tags.some((t) => t[0] === "p" && t[1] === second.pk),
        ),
      ).toBe(true);
      const after = await loadGroup({ pool: owner.pool, groupReference: group.reference, normalizedRelayURL: relay.url });
      expect(after.members!.map((m) => m.pubkey)).toEqual([owner.pk]);
    },
    T,
  );
});

describe("NDK NDKSimpleGroup", () => {
  test(
    "createGroup, setMetadata (a partial edit), getMetadata",
    async () => {
      const signer = NDKPrivateKeySigner.generate();
      const ndk = new NDK({ explicitRelayUrls: [relay.url], signer, enableOutboxModel: false, autoConnectUserRelays: false });
      cleanups.push(() => {
        for (const r of ndk.pool.relays.values()) r.disconnect();
      });
      ndk.relayAuthDefaultPolicy = NDKRelayAuthPolicies.signIn({ ndk });
      const authed = new Promise<void>((res) => ndk.pool.on("relay:authed", () => res()));
      await ndk.connect(5000);
      await Promise.race([authed, Bun.sleep(5000).then(() => Promise.reject(new Error("NDK never authenticated")))]);

      const group = new NDKSimpleGroup(ndk, NDKRelaySet.fromRelayUrls([relay.url], ndk), "ndk-room");
      expect((await group.createGroup()).size).toBe(1);
      expect((await group.setMetadata({ name: "NDK room", about: "made by NDK" })).size).toBe(1);
      const fresh = new NDKSimpleGroup(ndk, NDKRelaySet.fromRelayUrls([relay.url], ndk), "ndk-room");
      const meta = await fresh.getMetadata();
      expect(meta.name).toBe("NDK room");
      expect(meta.about).toBe("made by NDK");
      expect(meta.pubkey).toBe(relay.ctx.relayKey.pubkey);
      expect((await fresh.getMembers()).map((u) => u.pubkey)).toContain((await signer.user()).pubkey);
    },
    T,
  );
});
