// admit(): the one EVENT pipeline, driven without a relay. Each step's outcome, the exact OK text
// built from it (okMessage: the wire must not change), the order of the steps (a later step is
// not reached), and the bookkeeping of events in flight.
import { describe, expect, test } from "bun:test";
import { admit, type AdmitContext, type Source } from "../src/admit/admit.ts";
import { countOutcome, newCounts, okAccepted, okMessage, problemOf, type Outcome } from "../src/admit/outcome.ts";
import { defaults } from "../src/config/schema.ts";
import { defaultPolicies, importPolicies } from "../src/policy/defaults.ts";
import { RateLimiter } from "../src/policy/rate-limit.ts";
import { eventRate, type Policy, type PolicyContext } from "../src/policy/rules.ts";
import { writeCost } from "../src/policy/write-cost.ts";
import { serializeEvent, type NostrEvent } from "../src/protocol/event.ts";
import { refuse } from "../src/protocol/reasons.ts";
import type { PendingWrite, WriteOutcome } from "../src/store/types.ts";
import { now, signer } from "./helpers.ts";

const config = defaults();
const author = signer();

/** A context whose store, verifier and writer record what they were asked. */
function fakeContext(o: { stored?: string[]; badSig?: boolean; write?: (w: PendingWrite) => WriteOutcome; ephemeral?: boolean } = {}) {
  const asked = { has: 0, verify: 0, writes: [] as PendingWrite[], fannedOut: [] as string[] };
  const ctx: { -readonly [K in keyof AdmitContext]: AdmitContext[K] } = {
    closing: false,
    inflight: 0,
    // No early answer (hasNow): the exact check is asked.
    store: { has: async (id) => (asked.has++, (o.stored ?? []).includes(id)), hasNow: () => undefined },
    verifier: { verify: async () => (asked.verify++, !o.badSig) },
    writer: {
      enqueue: async (w) => {
        asked.writes.push(w);
        return o.write?.(w) ?? { stored: true, seq: asked.writes.length };
      },
    },
  };
  if (o.ephemeral !== false) ctx.ephemeral = (e) => void asked.fannedOut.push(e.id);
  return { ctx, asked };
}

const policy = (p: Partial<PolicyContext> = {}): PolicyContext => ({
  config,
  now: now(),
  authed: new Set(),
  relayUrl: "ws://relay.test",
  ...p,
});
const source = (p: Partial<Source> = {}): Source => ({ policies: importPolicies, policy: policy(), ...p });
const ok = (o: Outcome) => [o.fate, okAccepted(o), okMessage(o)];

describe("each step's outcome and its OK text", () => {
  test("stored", async () => {
    const { ctx, asked } = fakeContext();
    const e = author.sign({ kind: 1, content: "hi" });
    const o = await admit(ctx, e, source());
    expect(ok(o)).toEqual(["accepted", true, ""]);
    expect(o.event?.id).toBe(e.id);
    expect(asked.writes.map((w) => w.json)).toEqual([serializeEvent(e)]);
    expect(asked.writes[0]!.vanishOnly).toBeUndefined();
  });

  test("not an event: refused before anything else, with the parser's reason", async () => {
    const { ctx, asked } = fakeContext();
    const o = await admit(ctx, { id: "abc", kind: 1 }, source());
    expect(o.fate).toBe("badEvent");
    expect(o.event).toBeUndefined();
    expect(okAccepted(o)).toBe(false);
    expect(okMessage(o)).toStartWith("invalid: ");
    expect(asked).toEqual({ has: 0, verify: 0, writes: [], fannedOut: [] });
  });

  test("a policy refuses: no id check, no lookup, no signature check", async () => {
    const { ctx, asked } = fakeContext();
    const e = { ...author.sign({ kind: 22242, content: "" }), content: "tampered" }; // bad id too: the policy comes first
    const o = await admit(ctx, e, source());
    expect(ok(o)).toEqual(["refused", false, "invalid: kind 22242 is sent with AUTH, not EVENT"]);
    expect(asked.has + asked.verify + asked.writes.length).toBe(0);
  });

  test("a bad id: refused before the duplicate check", async () => {
    const { ctx, asked } = fakeContext();
    const e = { ...author.sign({ kind: 1, content: "x" }), content: "changed" };
    expect(ok(await admit(ctx, e, source()))).toEqual(["badId", false, "invalid: event id does not match the event"]);
    expect(asked.has).toBe(0);
  });

  test("already stored: duplicate, without a signature check", async () => {
    const e = author.sign({ kind: 1, content: "again" });
    const { ctx, asked } = fakeContext({ stored: [e.id] });
    expect(ok(await admit(ctx, e, source()))).toEqual(["duplicate", true, "duplicate: already have this event"]);
    expect(asked.verify).toBe(0);
  });

  test("a bad signature: nothing written", async () => {
    const { ctx, asked } = fakeContext({ badSig: true });
    expect(ok(await admit(ctx, author.sign({ kind: 1 }), source()))).toEqual(["badSig", false, "invalid: signature verification failed"]);
    expect(asked.writes).toEqual([]);
  });

  test("the writer's refusals: an older version, a deleted event, a failed write", async () => {
    const cases: [WriteOutcome, string, string][] = [
      [
        { stored: false, duplicate: false, refusal: refuse("duplicate", "a newer version of this replaceable event is already stored") },
        "older",
        "duplicate: a newer version of this replaceable event is already stored",
      ],
      [
        { stored: false, duplicate: false, refusal: refuse("blocked", "this event was deleted by its author") },
        "deleted",
        "blocked: this event was deleted by its author",
      ],
      [
        { stored: false, duplicate: false, refusal: refuse("error", "could not store the event") },
        "refused",
        "error: could not store the event",
      ],
      [{ stored: false, duplicate: true }, "duplicate", "duplicate: already have this event"],
    ];
    for (const [outcome, fate, text] of cases) {
      const { ctx } = fakeContext({ write: () => outcome });
      const o = await admit(ctx, author.sign({ kind: 0 }), source());
      expect([o.fate, okMessage(o)]).toEqual([fate, text]);
    }
  });

  test("ephemeral: fanned out after the signature check, never written; without a fanout, dropped before it", async () => {
    const e = author.sign({ kind: 20001, content: "now" });
    const live = fakeContext();
    expect(ok(await admit(live.ctx, e, source()))).toEqual(["ephemeral", true, ""]);
    expect(live.asked).toEqual({ has: 0, verify: 1, writes: [], fannedOut: [e.id] });
    const none = fakeContext({ ephemeral: false });
    expect(ok(await admit(none.ctx, e, source()))).toEqual(["ephemeral", true, ""]);
    expect(none.asked).toEqual({ has: 0, verify: 0, writes: [], fannedOut: [] });
  });

  test("shutting down and throttled: refused after the shape, before the policies", async () => {
    const { ctx, asked } = fakeContext();
    const e = author.sign({ kind: 1 });
    ctx.closing = true;
    expect(ok(await admit(ctx, e, source()))).toEqual(["refused", false, "error: relay is shutting down"]);
    ctx.closing = false;
    const throttle = () => refuse("rate-limited", "too many events in flight on this connection");
    expect(ok(await admit(ctx, e, source({ throttle })))).toEqual([
      "refused",
      false,
      "rate-limited: too many events in flight on this connection",
    ]);
    expect(asked.has).toBe(0);
  });

  test("a writer queue full for the sender: refused after the policies, before the id and the signature; the write carries its group and cost", async () => {
    const { ctx, asked } = fakeContext();
    const full = new Set(["203.0.113.0"]);
    ctx.writer = {
      ...ctx.writer,
      refusalFor: (g) =>
        g !== undefined && full.has(g) ? refuse("rate-limited", "too many of your events are waiting to be stored") : undefined,
    };
    const from = (ip: string) => source({ policy: policy({ ip, group: ip.replace(/\.\d+$/, ".0") }) });
    const e = author.sign({ kind: 1, tags: Array.from({ length: 160 }, (_, k) => ["t", `x${k}`]) });
    expect(ok(await admit(ctx, e, from("203.0.113.5")))).toEqual([
      "refused",
      false,
      "rate-limited: too many of your events are waiting to be stored",
    ]);
    expect([asked.has, asked.verify]).toEqual([0, 0]);
    expect(ok(await admit(ctx, e, from("198.51.100.7")))).toEqual(["accepted", true, ""]);
    expect(asked.writes[0]!.group).toBe("198.51.100.0");
    expect(asked.writes[0]!.cost).toBeGreaterThan(10);
    // Loopback, exempt from the per-address limits by default: no group, no share of its own.
    expect(ok(await admit(ctx, author.sign({ kind: 1 }), from("127.0.0.1")))).toEqual(["accepted", true, ""]);
    expect(asked.writes[1]!.group).toBeUndefined();
    expect(asked.writes[1]!.cost).toBe(1);
  });
});

describe("the write-policy plugin", () => {
  test("asked last, with the serialized event; its answer passed through as it is", async () => {
    const seen: string[] = [];
    const { ctx, asked } = fakeContext();
    const e = author.sign({ kind: 1, content: "plugin" });
    const reject = await admit(
      ctx,
      e,
      source({ writePolicy: (_e, json) => (seen.push(json), { accepted: false, message: "blocked:no space" }) }),
    );
    expect(ok(reject)).toEqual(["plugin", false, "blocked:no space"]);
    expect(seen).toEqual([serializeEvent(e)]);
    const shadow = await admit(ctx, e, source({ writePolicy: async () => ({ accepted: true, message: "" }) }));
    expect(ok(shadow)).toEqual(["plugin", true, ""]);
    expect(asked.writes).toEqual([]); // neither is stored
    expect(ok(await admit(ctx, e, source({ writePolicy: () => undefined })))).toEqual(["accepted", true, ""]);
    expect(asked.writes).toHaveLength(1);
  });

  test("sees only new events: with a plugin the exact check is asked, never the early 'not known' (Store.hasNow)", async () => {
    const e = author.sign({ kind: 1, content: "stored" });
    const { ctx, asked } = fakeContext({ stored: [e.id], write: () => ({ stored: false, duplicate: true }) });
    let early = 0;
    ctx.store = { ...ctx.store, hasNow: () => (early++, false) };
    let plugin = 0;
    const withPlugin = source({ writePolicy: () => (plugin++, undefined) });
    expect(ok(await admit(ctx, e, withPlugin))).toEqual(["duplicate", true, "duplicate: already have this event"]);
    expect([plugin, early, asked.verify, asked.writes.length]).toEqual([0, 0, 0, 0]);
    // Without one the early answer is taken: "not known", verified, and the write finds it stored.
    expect(ok(await admit(ctx, e, source()))).toEqual(["duplicate", true, "duplicate: already have this event"]);
    expect([early, asked.verify, asked.writes.length]).toEqual([1, 1, 1]);
  });
});

describe("a request to vanish refused for its sender's standing (NIP-62)", () => {
  const vanishConfig = { ...config, options: { ...config.options, auth: "always" as const } };
  const client = (): Source => ({ policies: defaultPolicies, policy: policy({ config: vanishConfig }) });
  const vanish = () => author.sign({ kind: 62, tags: [["relay", "ALL_RELAYS"]] });

  test("goes to the writer as vanishOnly, the plugin not asked; the outcome is the writer's refusal", async () => {
    const carried = refuse("auth-required", "this relay requires authentication to publish; the request to vanish was carried out");
    const { ctx, asked } = fakeContext({ write: () => ({ stored: false, duplicate: false, refusal: carried }) });
    let plugin = 0;
    const o = await admit(ctx, vanish(), { ...client(), writePolicy: () => (plugin++, undefined) });
    expect(ok(o)).toEqual([
      "refused",
      false,
      "auth-required: this relay requires authentication to publish; the request to vanish was carried out",
    ]);
    expect(asked.writes[0]!.vanishOnly).toEqual(refuse("auth-required", "this relay requires authentication to publish"));
    expect(plugin).toBe(0);
  });

  test("already stored: the refusal, and the deletion is not done again", async () => {
    const e = vanish();
    const { ctx, asked } = fakeContext({ stored: [e.id] });
    expect(ok(await admit(ctx, e, client()))).toEqual(["refused", false, "auth-required: this relay requires authentication to publish"]);
    expect(asked.writes).toEqual([]);
  });

  test("stored, but its check said 'not known' (Store.hasNow while a batch commits): the writer's duplicate gives the same answer", async () => {
    const e = vanish();
    const { ctx, asked } = fakeContext({ write: () => ({ stored: false, duplicate: true }) });
    ctx.store = { ...ctx.store, hasNow: () => false };
    expect(ok(await admit(ctx, e, client()))).toEqual(["refused", false, "auth-required: this relay requires authentication to publish"]);
    expect(asked.writes[0]!.vanishOnly).toEqual(refuse("auth-required", "this relay requires authentication to publish"));
  });
});

describe("bookkeeping", () => {
  test("events in flight are counted from the duplicate check to the outcome, and released when a step throws", async () => {
    const session = { inflight: 0 };
    let during = -1;
    const { ctx } = fakeContext({ write: () => ((during = ctx.inflight + session.inflight), { stored: true, seq: 1 }) });
    await admit(ctx, author.sign({ kind: 1 }), source({ session }));
    expect(during).toBe(2);
    expect([ctx.inflight, session.inflight]).toEqual([0, 0]);
    ctx.verifier = { verify: async () => Promise.reject(new Error("worker died")) };
    await expect(admit(ctx, author.sign({ kind: 1 }), source({ session }))).rejects.toThrow("worker died");
    expect([ctx.inflight, session.inflight]).toEqual([0, 0]);
  });

  test("counts and problems: one key per fate, problems for refusals except an older version", () => {
    const c = newCounts();
    const e = author.sign({ kind: 1 }) as NostrEvent;
    const outcomes: Outcome[] = [
      { event: e, fate: "accepted" },
      { event: e, fate: "duplicate" },
      { event: e, fate: "older", refusal: refuse("duplicate", "newer stored") },
      { event: e, fate: "deleted", refusal: refuse("blocked", "deleted") },
      { event: undefined, fate: "badEvent", refusal: refuse("invalid", "no id") },
      { event: e, fate: "plugin", accepted: false, message: "blocked: no" },
    ];
    for (const o of outcomes) countOutcome(c, o);
    expect(c).toEqual({ ...newCounts(), accepted: 1, duplicate: 1, older: 1, deleted: 1, badEvent: 1, refused: 1 });
    expect(outcomes.map(problemOf)).toEqual([undefined, undefined, undefined, "blocked: deleted", "invalid: no id", undefined]);
  });
});

describe("write cost", () => {
  test("an event's cost is found once: the rate limit and the writer queue share it", async () => {
    const e = author.sign({ kind: 1, content: "", tags: Array.from({ length: 1800 }, (_, i) => ["t", String(i)]) });
    /** How often admit walks the event's tags, with these policies, and the cost the writer was handed. */
    const walks = async (policies: Policy[]) => {
      let walked = 0;
      const tags = new Proxy(e.tags, {
        get(target, key, receiver) {
          if (key === Symbol.iterator) walked++;
          return Reflect.get(target, key, receiver);
        },
      });
      const { ctx, asked } = fakeContext();
      const o = await admit(ctx, { ...e, tags }, source({ policies, policy: policy({ ip: "203.0.113.9", rates: new RateLimiter() }) }));
      expect(o.fate).toBe("accepted");
      expect(asked.writes[0]!.cost).toBe(writeCost(e));
      return walked;
    };
    expect(await walks([eventRate])).toBe(await walks([]));
  });
});
