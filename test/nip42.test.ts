// NIP-42 over a real websocket: challenge on connect, AUTH answered with OK, every check before
// the pubkey is trusted, several pubkeys per connection, auth = "always" for EVENT and REQ.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Client, fence, now, signer, startTestRelay, type TestRelay } from "./helpers.ts";

let relay: TestRelay;
let open: TestRelay;
beforeAll(async () => {
  relay = await startTestRelay({ options: { auth: "always" } });
  open = await startTestRelay({ info: { relay_url: "wss://relay.example.com/" } });
});
afterAll(async () => {
  await relay.stop();
  await open.stop();
});

async function connectWithChallenge(url: string): Promise<[Client, string]> {
  const c = await Client.connect(url);
  const auth = await c.next((f) => f[0] === "AUTH");
  expect(typeof auth[1]).toBe("string");
  return [c, auth[1]];
}

const authEvent = (s: ReturnType<typeof signer>, challenge: string, relayUrl: string, created_at = now()) =>
  s.sign({
    kind: 22242,
    created_at,
    tags: [
      ["relay", relayUrl],
      ["challenge", challenge],
    ],
  });

async function auth(c: Client, e: object & { id: string }) {
  const from = c.frames.length;
  c.send(["AUTH", e]);
  return c.next((f) => f[0] === "OK" && f[1] === e.id, 5000, from);
}

test("auth always: EVENT and REQ refused with auth-required: until AUTH succeeds", async () => {
  const [c, challenge] = await connectWithChallenge(relay.url);
  const s = signer();
  const e = s.sign({ kind: 1, content: "hi" });
  const refused = await c.publish(e);
  expect(refused[2]).toBe(false);
  expect(refused[3]).toStartWith("auth-required:");
  expect((await c.req("r", { kinds: [1] })).end).toEqual(["CLOSED", "r", "auth-required: this relay requires authentication"]);
  expect(await auth(c, authEvent(s, challenge, relay.url))).toEqual(["OK", expect.any(String), true, ""]);
  expect((await c.publish(e))[2]).toBe(true);
  expect((await c.req("r2", { ids: [e.id] })).events.map((x) => x.id)).toEqual([e.id]);
  c.close();
});

test("AUTH is refused for a wrong challenge, kind, relay, stale time or bad signature", async () => {
  const [c, challenge] = await connectWithChallenge(relay.url);
  const s = signer();
  const cases = [
    authEvent(s, "not-the-challenge", relay.url),
    s.sign({
      kind: 1,
      tags: [
        ["relay", relay.url],
        ["challenge", challenge],
      ],
    }),
    authEvent(s, challenge, "wss://other.example.com/"),
    authEvent(s, challenge, relay.url, now() - 3600),
    { ...authEvent(s, challenge, relay.url), sig: "0".repeat(128) },
  ];
  for (const e of cases) {
    const ok = await auth(c, e);
    expect(ok[2]).toBe(false);
    expect(ok[3]).toStartWith("invalid:");
  }
  // None of them authenticated the connection.
  expect((await c.publish(s.sign({ kind: 1 })))[3]).toStartWith("auth-required:");
  c.close();
});

test("several pubkeys can authenticate on one connection", async () => {
  const [c, challenge] = await connectWithChallenge(relay.url);
  const a = signer();
  const b = signer();
  expect((await auth(c, authEvent(a, challenge, relay.url)))[2]).toBe(true);
  expect((await auth(c, authEvent(b, challenge, relay.url)))[2]).toBe(true);
  expect((await c.publish(b.sign({ kind: 1 })))[2]).toBe(true);
  c.close();
});

test("the relay tag is checked against info.relay_url when set", async () => {
  const [c, challenge] = await connectWithChallenge(open.url);
  const s = signer();
  expect((await auth(c, authEvent(s, challenge, open.url)))[3]).toStartWith("invalid: AUTH relay tag");
  expect((await auth(c, authEvent(s, challenge, "wss://relay.example.com")))[2]).toBe(true);
  c.close();
});

test("the relay tag must be the configured relay URL, normalized: not another path, scheme or port", async () => {
  const nostr = await startTestRelay({ info: { relay_url: "wss://relay.example.com/nostr" } });
  try {
    const tries: [url: string, tag: string, ok: boolean][] = [
      [open.url, "wss://relay.example.com/", true],
      [open.url, "wss://relay.example.com", true],
      [open.url, "wss://RELAY.Example.com:443/", true],
      [open.url, "wss://relay.example.com/other", false],
      [open.url, "wss://relay.example.com/?x", true], // a query names the same endpoint
      [open.url, "ws://relay.example.com/", false],
      [open.url, "https://relay.example.com/", false],
      [open.url, "wss://relay.example.com:444/", false],
      [open.url, "wss://relay.example.com.evil.example/", false],
      [nostr.url, "wss://relay.example.com/nostr", true],
      [nostr.url, "wss://relay.example.com/nostr/", true],
      [nostr.url, "wss://relay.example.com/", false],
      [nostr.url, "wss://relay.example.com/nostr/x", false],
    ];
    const got: [string, boolean][] = [];
    for (const [url, tag] of tries) {
      const [c, challenge] = await connectWithChallenge(url);
      got.push([tag, (await auth(c, authEvent(signer(), challenge, tag)))[2]]);
      c.close();
    }
    expect(got).toEqual(tries.map(([, tag, ok]) => [tag, ok]));
  } finally {
    await nostr.stop();
  }
});

test("without info.relay_url: this request's host and the relay's path, over ws or wss (a TLS proxy hides which)", async () => {
  const base = relay.url.replace(/^ws:\/\//, "").replace(/\/$/, ""); // 127.0.0.1:port
  const tries: [tag: string, ok: boolean][] = [
    [`ws://${base}/`, true],
    [`wss://${base}`, true],
    [`ws://${base}/somewhere-else`, false],
    [`ws://localhost:1/`, false],
  ];
  const got: [string, boolean][] = [];
  for (const [tag] of tries) {
    const [c, challenge] = await connectWithChallenge(relay.url);
    got.push([tag, (await auth(c, authEvent(signer(), challenge, tag)))[2]]);
    c.close();
  }
  expect(got).toEqual(tries);
});

test("kind 22242 sent as EVENT is refused, never stored or broadcast", async () => {
  const [c, challenge] = await connectWithChallenge(open.url);
  const listener = await Client.connect(open.url);
  await listener.req("all", { kinds: [22242] });
  const e = authEvent(signer(), challenge, "wss://relay.example.com");
  const pass = await fence(listener, c);
  const ok = await c.publish(e);
  expect(ok[2]).toBe(false);
  expect(ok[3]).toStartWith("invalid:");
  await pass(); // a broadcast of it would have come before the fence event
  expect(listener.eventsFor("all")).toEqual([]);
  c.close();
  listener.close();
});

test("pipelined AUTHs are held to a few verifying at once: the rest get OK false rate-limited:, every one is answered", async () => {
  const [c, challenge] = await connectWithChallenge(relay.url);
  // Valid ids, forged signatures: each costs the client a hash and the relay a signature check.
  // Twelve: fewer in-flight refusals than close the connection (the next test).
  const forged = Array.from({ length: 12 }, (_, i) => ({ ...authEvent(signer(), challenge, relay.url, now() - i), sig: "0".repeat(128) }));
  const from = c.frames.length;
  for (const e of forged) c.send(["AUTH", e]);
  const ids = new Set(forged.map((e) => e.id));
  await c.next(() => c.frames.slice(from).filter((f) => f[0] === "OK" && ids.has(f[1])).length >= forged.length, 10_000, from);
  const oks = c.frames.slice(from).filter((f) => f[0] === "OK" && ids.has(f[1]));
  expect(oks.every((f) => f[2] === false)).toBe(true);
  const limited = oks.filter((f) => String(f[3]).startsWith("rate-limited: too many AUTH messages in flight"));
  const checked = oks.filter((f) => f[3] === "invalid: signature verification failed");
  expect(limited.length).toBeGreaterThan(0);
  expect(checked.length).toBeGreaterThan(0);
  expect(limited.length + checked.length).toBe(forged.length);
  expect(c.closed).toBe(false);
  c.close();
});

test("a connection that keeps flooding AUTHs is closed (1008) after 16 rate-limited refusals", async () => {
  const [c, challenge] = await connectWithChallenge(relay.url);
  const forged = Array.from({ length: 100 }, (_, i) => ({ ...authEvent(signer(), challenge, relay.url, now() - i), sig: "0".repeat(128) }));
  const from = c.frames.length;
  for (const e of forged) c.send(["AUTH", e]);
  for (const deadline = Date.now() + 10_000; !c.closed; await Bun.sleep(5)) if (Date.now() > deadline) throw new Error("not closed");
  expect(c.closeCode).toBe(1008);
  const limited = c.frames.slice(from).filter((f) => f[0] === "OK" && String(f[3]).startsWith("rate-limited:"));
  expect(limited.length).toBeGreaterThanOrEqual(16);
  expect(limited.length).toBeLessThan(forged.length - 4);
});
