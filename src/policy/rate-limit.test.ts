// Token buckets and the keyed limiter, on an injected clock: no sleeping.
import { describe, expect, test } from "bun:test";
import { defaults } from "../config/schema.ts";
import { chargeRate, RateLimiter, rateLimitMessage, refill, waitFor, type Rate } from "./rate-limit.ts";
import { eventRate } from "./rules.ts";

const clock = (start = 1_000_000) => {
  const c = { t: start, now: () => c.t };
  return c;
};
const sixPerMinute: Rate = { perMinute: 6, burst: 3 }; // one token every 10 s

describe("bucket math", () => {
  test("refills linearly and never above the burst", () => {
    const b = { tokens: 0, at: 0, fullAt: 0 };
    expect(refill(b, sixPerMinute, 5_000)).toBeCloseTo(0.5);
    expect(refill(b, sixPerMinute, 20_000)).toBeCloseTo(2);
    expect(refill(b, sixPerMinute, 10 * 60_000)).toBe(3);
    expect(refill(b, sixPerMinute, -1)).toBe(0); // a clock that steps back gives nothing
  });

  test("waitFor is the time until enough tokens", () => {
    expect(waitFor(1, 1, sixPerMinute)).toBe(0);
    expect(waitFor(0, 1, sixPerMinute)).toBe(10_000);
    expect(waitFor(0.5, 1, sixPerMinute)).toBe(5_000);
  });
});

describe("RateLimiter", () => {
  test("a burst passes, the next is refused with the wait, and a refill lets one more through", () => {
    const c = clock();
    const l = new RateLimiter({ now: c.now });
    const charge = [{ key: "a", rate: sixPerMinute }];
    expect([l.take(charge), l.take(charge), l.take(charge)]).toEqual([0, 0, 0]);
    expect(l.take(charge)).toBe(10_000);
    c.t += 9_999;
    expect(l.take(charge)).toBe(1);
    c.t += 1;
    expect(l.take(charge)).toBe(0);
    expect(l.take(charge)).toBe(10_000);
  });

  test("keys are independent; perMinute 0 is unlimited and holds no bucket", () => {
    const l = new RateLimiter({ now: clock().now });
    const one: Rate = { perMinute: 1, burst: 1 };
    expect(l.take([{ key: "a", rate: one }])).toBe(0);
    expect(l.take([{ key: "a", rate: one }])).toBeGreaterThan(0);
    expect(l.take([{ key: "b", rate: one }])).toBe(0);
    for (let i = 0; i < 100; i++) expect(l.take([{ key: "free", rate: { perMinute: 0, burst: 1 } }])).toBe(0);
    expect(l.size).toBe(2);
  });

  test("all charged buckets or none: a refusal by one bucket costs the others nothing", () => {
    const l = new RateLimiter({ now: clock().now });
    const ip = { key: "ip", rate: { perMinute: 60, burst: 2 } };
    const pk = { key: "pk", rate: { perMinute: 60, burst: 1 } };
    expect(l.take([ip, pk])).toBe(0);
    expect(l.take([ip, pk])).toBe(1_000); // pk is empty
    expect(l.take([ip])).toBe(0); // ip still had its second token
    expect(l.take([ip])).toBe(1_000);
  });

  test("a rate lowered later (a reload) applies to existing buckets", () => {
    const c = clock();
    const l = new RateLimiter({ now: c.now });
    expect(l.take([{ key: "a", rate: { perMinute: 600, burst: 100 } }])).toBe(0);
    expect(l.take([{ key: "a", rate: { perMinute: 60, burst: 1 } }])).toBe(0); // 99 left, clamped to 1
    expect(l.take([{ key: "a", rate: { perMinute: 60, burst: 1 } }])).toBe(1_000);
  });

  test("buckets that have refilled completely are pruned", () => {
    const c = clock();
    const l = new RateLimiter({ now: c.now, pruneEveryMs: 60_000 });
    for (let i = 0; i < 50; i++) l.take([{ key: `ip${i}`, rate: sixPerMinute }]);
    l.take([{ key: "busy", rate: sixPerMinute }]);
    l.take([{ key: "busy", rate: sixPerMinute }]);
    l.take([{ key: "busy", rate: sixPerMinute }]);
    expect(l.size).toBe(51);
    c.t += 10_000; // one token back: the 50 are full again, "busy" is not
    l.prune();
    expect(l.size).toBe(1);
    // Lazily, on a take after pruneEveryMs.
    for (let i = 0; i < 50; i++) l.take([{ key: `more${i}`, rate: sixPerMinute }]);
    expect(l.size).toBe(51);
    c.t += 60_000;
    l.take([{ key: "x", rate: sixPerMinute }]);
    expect(l.size).toBe(1);
  });

  test("many keys never hold more than maxKeys buckets; the least recently used goes first", () => {
    const c = clock();
    const l = new RateLimiter({ now: c.now, maxKeys: 100 });
    const rate: Rate = { perMinute: 1, burst: 1 };
    l.take([{ key: "attacker", rate }]);
    let attackerPassed = 0;
    for (let i = 0; i < 10_000; i++) {
      l.take([{ key: `ip${i}`, rate }]);
      if (i % 50 === 0 && l.take([{ key: "attacker", rate }]) === 0) attackerPassed++; // refused, and so not forgotten
    }
    expect(l.size).toBe(100);
    expect(attackerPassed).toBe(0);
    expect(l.take([{ key: "ip0", rate }])).toBe(0); // long unused: dropped, so it starts full again
  });
});

describe("chargeRate and the EVENT policy", () => {
  const pk = "a".repeat(64);
  const setup = () => {
    const config = defaults();
    const r = config.rate_limits;
    r.events_per_minute = 60;
    r.events_burst = 2;
    r.pubkey_events_per_minute = 60;
    r.pubkey_events_burst = 1;
    return { config, limiter: new RateLimiter({ now: clock().now }) };
  };

  test("per IP; without an IP (import, sync, stream) nothing is charged", () => {
    const { config, limiter } = setup();
    const who = { ip: "203.0.113.1" };
    expect([chargeRate(config, limiter, "events", who), chargeRate(config, limiter, "events", who)]).toEqual([0, 0]);
    expect(chargeRate(config, limiter, "events", who)).toBe(1_000);
    expect(chargeRate(config, limiter, "events", { ip: "203.0.113.2" })).toBe(0);
    for (let i = 0; i < 10; i++) expect(chargeRate(config, limiter, "events", {})).toBe(0);
    expect(limiter.size).toBe(2);
  });

  test("loopback and private IPs are not charged (exempt_private_addresses), their pubkeys are; off: charged like any other", () => {
    const { config, limiter } = setup();
    for (const ip of ["127.0.0.1", "10.0.0.1", "192.168.1.2", "::1", "fd00::1"])
      for (let i = 0; i < 10; i++) expect(chargeRate(config, limiter, "events", { ip })).toBe(0);
    expect(limiter.size).toBe(0);
    const authed = new Set([pk]);
    expect(chargeRate(config, limiter, "events", { ip: "127.0.0.1", authed })).toBe(0);
    expect(chargeRate(config, limiter, "events", { ip: "127.0.0.1", authed })).toBe(1_000);
    config.rate_limits.exempt_private_addresses = false;
    const who = { ip: "127.0.0.1" };
    expect([chargeRate(config, limiter, "events", who), chargeRate(config, limiter, "events", who)]).toEqual([0, 0]);
    expect(chargeRate(config, limiter, "events", who)).toBe(1_000);
  });

  test("per authenticated pubkey, across IPs; admins are exempt", () => {
    const { config, limiter } = setup();
    const authed = new Set([pk]);
    expect(chargeRate(config, limiter, "events", { ip: "203.0.113.1", authed })).toBe(0);
    expect(chargeRate(config, limiter, "events", { ip: "203.0.113.2", authed })).toBe(1_000);
    config.admin.pubkeys = [pk];
    for (let i = 0; i < 10; i++) expect(chargeRate(config, limiter, "events", { ip: "203.0.113.3", authed })).toBe(0);
  });

  test("AUTHs are charged per IP only: the connection's pubkeys are not the ones asking, and have no bucket of their own", () => {
    const { config, limiter } = setup();
    config.rate_limits.auths_per_minute = 60;
    config.rate_limits.auths_burst = 2;
    const authed = new Set([pk]);
    const who = { ip: "203.0.113.1", authed };
    expect([chargeRate(config, limiter, "auths", who), chargeRate(config, limiter, "auths", who)]).toEqual([0, 0]);
    expect(chargeRate(config, limiter, "auths", who)).toBe(1_000);
    expect(chargeRate(config, limiter, "auths", { ip: "203.0.113.2", authed })).toBe(0);
    expect(limiter.size).toBe(2);
    expect(rateLimitMessage("auths", 1_000)).toBe("too many AUTH messages, try again in 1 s");
  });

  test("eventRate refuses with rate-limited and passes without a limiter", () => {
    const { config, limiter } = setup();
    const e = { id: "0".repeat(64), pubkey: pk, created_at: 0, kind: 1, tags: [], content: "", sig: "0".repeat(128) };
    const ctx = { config, now: 0, authed: new Set<string>(), relayUrl: "", ip: "203.0.113.9", rates: limiter };
    expect(eventRate(ctx, e)).toBeUndefined();
    expect(eventRate(ctx, e)).toBeUndefined();
    expect(eventRate(ctx, e)).toEqual({ prefix: "rate-limited", message: "too many events, try again in 1 s" });
    expect(eventRate({ ...ctx, rates: undefined }, e)).toBeUndefined();
  });

  test("an EVENT is charged its write cost: a heavy one takes a burst's worth, an ordinary one a token", () => {
    const { config, limiter } = setup();
    config.rate_limits.events_burst = 200;
    config.rate_limits.events_per_minute = 600;
    const ctx = { config, now: 0, authed: new Set<string>(), relayUrl: "", ip: "203.0.113.7", rates: limiter };
    const note = { id: "0".repeat(64), pubkey: pk, created_at: 0, kind: 1, tags: [["t", "x"]], content: "hi", sig: "0".repeat(128) };
    const heavy = { ...note, tags: Array.from({ length: 1800 }, (_, k) => ["t", `topic-${k}`]) };
    expect(eventRate(ctx, heavy)).toBeUndefined();
    expect(eventRate(ctx, heavy)?.prefix).toBe("rate-limited");
    // What the heavy one left is still there for ordinary notes.
    for (let i = 0; i < 50; i++) expect(eventRate(ctx, note)).toBeUndefined();
    // A cost above the burst takes a full bucket rather than never passing.
    expect(limiter.take([{ key: "k", rate: { perMinute: 60, burst: 5 } }], 50)).toBe(0);
    expect(limiter.take([{ key: "k", rate: { perMinute: 60, burst: 5 } }], 1)).toBe(1_000);
  });
});
