// Issue 33 over the wire: who may write while an admission model is on. No engine is built here
// (WP1-WP4 add theirs and their own tests): a model is switched on in the config and pubkeys are
// admitted through the registry (relay.ctx.access, as an engine does) or NIP-86 allowpubkey
// (manual). Each case starts its relay with the config it needs.
import { afterAll, describe, expect, test } from "bun:test";
import { ADMISSION_TEXTS } from "../src/policy/admission.ts";
import { accepted, Client, failOnRelayErrors, refusedWith, signer, startTestRelay, type ConfigPatch, type TestRelay } from "./helpers.ts";

failOnRelayErrors();

const relays: TestRelay[] = [];
const clients: Client[] = [];
afterAll(async () => {
  for (const c of clients) c.close();
  for (const r of relays) await r.stop();
});

async function relayWith(patch: ConfigPatch): Promise<{ relay: TestRelay; c: Client }> {
  const relay = await startTestRelay(patch);
  relays.push(relay);
  const c = await Client.connect(relay.url);
  clients.push(c);
  return { relay, c };
}

const note = (s = signer()) => s.sign({ kind: 1, content: `hello ${Math.random()}` });

describe("writes while a model is on (membership, no engine)", () => {
  test("a stranger hears the model's text; a member, an allow-listed and an admin-allowed pubkey write; revoking stops it", async () => {
    const listed = signer();
    const { relay, c } = await relayWith({ membership: { enabled: true }, authorization: { pubkey_allowlist: [listed.pubkey] } });
    const stranger = signer();
    expect(await c.publish(note(stranger))).toEqual(["OK", expect.any(String), false, `restricted: ${ADMISSION_TEXTS.member}`]);
    // The allow list is the manual basis: its pubkeys write free, and it no longer keeps others out by itself.
    await accepted(c, note(listed));
    const member = signer();
    await relay.ctx.access!.admit(member.pubkey, "member", { via: "admin" });
    await accepted(c, note(member));
    await relay.ctx.admin.apply({ method: "allowpubkey", pubkey: stranger.pubkey, reason: "" });
    await accepted(c, note(stranger));
    await relay.ctx.access!.revoke(member.pubkey, "member", "test");
    await refusedWith(c, note(member), "restricted: this relay is for its members");
  });

  test("bans win over every basis: the deny list and banpubkey", async () => {
    const denied = signer();
    const banned = signer();
    const { relay, c } = await relayWith({
      membership: { enabled: true },
      authorization: { pubkey_allowlist: [denied.pubkey], pubkey_denylist: [denied.pubkey] },
    });
    await relay.ctx.access!.admit(banned.pubkey, "member", {});
    await relay.ctx.admin.apply({ method: "banpubkey", pubkey: banned.pubkey, reason: "spam" });
    await refusedWith(c, note(denied), "blocked: this pubkey may not publish here");
    await refusedWith(c, note(banned), "blocked: this pubkey is banned from this relay");
  });
});

describe("no model on: as before", () => {
  test("an allow list makes the relay allow-only", async () => {
    const listed = signer();
    const { c } = await relayWith({ authorization: { pubkey_allowlist: [listed.pubkey] } });
    await accepted(c, note(listed));
    await refusedWith(c, note(), "restricted: this pubkey is not allowed to publish here");
  });

  test("without a list everyone writes", async () => {
    const { relay, c } = await relayWith({});
    expect(relay.ctx.access).toBeUndefined();
    await accepted(c, note());
  });
});
