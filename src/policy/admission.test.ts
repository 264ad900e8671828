import { expect, test } from "bun:test";
import { defaults, type Config } from "../config/schema.ts";
import type { NostrEvent } from "../protocol/event.ts";
import { refusalText } from "../protocol/reasons.ts";
import { admission, BASIS_BIT, enabledMask, type AdmissionView, type Basis, type Nip05State } from "./admission.ts";

const PK = "a".repeat(64);
const event = (o: Partial<NostrEvent> = {}): NostrEvent => ({
  id: "0".repeat(64),
  pubkey: PK,
  created_at: 1,
  kind: 1,
  tags: [],
  content: "",
  sig: "",
  ...o,
});

/** A registry as the policy sees it: fixed bits, balance and NIP-05 state; refusals counted. */
function view(o: { bits?: number; balance?: number; nip05?: Nip05State; ready?: boolean; trustLoading?: boolean } = {}) {
  const refused: Basis[] = [];
  const v: AdmissionView = {
    ready: o.ready ?? true,
    trustLoading: o.trustLoading ?? false,
    bits: () => o.bits ?? 0,
    balance: () => o.balance,
    nip05: () => o.nip05,
    refused: (b) => refused.push(b),
  };
  return { v, refused };
}

const judge = (c: Config, v: AdmissionView, e = event()) => {
  const r = admission({ config: c, access: v }, e);
  return r && refusalText(r);
};

test("no model on: nothing is refused, whatever the view says", () => {
  const c = defaults();
  expect(enabledMask(c)).toBe(0);
  expect(judge(c, view({ ready: false }).v)).toBeUndefined();
});

test("NIP-05 texts: nothing known, pending, failed, blacklisted and whitelisted domains", () => {
  const c = defaults();
  c.verified_users.mode = "enabled";
  const { v, refused } = view();
  expect(judge(c, v)).toBe("restricted: publish a kind 0 with a NIP-05 address this relay can verify first");
  expect(refused).toEqual(["verified"]);
  expect(judge(c, view({ nip05: { address: "bob@example.com", state: "pending" } }).v)).toBe(
    "restricted: your NIP-05 address bob@example.com is being checked, try again in a minute",
  );
  expect(judge(c, view({ nip05: { address: "bob@example.com", state: "failed", error: "timed out" } }).v)).toBe(
    "restricted: your NIP-05 address bob@example.com could not be verified (timed out)",
  );
  c.verified_users.domain_blacklist = ["Spam.example"];
  expect(judge(c, view({ nip05: { address: "x@spam.example", state: "refused" } }).v)).toBe(
    "blocked: NIP-05 addresses of spam.example may not publish here",
  );
  c.verified_users.domain_whitelist = ["a.example", "b.example", "c.example", "d.example"];
  expect(judge(c, view({ nip05: { address: "x@other.example", state: "refused" } }).v)).toBe(
    "restricted: only NIP-05 addresses of a.example, b.example, c.example, … may publish here",
  );
  expect(judge(c, view({ bits: BASIS_BIT.verified }).v)).toBeUndefined();
  // A kind 0 naming an address the lists allow is taken (#211); one they refuse hears their text;
  // one that is no address, or while checks are passive, is judged as any event (issue 33 review, M1).
  const profile = (nip05: string) => event({ kind: 0, content: JSON.stringify({ nip05 }) });
  expect(judge(c, v, profile("Bob@A.example"))).toBeUndefined();
  expect(judge(c, v, profile("bob@example.com"))).toBe(
    "restricted: only NIP-05 addresses of a.example, b.example, c.example, … may publish here",
  );
  c.verified_users.domain_whitelist = [];
  expect(judge(c, v, profile("x@spam.example:8443"))).toBe("blocked: NIP-05 addresses of spam.example may not publish here");
  expect(judge(c, v, profile("x"))).toBe("restricted: publish a kind 0 with a NIP-05 address this relay can verify first");
  expect(judge(c, v, event({ kind: 0, content: "{not json" }))).toStartWith("restricted:");
  expect(judge(c, v, profile("bob@example.com"))).toBeUndefined();
  c.verified_users.mode = "passive";
  c.membership.enabled = true;
  expect(judge(c, v, profile("bob@example.com"))).toStartWith("restricted: this relay is for its members");
});

test("inbox mail (accept_dms_to_members): to an admitted pubkey that is not the relay's key or an admin, not to its author, at most 2 p tags", () => {
  const c = defaults();
  c.membership.enabled = true;
  const [member, admin, relay, other] = ["b", "c", "d", "e"].map((x) => x.repeat(64)) as [string, string, string, string];
  c.admin.pubkeys = [admin];
  const v: AdmissionView = { ...view().v, bits: (pk) => (pk === member ? BASIS_BIT.member : pk === PK ? 0 : BASIS_BIT.manual) };
  const mail = (kind: number, ...to: string[]) => event({ kind, tags: to.map((p) => ["p", p]) });
  const judged = (e: NostrEvent) => {
    const r = admission({ config: c, access: v, relayPubkey: relay }, e);
    return r && refusalText(r);
  };
  expect(judged(mail(1059, member))).toBeUndefined();
  expect(judged(mail(4, member, other))).toBeUndefined();
  for (const e of [mail(4, admin), mail(1059, relay), mail(4, member, PK), mail(1059, member, other, other), mail(1, member)])
    expect(judged(e)).toStartWith("restricted:");
  c.authorization.accept_dms_to_members = false;
  expect(judged(mail(1059, member))).toStartWith("restricted:");
});

test("paid per event: a balance that does not cover the event is refused with the top-up URL; another basis is not charged", () => {
  const c = defaults();
  c.pay_to_relay.enabled = true;
  c.pay_to_relay.cost_per_event = 5;
  c.info.relay_url = "wss://r.example/";
  expect(judge(c, view({ bits: BASIS_BIT.paid, balance: 4 }).v)).toBe(
    `blocked: your balance (4 sats) does not cover this event (5 sats): top up at https://r.example/join?pubkey=${PK}`,
  );
  expect(judge(c, view({ bits: BASIS_BIT.paid, balance: 5 }).v)).toBeUndefined();
  expect(judge(c, view({ bits: BASIS_BIT.paid | BASIS_BIT.manual, balance: 0 }).v)).toBeUndefined();
  // Disabled models' bits do not admit.
  expect(judge(c, view({ bits: BASIS_BIT.member }).v)).toStartWith("restricted: this relay requires payment to publish");
});

test("several models: the first enabled one speaks and pay's join URL is added; relative without relay_url", () => {
  const c = defaults();
  c.web_of_trust.enabled = true;
  c.web_of_trust.depth = 2;
  expect(judge(c, view().v)).toBe("restricted: only the owner's web of trust (follows, depth 2) may publish here");
  expect(judge(c, view({ trustLoading: true }).v)).toBe("error: the web of trust is loading, try again");
  c.pay_to_relay.enabled = true;
  c.pay_to_relay.sign_ups = false;
  expect(judge(c, view().v)).toBe("restricted: only the owner's web of trust (follows, depth 2) may publish here");
  c.pay_to_relay.sign_ups = true;
  expect(judge(c, view().v)).toBe(`restricted: this relay requires payment to publish: join at /join?pubkey=${PK}`);
  c.pay_to_relay.enabled = false;
  c.membership.enabled = true;
  expect(judge(c, view().v)).toBe("restricted: this relay is for its members: ask a member for an invite code (NIP-43)");
  expect(judge(c, view({ ready: false }).v)).toBe("error: admission lists are loading, try again");
  // Join and leave requests are the relay's to answer.
  expect(judge(c, view().v, event({ kind: 28934 }))).toBeUndefined();
});
