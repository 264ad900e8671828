import { describe, expect, test } from "bun:test";
import type { Config } from "../config/schema.ts";
import type { NostrEvent } from "../protocol/event.ts";
import type { Leadership, Nip05Row } from "../store/types.ts";
import { FETCHES_AT_ONCE, Nip05Checks, QUEUE_MAX, SITE_MAX } from "./nip05.ts";
import type { FetchOutcome } from "./nip05-fetch.ts";

const pk = (i: number) => i.toString(16).padStart(64, "0");
const profile = (pubkey: string, nip05?: string): NostrEvent =>
  ({
    id: "",
    sig: "",
    pubkey,
    kind: 0,
    created_at: 0,
    tags: [],
    content: JSON.stringify(nip05 === undefined ? { name: "x" } : { nip05 }),
  }) as NostrEvent;

interface Call {
  url: string;
  at: number;
  answer(o: FetchOutcome): void;
}

/** The engine with an in-memory store and registry, and fetches the test answers by hand. */
function rig(settings: Partial<Config["verified_users"]> = {}, leader?: Leadership) {
  const verified_users = {
    mode: "enabled",
    domain_whitelist: [],
    domain_blacklist: [],
    verify_expiration: "1 week",
    verify_update_frequency: "24 hours",
    max_consecutive_failures: 3,
    http_loopback: false,
    fetch_timeout_ms: 5000,
    max_response_bytes: 65536,
    domain_interval_ms: 0,
    ...settings,
  } as Config["verified_users"];
  const rows = new Map<string, Nip05Row>();
  const admitted = new Map<string, number | undefined>();
  const log: string[] = [];
  const calls: Call[] = [];
  const checks = new Nip05Checks({
    config: () => ({ verified_users }) as Config,
    store: {
      nip05: async (p) => (rows.has(p) ? { ...rows.get(p)! } : undefined),
      putNip05: async (r) => void rows.set(r.pubkey, { ...r }),
      removeNip05: async (p) => void rows.delete(p),
      dueNip05: async (before, max) =>
        [...rows.values()]
          .filter((r) => r.checked_at < before)
          // As the stores order it (test/admission-store.test.ts): verified rows first, then by last check.
          .sort((a, b) => Number(a.verified_at === null) - Number(b.verified_at === null) || a.checked_at - b.checked_at)
          .slice(0, max),
    },
    registry: {
      admit: async (p, basis, _evidence, until) => {
        log.push(`admit ${basis} ${p.slice(-2)}`);
        admitted.set(p, until);
      },
      revoke: async (p, basis, reason) => {
        log.push(`revoke ${basis} ${p.slice(-2)}: ${reason}`);
        admitted.delete(p);
      },
    },
    fetch: (url) => new Promise<FetchOutcome>((answer) => calls.push({ url, at: Date.now(), answer })),
    ...(leader ? { leader } : {}),
  });
  checks.clock = () => 1_000_000;
  const names = (name: string, pubkey: string): FetchOutcome => ({ kind: "json", json: { names: { [name]: pubkey } } });
  // The fakes answer in microtasks and nothing here waits on a timer (domain_interval_ms 0), so
  // the engine has done all it can with what it was given once the microtask queue is empty: a
  // setImmediate callback runs only then. No time passes, so a busy machine cannot make it early.
  const settle = () => new Promise<void>((done) => setImmediate(done));
  return { checks, rows, admitted, log, calls, names, settle, settings: verified_users };
}

describe("Nip05Checks", () => {
  test("a match admits until the expiry; a later mismatch withdraws at once", async () => {
    const r = rig();
    r.checks.committed(profile(pk(1), "Bob@Example.com"));
    expect(r.checks.state(pk(1))).toEqual({ address: "bob@example.com", state: "pending" });
    await r.settle();
    expect(r.calls.map((c) => c.url)).toEqual(["https://example.com/.well-known/nostr.json?name=bob"]);
    r.calls[0]!.answer(r.names("bob", pk(1)));
    await r.settle();
    expect(r.admitted.get(pk(1))).toBe(1_000_000 + 604_800);
    expect(r.checks.state(pk(1))).toEqual({ address: "bob@example.com", state: "verified" });
    expect(r.rows.get(pk(1))).toMatchObject({ verified_at: 1_000_000, failures: 0 });
    // A day later the schedule checks again, and the domain names someone else now.
    await r.checks.checkDue(1_000_000 + 86_401);
    await r.settle();
    r.calls[1]!.answer(r.names("bob", pk(2)));
    await r.settle();
    expect(r.admitted.has(pk(1))).toBe(false);
    expect(r.log.at(-1)).toBe("revoke verified 01: bob@example.com does not name this pubkey");
    expect(r.checks.state(pk(1))).toMatchObject({ state: "failed", error: "bob@example.com does not name this pubkey" });
    expect(r.checks.metrics.nip05Checks).toEqual({ verified: 1, mismatch: 1, failed: 0, refused: 0 });
  });

  test("a fault keeps a verification until it expires; max failures stop the checks until a new kind 0", async () => {
    const r = rig();
    r.checks.committed(profile(pk(1), "bob@example.com"));
    await r.settle();
    r.calls[0]!.answer(r.names("bob", pk(1)));
    await r.settle();
    r.checks.committed(profile(pk(1), "bob@example.com"));
    await r.settle();
    r.calls[1]!.answer({ kind: "fault", error: "HTTP 500" });
    await r.settle();
    expect(r.admitted.has(pk(1))).toBe(true);
    expect(r.rows.get(pk(1))).toMatchObject({ verified_at: 1_000_000, failures: 1, error: "HTTP 500" });
    // Past the expiry, the next fault withdraws it.
    r.checks.clock = () => 1_000_000 + 604_800;
    await r.checks.checkDue();
    await r.settle();
    r.calls[2]!.answer({ kind: "fault", error: "no answer within 5000 ms" });
    await r.settle();
    expect(r.admitted.has(pk(1))).toBe(false);
    expect(r.log.at(-1)).toBe("revoke verified 01: verification expired (no answer within 5000 ms)");
    // The third failure in a row gives up: the schedule fetches no more.
    await r.checks.checkDue(1_000_000 + 604_800 * 2);
    await r.settle();
    r.calls[3]!.answer({ kind: "fault", error: "HTTP 500" });
    await r.settle();
    expect(r.rows.get(pk(1))).toMatchObject({ failures: 3, error: "HTTP 500; not checked again until a new kind 0" });
    await r.checks.checkDue(1_000_000 + 604_800 * 3);
    await r.settle();
    expect(r.calls).toHaveLength(4);
    // A new kind 0 starts over.
    r.checks.committed(profile(pk(1), "bob@example.com"));
    await r.settle();
    expect(r.calls).toHaveLength(5);
    expect(r.rows.get(pk(1))!.failures).toBe(0);
  });

  test("passive mode checks and records, and never admits or withdraws", async () => {
    const r = rig({ mode: "passive" });
    r.checks.committed(profile(pk(1), "bob@example.com"));
    await r.settle();
    r.calls[0]!.answer(r.names("bob", pk(1)));
    await r.settle();
    expect(r.checks.state(pk(1))!.state).toBe("verified");
    expect(r.rows.get(pk(1))!.verified_at).toBe(1_000_000);
    r.checks.committed(profile(pk(1)));
    await r.settle();
    expect(r.log).toEqual([]);
    expect(r.rows.has(pk(1))).toBe(false);
  });

  test("a profile naming another address, or none, withdraws the old verification; a stale answer is dropped", async () => {
    const r = rig();
    r.checks.committed(profile(pk(1), "bob@example.com"));
    await r.settle();
    r.calls[0]!.answer(r.names("bob", pk(1)));
    await r.settle();
    r.checks.committed(profile(pk(1), "bob@other.example"));
    await r.settle();
    expect(r.log.at(-1)).toBe("revoke verified 01: the profile names another address (bob@other.example)");
    expect(r.rows.get(pk(1))).toMatchObject({ address: "bob@other.example", verified_at: null });
    // While other.example is fetched, the profile drops the address: its answer no longer counts.
    r.checks.committed(profile(pk(1)));
    r.calls[1]!.answer(r.names("bob", pk(1)));
    await r.settle();
    expect(r.admitted.has(pk(1))).toBe(false);
    expect(r.rows.has(pk(1))).toBe(false);
    expect(r.checks.state(pk(1))).toBeUndefined();
  });

  test("the domain lists refuse without a fetch; addresses that are not addresses fail", async () => {
    const r = rig({ domain_blacklist: ["bad.example"], domain_whitelist: ["good.example", "bad.example"] });
    r.checks.committed(profile(pk(1), "bob@bad.example"));
    r.checks.committed(profile(pk(2), "bob@elsewhere.example"));
    r.checks.committed(profile(pk(3), "not an address"));
    r.checks.committed(profile(pk(4), "bob@good.example"));
    await r.settle();
    expect(r.checks.state(pk(1))).toEqual({
      address: "bob@bad.example",
      state: "refused",
      error: "bad.example is on the relay's domain blacklist",
    });
    expect(r.checks.state(pk(2))).toMatchObject({ state: "refused", error: "elsewhere.example is not on the relay's domain whitelist" });
    expect(r.checks.state(pk(3))).toEqual({ address: "not an address", state: "failed", error: "not a NIP-05 address" });
    expect(r.calls.map((c) => c.url)).toEqual(["https://good.example/.well-known/nostr.json?name=bob"]);
    // Refused rows are not fetched by the schedule either.
    await r.checks.checkDue(2_000_000);
    await r.settle();
    expect(r.calls).toHaveLength(1);
    // A domain blacklisted after its writer was verified (a reload): the schedule withdraws it, and it stays withdrawn.
    r.calls[0]!.answer(r.names("bob", pk(4)));
    await r.settle();
    expect(r.admitted.has(pk(4))).toBe(true);
    r.settings.domain_blacklist = ["bad.example", "good.example"];
    await r.checks.checkDue(3_000_000);
    await r.checks.checkDue(4_000_000);
    expect(r.admitted.has(pk(4))).toBe(false);
    expect(r.rows.get(pk(4))).toMatchObject({
      verified_at: null,
      checked_at: 4_000_000,
      error: "good.example is on the relay's domain blacklist",
    });
    expect(r.calls).toHaveLength(1);
    // What is not an address is kept short.
    r.checks.committed(profile(pk(5), "x".repeat(10_000)));
    await r.settle();
    expect(r.checks.state(pk(5))!.address).toHaveLength(64);
    expect(r.rows.get(pk(5))!.address).toHaveLength(64);
  });

  test("one fetch per domain at a time, domain_interval_ms apart, FETCHES_AT_ONCE in all", async () => {
    const r = rig({ domain_interval_ms: 100 });
    for (let i = 1; i <= 3; i++) r.checks.committed(profile(pk(i), `u${i}@one.example`));
    for (let i = 0; i < 20; i++) r.checks.committed(profile(pk(100 + i), `u@d${i}.example`));
    await r.settle();
    // d0..d19 and one.example: 21 domains ready, 8 started.
    expect(r.calls).toHaveLength(FETCHES_AT_ONCE);
    expect(r.checks.queued).toBe(23);
    expect(r.checks.metrics.nip05Queue).toBe(23);
    // Each fetch is answered as it starts (answering one twice does nothing) until all 23 have run:
    // one.example's three are domain_interval_ms apart, so this takes ~200 ms of timers.
    for (const deadline = Date.now() + 10_000; r.calls.length < 23 && Date.now() < deadline; await Bun.sleep(20))
      for (const c of r.calls) c.answer({ kind: "fault", error: "x" });
    const one = r.calls.filter((c) => c.url.includes("one.example"));
    expect(one).toHaveLength(3);
    expect(one[1]!.at - one[0]!.at).toBeGreaterThanOrEqual(99);
    expect(one[2]!.at - one[1]!.at).toBeGreaterThanOrEqual(99);
    for (const c of r.calls) c.answer({ kind: "fault", error: "x" });
    await r.settle();
    expect(r.checks.queued).toBe(0);
  });

  test("the queue is bounded; what it drops the schedule picks up", async () => {
    const r = rig();
    // 120 sites, fewer than SITE_MAX each: the queue's own bound is what drops; FETCHES_AT_ONCE run.
    for (let i = 1; i <= QUEUE_MAX + 20; i++) r.checks.committed(profile(pk(i), `u${i}@d${i % 120}.example`));
    expect(r.checks.queued).toBe(QUEUE_MAX + FETCHES_AT_ONCE);
    await r.settle();
    expect(r.rows.size).toBe(QUEUE_MAX + 20);
    expect(r.rows.get(pk(QUEUE_MAX + 20))!.checked_at).toBe(0);
  });

  test("a flood of new addresses on one wildcard domain does not starve a verified writer's re-check (issue 33 review, M2)", async () => {
    const r = rig();
    const now = 1_000_000;
    // A verified writer, last checked two days ago: due.
    const legit = pk(1);
    r.rows.set(legit, {
      pubkey: legit,
      address: "alice@good.example",
      verified_at: now - 2 * 86400,
      checked_at: now - 2 * 86400,
      failures: 0,
      error: "",
    });
    // Kind 0s of throwaway keys naming endless subdomains of a domain that never answers.
    for (let i = 0; i < QUEUE_MAX + 1000; i++) r.checks.committed(profile(pk(1000 + i), `x@h${i}.attacker.example`));
    await r.settle();
    // One site: one fetch in flight, SITE_MAX waiting; the rest wait in the store.
    expect(r.calls).toHaveLength(1);
    expect(r.checks.queued).toBe(SITE_MAX + 1);
    // A new user on another domain is not crowded out either.
    r.checks.committed(profile(pk(2), "bob@other.example"));
    for (let round = 0; round < 3; round++) await r.checks.checkDue(now);
    await r.settle();
    const urls = r.calls.map((c) => c.url);
    expect(urls).toContain("https://good.example/.well-known/nostr.json?name=alice");
    expect(urls).toContain("https://other.example/.well-known/nostr.json?name=bob");
    r.calls.find((c) => c.url.includes("good.example"))!.answer(r.names("alice", legit));
    await r.settle();
    expect(r.rows.get(legit)).toMatchObject({ verified_at: now, checked_at: now });
    // The flood's rows the queue refused are looked at again later, not at every pass: the page moves on.
    const later = [...r.rows.values()].filter((row) => row.address.endsWith("attacker.example") && row.checked_at > 0);
    expect(later.length).toBeGreaterThan(0);
    r.checks.stop();
  });

  test("with several nodes, only the leading one checks kind 0s and runs the schedule (issue 33 review, M7)", async () => {
    let answer = () => {};
    const lead = { leading: false, first: new Promise<void>((r) => (answer = r)) };
    const r = rig({}, lead);
    // Before the leadership is known, a kind 0 waits for it.
    r.checks.committed(profile(pk(1), "bob@example.com"));
    await r.settle();
    expect(r.calls).toHaveLength(0);
    lead.leading = true;
    answer();
    await r.settle();
    expect(r.calls.map((c) => c.url)).toEqual(["https://example.com/.well-known/nostr.json?name=bob"]);
    // Another node leads now: this one neither checks a new kind 0 nor looks for due rows.
    lead.leading = false;
    r.checks.committed(profile(pk(2), "carol@example.org"));
    r.rows.set(pk(3), { pubkey: pk(3), address: "dan@example.net", verified_at: 1, checked_at: 1, failures: 0, error: "" });
    await r.checks.checkDue(2_000_000);
    await r.settle();
    expect(r.calls).toHaveLength(1);
    expect(r.rows.has(pk(2))).toBe(false);
    r.checks.stop();
  });

  test("a named port other than 443 is refused without a fetch unless http_loopback (issue 33 review, L4)", async () => {
    const r = rig({ domain_whitelist: ["allowed.example"] });
    r.checks.committed(profile(pk(1), "bob@allowed.example:8443"));
    r.checks.committed(profile(pk(2), "bob@allowed.example:443"));
    await r.settle();
    expect(r.checks.state(pk(1))).toMatchObject({ state: "refused", error: "only the default https port (443) is fetched" });
    expect(r.calls.map((c) => c.url)).toEqual(["https://allowed.example:443/.well-known/nostr.json?name=bob"]);
    const t = rig({ http_loopback: true });
    t.checks.committed(profile(pk(1), "bob@127.0.0.1:8080"));
    await t.settle();
    expect(t.calls.map((c) => c.url)).toEqual(["http://127.0.0.1:8080/.well-known/nostr.json?name=bob"]);
  });
});
