// NIP-05 verified writers over the wire (issue 33, [verified_users]): a real relay and a fake
// NIP-05 domain on 127.0.0.1 (test/fakes/nostr-json.ts), reached through http_loopback. The
// kind 0 that names the address is always accepted (nostr-rs-relay #211); the author's other
// events wait for the background check, and every way a domain can fail is bounded.
import { afterAll, afterEach, beforeAll, describe, expect, spyOn, test } from "bun:test";
import type { Nip05Checks } from "../src/access/nip05.ts";
import { adminCall, Client, failOnRelayErrors, signer, startTestRelay, waitUntil, type Signer, type TestRelay } from "./helpers.ts";
import { startFakeNostrJson, type FakeNostrJson } from "./fakes/nostr-json.ts";

failOnRelayErrors();

const admin = signer();
let fake: FakeNostrJson;
let relay: TestRelay;
let c: Client;
let logs: ReturnType<typeof spyOn>;
let warns: ReturnType<typeof spyOn>;

const settings = { mode: "enabled", http_loopback: true, domain_interval_ms: 0, fetch_timeout_ms: 1000 } as const;

beforeAll(async () => {
  fake = startFakeNostrJson();
  // The registry logs each withdrawal; the engine warns of refused addresses: both asserted below.
  logs = spyOn(console, "log").mockImplementation(() => {});
  warns = spyOn(console, "warn").mockImplementation(() => {});
  relay = await startTestRelay({ verified_users: { ...settings }, admin: { pubkeys: [admin.pubkey] } });
  c = await Client.connect(relay.url);
});

afterAll(async () => {
  c.close();
  await relay.stop();
  await fake.close();
  logs.mockRestore();
  warns.mockRestore();
});

afterEach(() => {
  // A test's slow names answer at once afterwards, so a later schedule's look over every row is quick.
  fake.modes.clear();
  // Tests that change the live config (as a reload does) put it back.
  Object.assign(relay.ctx.config.verified_users, { ...settings, domain_whitelist: [], domain_blacklist: [], max_consecutive_failures: 20 });
});

const checks = (r: TestRelay = relay) => r.ctx.access!.engines.nip05 as Nip05Checks;
const day = 86_400;
let names = 0;
/** A writer with a fresh name on the fake domain (so tests do not see each other's requests). */
function writer(): { s: Signer; name: string; address: string } {
  const name = `user${++names}`;
  return { s: signer(), name, address: `${name}@${fake.domain}` };
}
let tick = 0;
/** A kind 0, each a second newer than the last (a replaceable event of the same second may not replace). */
const profile = (s: Signer, nip05?: string) =>
  s.sign({
    kind: 0,
    created_at: Math.floor(Date.now() / 1000) + ++tick,
    content: JSON.stringify(nip05 === undefined ? { name: "x" } : { name: "x", nip05 }),
  });
const note = (s: Signer) => s.sign({ kind: 1, content: `note ${Math.random()}` });

/** OK of a kind 1 by `s`: [accepted, message]. */
async function noteOk(s: Signer, client = c): Promise<[boolean, string]> {
  const [, , ok, msg] = await client.publish(note(s));
  return [ok, msg];
}

/** Waits until the engine has settled `s`'s address in `state`. */
function settled(s: Signer, state: string, r: TestRelay = relay, timeoutMs = 5000): Promise<void> {
  return waitUntil(`${s.pubkey.slice(0, 8)}'s address ${state}`, () => checks(r).state(s.pubkey)?.state === state, timeoutMs);
}

/** Publishes the kind 0 (accepted with an address the lists allow: #211) and waits for its check to end in `state`. */
async function claim(w: { s: Signer; address: string }, state: string, r: TestRelay = relay, client = c): Promise<void> {
  expect(await client.publish(profile(w.s, w.address))).toEqual(["OK", expect.any(String), true, ""]);
  await settled(w.s, state, r);
}

describe("NIP-05 verified writers", () => {
  test("the kind 0 naming the address is accepted while unverified; a note before it is refused", async () => {
    const w = writer();
    expect(await noteOk(w.s)).toEqual([false, "restricted: publish a kind 0 with a NIP-05 address this relay can verify first"]);
    fake.modes.set(w.name, "hang");
    expect(await c.publish(profile(w.s, w.address))).toEqual(["OK", expect.any(String), true, ""]);
    expect(await noteOk(w.s)).toEqual([false, `restricted: your NIP-05 address ${w.address} is being checked, try again in a minute`]);
    // A profile without an address is not what the exception is for.
    const other = signer();
    expect((await c.publish(profile(other)))[2]).toBe(false);
  });

  test("verifying: nostr.json names the pubkey, then a note is OK true", async () => {
    const w = writer();
    fake.names.set(w.name, w.s.pubkey);
    await claim(w, "verified");
    expect(await noteOk(w.s)).toEqual([true, ""]);
    expect(fake.requestsFor(w.name)).toHaveLength(1);
    const row = await relay.ctx.store.admission.nip05(w.s.pubkey);
    expect(row).toMatchObject({ address: w.address, failures: 0, error: "" });
    expect(row!.verified_at).toBeNumber();
    // A profile that no longer names the address gives the verification up (and the row goes).
    expect((await c.publish(profile(w.s)))[2]).toBe(true);
    await waitUntil("the verification withdrawn", () => relay.ctx.access!.bits(w.s.pubkey) === 0, 5000);
    expect(await noteOk(w.s)).toEqual([false, "restricted: publish a kind 0 with a NIP-05 address this relay can verify first"]);
    expect(await relay.ctx.store.admission.nip05(w.s.pubkey)).toBeUndefined();
  });

  test("failing: another pubkey, or no such name, with the exact texts", async () => {
    const wrong = writer();
    fake.names.set(wrong.name, "ab".repeat(32));
    await claim(wrong, "failed");
    expect(await noteOk(wrong.s)).toEqual([
      false,
      `restricted: your NIP-05 address ${wrong.address} could not be verified (${wrong.address} does not name this pubkey)`,
    ]);
    const unknown = writer();
    await claim(unknown, "failed");
    expect(await noteOk(unknown.s)).toEqual([
      false,
      `restricted: your NIP-05 address ${unknown.address} could not be verified (${unknown.address} does not name this pubkey)`,
    ]);
    // A kind 0 whose nip05 is no address is judged as any event (issue 33 review, M1): nothing to verify.
    const bad = signer();
    const unknownText = "restricted: publish a kind 0 with a NIP-05 address this relay can verify first";
    expect((await c.publish(profile(bad, "not an address"))).slice(2)).toEqual([false, unknownText]);
    expect(await noteOk(bad)).toEqual([false, unknownText]);
  });

  test("revoking: the scheduled re-check finds nostr.json changed", async () => {
    const w = writer();
    fake.names.set(w.name, w.s.pubkey);
    await claim(w, "verified");
    expect(await noteOk(w.s)).toEqual([true, ""]);
    fake.names.set(w.name, "cd".repeat(32));
    // A day on: the schedule's look finds the address due.
    await checks().checkDue(Math.floor(Date.now() / 1000) + day + 60);
    await settled(w.s, "failed");
    expect(fake.requestsFor(w.name)).toHaveLength(2);
    expect(await noteOk(w.s)).toEqual([
      false,
      `restricted: your NIP-05 address ${w.address} could not be verified (${w.address} does not name this pubkey)`,
    ]);
    // (Its log line is one a minute per basis, so not asserted here: test/admission-store.test.ts.)
    expect((await relay.ctx.store.admission.rows()).some((r) => r.pubkey === w.s.pubkey && r.basis === "verified")).toBe(false);
  });

  test("an operator's revoke holds until the author's next kind 0", async () => {
    const w = writer();
    fake.names.set(w.name, w.s.pubkey);
    await claim(w, "verified");
    // NIP-86 lists the verification with its evidence, and revokes it.
    const listed = await adminCall(relay.url, admin, "listadmissions", ["verified"]);
    const mine = listed.body.result.find((x: { pubkey: string }) => x.pubkey === w.s.pubkey);
    expect(mine.bases).toEqual([
      {
        basis: "verified",
        since: expect.any(Number),
        until: expect.any(Number),
        evidence: { address: w.address, verified_at: expect.any(Number), checked_at: expect.any(Number) },
      },
    ]);
    expect(mine.bases[0].until - mine.bases[0].evidence.verified_at).toBe(7 * day);
    expect(await adminCall(relay.url, admin, "revokeadmission", [w.s.pubkey, "verified", "spam"])).toEqual({
      status: 200,
      body: { result: true },
    });
    const text = `restricted: your NIP-05 address ${w.address} could not be verified (revoked by an operator; not checked again until a new kind 0)`;
    expect(await noteOk(w.s)).toEqual([false, text]);
    // checkDue resolves once each due row is decided (a fetch would have been started by then).
    await checks().checkDue(Math.floor(Date.now() / 1000) + 2 * day);
    expect(fake.requestsFor(w.name)).toHaveLength(1);
    expect(await noteOk(w.s)).toEqual([false, text]);
    await claim(w, "verified");
    expect(await noteOk(w.s)).toEqual([true, ""]);
  });

  test("a 50 MB nostr.json is cut at the size cap", async () => {
    const w = writer();
    fake.modes.set(w.name, "huge");
    const t0 = performance.now();
    await claim(w, "failed");
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(await noteOk(w.s)).toEqual([
      false,
      `restricted: your NIP-05 address ${w.address} could not be verified (response larger than 64 KiB)`,
    ]);
    expect(fake.hugeBytesSent()).toBeLessThan(20 * 1024 * 1024);
  });

  test("a redirect loop is not followed", async () => {
    const w = writer();
    fake.modes.set(w.name, "redirect-loop");
    await claim(w, "failed");
    expect(await noteOk(w.s)).toEqual([
      false,
      `restricted: your NIP-05 address ${w.address} could not be verified (redirects are not followed)`,
    ]);
    expect(fake.requestsFor(w.name)).toHaveLength(1);
  });

  test("a domain that never answers, or trickles, times out at fetch_timeout_ms", async () => {
    const w = writer();
    const t = writer();
    fake.modes.set(w.name, "hang");
    fake.modes.set(t.name, "trickle");
    fake.names.set(t.name, t.s.pubkey);
    const t0 = performance.now();
    await Promise.all([claim(w, "failed"), claim(t, "failed")]);
    expect(performance.now() - t0).toBeLessThan(4500);
    for (const x of [w, t])
      expect(await noteOk(x.s)).toEqual([
        false,
        `restricted: your NIP-05 address ${x.address} could not be verified (no answer within 1000 ms)`,
      ]);
  });

  test("one domain is fetched domain_interval_ms apart", async () => {
    // Starts are 500 ms apart; arrivals at the domain a little less under load (a request may be slower to arrive than the next).
    relay.ctx.config.verified_users.domain_interval_ms = 500;
    const ws = [writer(), writer(), writer(), writer()];
    for (const w of ws) fake.names.set(w.name, w.s.pubkey);
    await Promise.all(ws.map((w) => claim(w, "verified")));
    const times = ws.map((w) => fake.requestsFor(w.name)[0]!.at).sort((a, b) => a - b);
    for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(400);
  });

  test("the domain lists refuse with their texts, without a fetch", async () => {
    // A stranger's kind 0 naming a refused domain is itself refused, with the list's text (issue 33 review, M1).
    const black = writer();
    relay.ctx.config.verified_users.domain_blacklist = ["127.0.0.1"];
    fake.names.set(black.name, black.s.pubkey);
    const blackText = "blocked: NIP-05 addresses of 127.0.0.1 may not publish here";
    expect((await c.publish(profile(black.s, black.address))).slice(2)).toEqual([false, blackText]);
    relay.ctx.config.verified_users.domain_blacklist = [];
    relay.ctx.config.verified_users.domain_whitelist = ["a.example", "b.example", "c.example", "d.example"];
    const white = writer();
    fake.names.set(white.name, white.s.pubkey);
    expect((await c.publish(profile(white.s, white.address))).slice(2)).toEqual([
      false,
      "restricted: only NIP-05 addresses of a.example, b.example, c.example, … may publish here",
    ]);
    expect(fake.requestsFor(black.name).length + fake.requestsFor(white.name).length).toBe(0);
    // Listed, the domain is checked as any other.
    relay.ctx.config.verified_users.domain_whitelist = ["127.0.0.1"];
    await claim(white, "verified");
    expect(await noteOk(white.s)).toEqual([true, ""]);
  });

  test("http_loopback off: the loopback address is refused, with a warning", async () => {
    relay.ctx.config.verified_users.http_loopback = false;
    const w = writer();
    fake.names.set(w.name, w.s.pubkey);
    warns.mockClear();
    await claim(w, "refused");
    expect(await noteOk(w.s)).toEqual([
      false,
      `restricted: your NIP-05 address ${w.address} could not be verified (127.0.0.1 is a private or loopback address: not fetched)`,
    ]);
    expect(fake.requestsFor(w.name)).toHaveLength(0);
    expect(warns.mock.calls.map((a: unknown[]) => a.join(" ")).join("\n")).toContain(`warning: NIP-05 address ${w.address} not checked`);
  });

  test("a fault keeps a verified writer until the verification expires", async () => {
    const w = writer();
    fake.names.set(w.name, w.s.pubkey);
    await claim(w, "verified");
    fake.modes.set(w.name, "500");
    const t = Math.floor(Date.now() / 1000);
    await checks().checkDue(t + day + 60);
    await waitForRequests(w.name, 2);
    // The state carries the fault once the engine has recorded it (row, then state).
    await waitUntil("the fault recorded", () => checks().state(w.s.pubkey)?.error === "HTTP 500", 5000);
    expect(await noteOk(w.s)).toEqual([true, ""]);
    expect((await relay.ctx.store.admission.nip05(w.s.pubkey))!.failures).toBe(1);
    // A week on (the engine's clock moved; the registry's until has passed too), the next fault withdraws it.
    const engine = checks();
    const real = engine.clock;
    engine.clock = () => t + 7 * day + 60;
    try {
      await engine.checkDue(t + 7 * day + 60);
      await settled(w.s, "failed");
    } finally {
      engine.clock = real;
    }
    expect(await noteOk(w.s)).toEqual([false, `restricted: your NIP-05 address ${w.address} could not be verified (HTTP 500)`]);
  });

  test("after max_consecutive_failures the address is not fetched again until a new kind 0", async () => {
    relay.ctx.config.verified_users.max_consecutive_failures = 2;
    const w = writer();
    fake.modes.set(w.name, "500");
    await claim(w, "failed");
    const t = Math.floor(Date.now() / 1000);
    await checks().checkDue(t + day + 60);
    await waitForRequests(w.name, 2);
    const gaveUp = "HTTP 500; not checked again until a new kind 0";
    await waitUntil("the second fault recorded", () => checks().state(w.s.pubkey)?.error === gaveUp, 5000);
    expect(await noteOk(w.s)).toEqual([
      false,
      `restricted: your NIP-05 address ${w.address} could not be verified (HTTP 500; not checked again until a new kind 0)`,
    ]);
    // checkDue resolves once each due row is decided (a fetch would have been started by then).
    await checks().checkDue(t + 3 * day);
    expect(fake.requestsFor(w.name)).toHaveLength(2);
    // The author fixes the domain and says so with a new kind 0.
    fake.modes.delete(w.name);
    fake.names.set(w.name, w.s.pubkey);
    await claim(w, "verified");
    expect(fake.requestsFor(w.name)).toHaveLength(3);
    expect(await noteOk(w.s)).toEqual([true, ""]);
  });
});

test("/metrics counts the checks by result, and the queue", async () => {
  const text = await (await fetch(`http://127.0.0.1:${relay.server.port}/metrics`)).text();
  const value = (series: string) => Number(new RegExp(`^${series.replace(/[{}"]/g, "\\$&")} (\\d+)$`, "m").exec(text)?.[1]);
  const counted = checks().metrics.nip05Checks;
  expect(counted.verified).toBeGreaterThanOrEqual(5);
  expect(counted.mismatch).toBeGreaterThanOrEqual(3);
  expect(counted.failed).toBeGreaterThanOrEqual(6);
  expect(counted.refused).toBeGreaterThanOrEqual(1);
  for (const result of ["verified", "mismatch", "failed", "refused"] as const)
    expect(value(`bunstr_nip05_checks_total{result="${result}"}`)).toBe(counted[result]);
  expect(value("bunstr_nip05_queue")).toBe(checks().queued);
});

describe("passive mode", () => {
  test("checks and records, and never refuses", async () => {
    const passive = await startTestRelay({ verified_users: { ...settings, mode: "passive" } });
    const pc = await Client.connect(passive.url);
    try {
      const w = writer();
      expect(await noteOk(w.s, pc)).toEqual([true, ""]);
      fake.names.set(w.name, "ef".repeat(32));
      await claim(w, "failed", passive, pc);
      expect(await noteOk(w.s, pc)).toEqual([true, ""]);
      const v = writer();
      fake.names.set(v.name, v.s.pubkey);
      await claim(v, "verified", passive, pc);
      expect((await passive.ctx.store.admission.nip05(v.s.pubkey))!.verified_at).toBeNumber();
      // Recorded, not admitted: the registry holds no verified row.
      expect((await passive.ctx.store.admission.rows()).filter((r) => r.basis === "verified")).toEqual([]);
    } finally {
      pc.close();
      await passive.stop();
    }
  });
});

function waitForRequests(name: string, n: number): Promise<void> {
  return waitUntil(`${n} requests for ${name}`, () => fake.requestsFor(name).length >= n, 5000);
}
