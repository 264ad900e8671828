// [rate_limits] over the wire: EVENT, REQ, COUNT, NEG-OPEN and new connections trip with their
// `rate-limited:` answer (HTTP 429 for a connection) and recover once tokens refill; per-pubkey
// buckets follow an AUTHed pubkey across connections; admins are exempt; a reload takes effect.
// By default loopback and private clients are not limited per IP (a reverse proxy on the same host
// speaks for everyone), a client behind a trusted proxy is; a proxy the config does not read is
// reported once.
import { afterEach, expect, spyOn, test } from "bun:test";
import { connect as tcpConnect } from "node:net";
import { nip77 } from "nostr-tools";
import { defaults, type Config } from "../src/config/schema.ts";
import { RateLimiter } from "../src/policy/rate-limit.ts";
import { Client, failOnRelayErrors, signer, startTestRelay, type TestRelay } from "./helpers.ts";

failOnRelayErrors();

type Rates = Partial<Config["rate_limits"]>;
// 600 a minute: a token every 100 ms. The relay's buckets run on a clock the test moves
// (relayWith), so a loaded machine handling a burst slowly cannot refill a token in the middle of
// it, and "after a refill" is exactly REFILL_MS later on the relay's own clock.
const FAST = 600;
const REFILL_MS = 150;

const relays: TestRelay[] = [];
const clients: Client[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const r of relays.splice(0)) await r.stop();
});

/** The relay's rate-limit clock (milliseconds); it moves only when a test refills. */
let clock = 0;
const refill = () => void (clock += REFILL_MS);

async function relayWith(rates: Rates, admins: string[] = []): Promise<TestRelay> {
  // Every test client here comes from 127.0.0.1: loopback is limited like any address only with
  // the exemption off.
  const relay = await startTestRelay({ rate_limits: { exempt_private_addresses: false, ...rates }, admin: { pubkeys: admins } });
  clock = Date.now();
  relay.ctx.rates = new RateLimiter({ now: () => clock });
  relays.push(relay);
  return relay;
}

async function client(relay: TestRelay): Promise<Client> {
  const c = await Client.connect(relay.url);
  clients.push(c);
  return c;
}

/** Sends every frame at once (no waiting in between, so no refill), then collects the answers. */
async function burst(c: Client, frames: unknown[][], answered: (f: any, subId: string) => boolean): Promise<any[]> {
  const from = c.frames.length;
  for (const f of frames) c.send(f);
  return Promise.all(frames.map((f) => c.next((a) => answered(a, f[0] === "EVENT" ? (f[1] as any).id : (f[1] as string)), 5000, from)));
}

const isOk = (a: any, id: string) => a[0] === "OK" && a[1] === id;
const endsReq = (a: any, id: string) => (a[0] === "EOSE" || a[0] === "CLOSED") && a[1] === id;
const endsCount = (a: any, id: string) => (a[0] === "COUNT" || a[0] === "CLOSED") && a[1] === id;
const endsNeg = (a: any, id: string) => (a[0] === "NEG-MSG" || a[0] === "NEG-ERR") && a[1] === id;

const events = (n: number, s = signer()) =>
  Array.from({ length: n }, (_, i) => ["EVENT", s.sign({ kind: 1, content: `rate ${i} ${Math.random()}` })]);
const reqs = (n: number, tag: string) => Array.from({ length: n }, (_, i) => ["REQ", `${tag}${i}`, { kinds: [1], limit: 1 }]);

test("EVENT: past the burst OK false rate-limited:, accepted again after a refill", async () => {
  const relay = await relayWith({ events_per_minute: FAST, events_burst: 3 });
  const c = await client(relay);
  const oks = await burst(c, events(5), isOk);
  expect(oks.map((o) => o[2])).toEqual([true, true, true, false, false]);
  expect(oks[3][3]).toMatch(/^rate-limited: too many events, try again in \d+ s$/);
  refill();
  expect((await burst(c, events(1), isOk))[0][2]).toBe(true);
});

test("REQ: past the burst CLOSED rate-limited:, EOSE again after a refill", async () => {
  const relay = await relayWith({ reqs_per_minute: FAST, reqs_burst: 3 });
  const c = await client(relay);
  const ends = await burst(c, reqs(4, "r"), endsReq);
  expect(ends.map((f) => f[0])).toEqual(["EOSE", "EOSE", "EOSE", "CLOSED"]);
  expect(ends[3][2]).toStartWith("rate-limited: too many REQs");
  refill();
  expect((await c.req("again", { limit: 1 })).end).toEqual(["EOSE", "again"]);
});

test("COUNT: past the burst CLOSED rate-limited:, counted again after a refill", async () => {
  const relay = await relayWith({ counts_per_minute: FAST, counts_burst: 2 });
  const c = await client(relay);
  const ends = await burst(
    c,
    [1, 2, 3].map((i) => ["COUNT", `c${i}`, { kinds: [1] }]),
    endsCount,
  );
  expect(ends.map((f) => f[0])).toEqual(["COUNT", "COUNT", "CLOSED"]);
  expect(ends[2][2]).toStartWith("rate-limited: too many COUNTs");
  // REQs have their own bucket.
  expect((await c.req("r", { limit: 1 })).end[0]).toBe("EOSE");
  refill();
  expect((await c.count("again", [{ kinds: [1] }]))[0]).toBe("COUNT");
});

test("NEG-OPEN: past the burst NEG-ERR rate-limited:, reconciles again after a refill", async () => {
  const relay = await relayWith({ neg_opens_per_minute: FAST, neg_opens_burst: 2 });
  const c = await client(relay);
  const storage = new nip77.NegentropyStorageVector();
  storage.seal();
  const initial = await new nip77.Negentropy(storage).initiate();
  const open = (id: string) => ["NEG-OPEN", id, { kinds: [1] }, initial];
  const answers = await burst(c, [open("n1"), open("n2"), open("n3")], endsNeg);
  expect(answers.map((f) => f[0])).toEqual(["NEG-MSG", "NEG-MSG", "NEG-ERR"]);
  expect(answers[2][2]).toStartWith("rate-limited: too many NEG-OPENs");
  refill();
  expect((await burst(c, [open("n4")], endsNeg))[0][0]).toBe("NEG-MSG");
});

test("connections: past the burst HTTP 429 with Retry-After, upgraded again after a refill", async () => {
  const relay = await relayWith({ connections_per_minute: FAST, connections_burst: 2 });
  const port = relay.server.port!;
  const first = await upgrade(port);
  const second = await upgrade(port);
  const third = await upgrade(port);
  expect([first.status, second.status, third.status]).toEqual([101, 101, 429]);
  expect(third.headers["retry-after"]).toBe("1");
  expect(third.body).toStartWith("rate-limited:");
  // The open connections are not affected: the limit is on new ones.
  refill();
  expect((await upgrade(port)).status).toBe(101);
});

test("per pubkey: an AUTHed pubkey's bucket follows it across connections; unauthenticated ones from the IP are not charged to it", async () => {
  const relay = await relayWith({
    pubkey_events_per_minute: FAST,
    pubkey_events_burst: 2,
    pubkey_reqs_per_minute: FAST,
    pubkey_reqs_burst: 1,
  });
  const alice = signer();
  const a1 = await client(relay);
  const a2 = await client(relay);
  const anon = await client(relay);
  expect((await a1.auth(alice, relay.url))[2]).toBe(true);
  expect((await a2.auth(alice, relay.url))[2]).toBe(true);
  const oks = await burst(a1, events(2, alice), isOk);
  expect(oks.map((o) => o[2])).toEqual([true, true]);
  const refused = (await burst(a2, events(1, alice), isOk))[0];
  expect(refused[2]).toBe(false);
  expect(refused[3]).toStartWith("rate-limited: too many events");
  // The IP has no limit here: the same signer's events from an unauthenticated connection pass.
  expect((await burst(anon, events(3, alice), isOk)).map((o) => o[2])).toEqual([true, true, true]);
  // REQs per pubkey too.
  expect((await burst(a1, reqs(2, "p"), endsReq)).map((f) => f[0])).toEqual(["EOSE", "CLOSED"]);
  expect((await burst(anon, reqs(3, "q"), endsReq)).map((f) => f[0])).toEqual(["EOSE", "EOSE", "EOSE"]);
  refill();
  expect((await burst(a2, events(1, alice), isOk))[0][2]).toBe(true);
});

test("a connection authenticated as an [admin] pubkey is exempt", async () => {
  const admin = signer();
  const relay = await relayWith({ events_per_minute: 1, events_burst: 1, reqs_per_minute: 1, reqs_burst: 1 }, [admin.pubkey]);
  const boss = await client(relay);
  expect((await boss.auth(admin, relay.url))[2]).toBe(true);
  expect((await burst(boss, events(4, admin), isOk)).map((o) => o[2])).toEqual([true, true, true, true]);
  expect((await burst(boss, reqs(3, "a"), endsReq)).map((f) => f[0])).toEqual(["EOSE", "EOSE", "EOSE"]);
  // Everyone else from the same IP is limited (the admin's traffic was not charged to the IP).
  const other = await client(relay);
  expect((await burst(other, events(2), isOk)).map((o) => o[2])).toEqual([true, false]);
  expect((await burst(other, reqs(2, "o"), endsReq)).map((f) => f[0])).toEqual(["EOSE", "CLOSED"]);
});

test("a reload that changes a rate takes effect at once, both ways", async () => {
  const relay = await relayWith({ reqs_per_minute: 1, reqs_burst: 1 });
  const c = await client(relay);
  expect((await burst(c, reqs(2, "x"), endsReq)).map((f) => f[0])).toEqual(["EOSE", "CLOSED"]);
  relay.ctx.config.rate_limits.reqs_per_minute = 0; // as config/reload.ts does: in place
  expect((await burst(c, reqs(5, "y"), endsReq)).map((f) => f.at(0))).toEqual(["EOSE", "EOSE", "EOSE", "EOSE", "EOSE"]);
  relay.ctx.config.rate_limits.events_per_minute = 1;
  relay.ctx.config.rate_limits.events_burst = 2;
  expect((await burst(c, events(3), isOk)).map((o) => o[2])).toEqual([true, true, false]);
});

test("default limits: 300 EVENTs at once from a loopback client are all accepted; from a public address behind a trusted proxy, rate-limited:", async () => {
  const relay = await startTestRelay({
    rate_limits: defaults().rate_limits,
    network: { remote_ip_header: "x-forwarded-for", trusted_proxies: ["127.0.0.1"] },
  });
  relays.push(relay);
  // What nostr-tools' Promise.all over 300 publishes does: every EVENT sent before any answer.
  const local = await client(relay);
  const oks = await burst(local, events(300), isOk);
  expect(oks.filter((o) => o[2] !== true).map((o) => o[3])).toEqual([]);
  // A private client behind the proxy is not limited either.
  const lan = await Client.connect(relay.url, { "X-Forwarded-For": "192.168.1.20" });
  clients.push(lan);
  expect((await burst(lan, events(300), isOk)).filter((o) => o[2] !== true)).toEqual([]);
  // The same burst from an internet client through the proxy: its address's bucket (200) runs out.
  const remote = await Client.connect(relay.url, { "X-Forwarded-For": "203.0.113.7" });
  clients.push(remote);
  const refused = (await burst(remote, events(300), isOk)).filter((o) => o[2] !== true);
  expect(refused.length).toBeGreaterThan(50);
  for (const o of refused) expect(o[3]).toMatch(/^rate-limited: too many events, try again in \d+ s$/);
}, 30_000);

test("connections from a loopback peer carrying X-Forwarded-For without remote_ip_header: one warning saying what to set", async () => {
  const warn = spyOn(console, "warn");
  try {
    const relay = await startTestRelay();
    relays.push(relay);
    clients.push(await client(relay));
    for (const ip of ["203.0.113.1", "203.0.113.2", "203.0.113.3"])
      clients.push(await Client.connect(relay.url, { "X-Forwarded-For": ip }));
    clients.push(await Client.connect(relay.url, { "X-Real-IP": "203.0.113.4" }));
    const lines = warn.mock.calls.map((c) => c.map(String).join(" ")).filter((l) => l.includes("carry"));
    expect(lines).toEqual([
      "warning: websocket connections from 127.0.0.1 carry x-forwarded-for (a reverse proxy?) but [network] remote_ip_header is not set, " +
        "so every client behind it counts as 127.0.0.1: they share one address's [limits] max_connections_per_ip, query time and the other " +
        'per-address bounds, and none of them is rate-limited per IP. Set [network] remote_ip_header = "x-forwarded-for" and ' +
        'trusted_proxies = ["127.0.0.1"] (a reload applies them: kill -HUP)',
    ]);
    // Set up as it says: no warning.
    warn.mockClear();
    const right = await startTestRelay({ network: { remote_ip_header: "x-forwarded-for", trusted_proxies: ["127.0.0.1"] } });
    relays.push(right);
    clients.push(await Client.connect(right.url, { "X-Forwarded-For": "203.0.113.1" }));
    expect(warn.mock.calls.filter((c) => String(c[0]).includes("carry"))).toEqual([]);
  } finally {
    warn.mockRestore();
  }
});

/** A websocket upgrade over raw TCP, so the HTTP status and headers are visible. */
async function upgrade(port: number): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  const sock = tcpConnect(port, "127.0.0.1");
  const text = await new Promise<string>((resolve, reject) => {
    let buf = "";
    const timer = setTimeout(() => reject(new Error(`no HTTP answer: ${JSON.stringify(buf)}`)), 5000);
    sock.once("error", reject);
    sock.once("connect", () =>
      sock.write(
        `GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
      ),
    );
    sock.on("data", (d: Buffer) => {
      buf += d.toString("latin1");
      const end = buf.indexOf("\r\n\r\n");
      const length = Number(/content-length: *(\d+)/i.exec(buf)?.[1] ?? 0);
      // A 101 has no body; a refusal is complete once its Content-Length has arrived.
      if (end >= 0 && (buf.startsWith("HTTP/1.1 101") || buf.length >= end + 4 + length)) clearTimeout(timer), resolve(buf);
    });
  });
  sock.destroy();
  const [head = "", body = ""] = text.split("\r\n\r\n");
  const [statusLine = "", ...lines] = head.split("\r\n");
  const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]));
  return { status: Number(statusLine.split(" ")[1]), headers, body };
}
