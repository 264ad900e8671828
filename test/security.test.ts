// Trust boundaries, written as tests:
// - NIP-42 AUTH trusts a pubkey only after its signature verifies (even with verify_signatures off).
// - Restricted kinds (4, 1059, 21059) never reach an unauthenticated or a third-party connection:
//   not through REQ (with or without kinds), live fanout (shared groups), COUNT (count and HLL) or
//   negentropy.
// - network.remote_ip_header is believed only from network.trusted_proxies.
// - limits.max_connections_per_ip refuses the upgrade with HTTP 429; a closed connection frees its slot.
import { afterAll, describe, expect, test } from "bun:test";
import { schnorr } from "@noble/curves/secp256k1.js";
import { connect as tcpConnect, type Socket } from "node:net";
import { nip77 } from "nostr-tools";
import { getEventHash } from "nostr-tools/pure";
import type { NostrEvent } from "../src/protocol/event.ts";
import { Client, now, signer, startTestRelay, type ConfigPatch, type Signer, type TestRelay } from "./helpers.ts";

const { Negentropy, NegentropyStorageVector } = nip77;

const relays: TestRelay[] = [];
const closers: (() => void)[] = [];

afterAll(async () => {
  for (const close of closers) close();
  for (const r of relays) await r.stop();
});

async function relayWith(patch: ConfigPatch = {}): Promise<TestRelay> {
  const r = await startTestRelay(patch);
  relays.push(r);
  return r;
}

async function connect(url: string): Promise<Client> {
  const c = await Client.connect(url);
  closers.push(() => c.close());
  return c;
}

const challengeOf = async (c: Client): Promise<string> => (await c.next((f) => f[0] === "AUTH"))[1];

async function send(c: Client, frame: unknown[], match: (f: any) => boolean): Promise<any[]> {
  const from = c.frames.length;
  c.send(frame);
  return c.next(match, 5000, from);
}
const auth = (c: Client, e: NostrEvent) => send(c, ["AUTH", e], (f) => f[0] === "OK" && f[1] === e.id);
const count = (c: Client, subId: string, ...filters: object[]) =>
  send(c, ["COUNT", subId, ...filters], (f) => (f[0] === "COUNT" || f[0] === "CLOSED") && f[1] === subId);

/** A connection authenticated as `who` (OK true checked). */
async function connectAs(url: string, who: Signer): Promise<Client> {
  const c = await connect(url);
  const e = who.sign({
    kind: 22242,
    tags: [
      ["relay", url],
      ["challenge", await challengeOf(c)],
    ],
  });
  expect(await auth(c, e)).toEqual(["OK", e.id, true, ""]);
  return c;
}

const hexToBytes = (h: string) => Uint8Array.from(Buffer.from(h, "hex"));

/** An event claiming `pubkey`, with a correct id, signed by `signWith` (someone else's key) or with `sig`. */
function forged(
  t: { pubkey: string; kind: number; tags: string[][]; content?: string },
  sign: { signWith?: Uint8Array; sig?: string },
): NostrEvent {
  const unsigned = { pubkey: t.pubkey, kind: t.kind, tags: t.tags, content: t.content ?? "", created_at: now() };
  const id = getEventHash(unsigned);
  const sig = sign.sig ?? Buffer.from(schnorr.sign(hexToBytes(id), sign.signWith!)).toString("hex");
  return { ...unsigned, id, sig };
}

describe("NIP-42: a pubkey is trusted only after its signature verifies", () => {
  for (const verify of [true, false]) {
    test(`forged AUTH for someone else's pubkey unlocks neither their DMs nor protected publishing (verify_signatures = ${verify})`, async () => {
      const relay = await relayWith({ options: { verify_signatures: verify } });
      const victim = signer();
      const attacker = signer();
      const sender = signer();
      // The victim's DM, stored.
      const dm = sender.sign({ kind: 4, content: "for the victim?iv=x", tags: [["p", victim.pubkey]] });
      const publisher = await connect(relay.url);
      expect(await publisher.publish(dm)).toEqual(["OK", dm.id, true, ""]);
      // A protected event of the victim's, which the attacker has got hold of.
      const protectedNote = victim.sign({ kind: 1, content: "only I may publish this", tags: [["-"]] });

      const c = await connect(relay.url);
      const challenge = await challengeOf(c);
      const authTags = [
        ["relay", relay.url],
        ["challenge", challenge],
      ];
      // 1. Right shape, right id, signed with the attacker's key.
      const wrongKey = forged({ pubkey: victim.pubkey, kind: 22242, tags: authTags }, { signWith: attacker.sk });
      // 2. Right shape, right id, a signature of zeros.
      const zeros = forged({ pubkey: victim.pubkey, kind: 22242, tags: authTags }, { sig: "00".repeat(64) });
      // 3. The victim's own valid AUTH, for another connection's challenge (replayed).
      const elsewhere = await connect(relay.url);
      const replayed = victim.sign({
        kind: 22242,
        tags: [
          ["relay", relay.url],
          ["challenge", await challengeOf(elsewhere)],
        ],
      });
      // 4. The replayed event with this connection's challenge put in: the id no longer matches.
      const patchedId = { ...replayed, tags: authTags };
      // 5. ... and with the id recomputed: the signature no longer matches.
      const patchedSig = { ...patchedId, id: getEventHash(patchedId) };

      const answers = [];
      for (const e of [wrongKey, zeros, replayed, patchedId, patchedSig]) answers.push(await auth(c, e));
      expect(answers.map((a) => [a[0], a[2]])).toEqual(Array.from({ length: 5 }, () => ["OK", false]));
      expect(answers[0]![3]).toBe("invalid: signature verification failed");
      expect(answers[1]![3]).toBe("invalid: signature verification failed");
      expect(answers[2]![3]).toBe("invalid: AUTH challenge does not match");
      expect(answers[3]![3]).toBe("invalid: event id does not match the event");
      expect(answers[4]![3]).toBe("invalid: signature verification failed");

      // Still nobody: DMs need AUTH, protected publishing needs AUTH.
      const r1 = await c.req("dms", { kinds: [4], "#p": [victim.pubkey] });
      expect(r1.events).toEqual([]);
      expect(r1.end[0]).toBe("CLOSED");
      expect(r1.end[2]).toStartWith("auth-required:");
      expect((await c.publish(protectedNote)).slice(2)).toEqual([false, "auth-required: this event may only be published by its author"]);
      // Authenticated as the attacker (really): a third party, still not the victim.
      const own = attacker.sign({ kind: 22242, tags: authTags });
      expect(await auth(c, own)).toEqual(["OK", own.id, true, ""]);
      expect(await c.req("dms2", { kinds: [4], "#p": [victim.pubkey] })).toEqual({ events: [], end: ["EOSE", "dms2"] });
      expect((await count(c, "n", { kinds: [4], "#p": [victim.pubkey] }))[2]).toEqual({ count: 0, hll: expect.any(String) });
      expect((await c.publish(protectedNote)).slice(2)).toEqual([false, "restricted: this event may only be published by its author"]);
      // A forged AUTH after a real one adds nothing either.
      expect((await auth(c, forged({ pubkey: victim.pubkey, kind: 22242, tags: authTags }, { signWith: attacker.sk })))[2]).toBe(false);
      expect((await c.req("dms3", { kinds: [4], "#p": [victim.pubkey] })).events).toEqual([]);

      // The control: the victim's real AUTH does unlock both.
      const v = await connectAs(relay.url, victim);
      expect((await v.req("dms", { kinds: [4], "#p": [victim.pubkey] })).events.map((e) => e.id)).toEqual([dm.id]);
      expect(await v.publish(protectedNote)).toEqual(["OK", protectedNote.id, true, ""]);
    });
  }
});

/** Everything a reconciliation from an empty set learns the relay has, or the NEG-ERR. */
async function negIds(c: Client, subId: string, filter: object): Promise<string[] | any[]> {
  const storage = new NegentropyStorageVector();
  storage.seal();
  const neg = new Negentropy(storage);
  const need: string[] = [];
  let msg: string | null = neg.initiate();
  let frame: unknown[] = ["NEG-OPEN", subId, filter, msg];
  for (let round = 0; round < 20 && msg !== null; round++) {
    const reply = await send(c, frame, (f) => (f[0] === "NEG-MSG" || f[0] === "NEG-ERR") && f[1] === subId);
    if (reply[0] === "NEG-ERR") return reply;
    msg = neg.reconcile(
      reply[2],
      () => {},
      (id: string) => need.push(id),
    );
    frame = ["NEG-MSG", subId, msg];
  }
  c.send(["NEG-CLOSE", subId]);
  return need.sort();
}

/** NIP-45 HyperLogLog of these pubkeys, for a filter whose first tag value is `firstValue` (64 hex). */
function hll(firstValue: string, pubkeys: string[]): string {
  const offset = Number.parseInt(firstValue[32]!, 16) + 8;
  const registers = new Array<number>(256).fill(0);
  for (const pk of pubkeys) {
    const b = Buffer.from(pk, "hex");
    let zeros = 0;
    for (let i = offset + 1; i < 32; i++) {
      if (b[i] === 0) {
        zeros += 8;
        continue;
      }
      zeros += Math.clz32(b[i]!) - 24;
      break;
    }
    registers[b[offset]!] = Math.max(registers[b[offset]!]!, zeros + 1);
  }
  return registers.map((r) => r.toString(16).padStart(2, "0")).join("");
}

test("restricted kinds never reach an unauthenticated or third-party connection: REQ, live fanout, COUNT/HLL, negentropy", async () => {
  const relay = await relayWith();
  const sender = signer();
  const recipient = signer();
  const wrapper = signer(); // the gift wrap's one-time key, which also posts a public note
  const R = recipient.pubkey;
  const t = now() - 100;
  const dm = sender.sign({ kind: 4, content: "leakcheck dm?iv=x", tags: [["p", R]], created_at: t });
  const wrap = wrapper.sign({ kind: 1059, content: "leakcheck wrap", tags: [["p", R]], created_at: t + 1 });
  const pub = sender.sign({ kind: 1, content: "leakcheck public mention", tags: [["p", R]], created_at: t + 2 });
  const wrapperNote = wrapper.sign({ kind: 1, content: "wrapper note", created_at: t + 3 });
  const p = await connect(relay.url);
  for (const e of [dm, wrap, pub, wrapperNote]) expect(await p.publish(e)).toEqual(["OK", e.id, true, ""]);

  const viewers = {
    anonymous: await connect(relay.url),
    third: await connectAs(relay.url, signer()),
    recipient: await connectAs(relay.url, recipient), // the control: sees everything
  };
  type Who = keyof typeof viewers;
  const ids = (...evs: NostrEvent[]) => evs.map((e) => e.id).sort();
  const authRequired = (x: any) =>
    Array.isArray(x) && typeof x[2] === "string" && x[2].startsWith("auth-required:") ? "auth-required" : x;
  const reqIds = async (c: Client, subId: string, f: object) => {
    const r = await c.req(subId, f);
    return r.end[0] === "EOSE" ? r.events.map((e) => e.id).sort() : authRequired(r.end);
  };
  const countOf = async (c: Client, subId: string, ...f: object[]) => {
    const r = await count(c, subId, ...f);
    return r[0] === "COUNT" ? r[2] : authRequired(r);
  };
  const negOf = async (c: Client, subId: string, f: object) => {
    const r = await negIds(c, subId, f);
    return r[0] === "NEG-ERR" ? authRequired(r) : r;
  };
  const restrictedKinds = { kinds: [4, 1059, 21059] };

  // path -> how to ask -> what each viewer must see.
  const matrix: { path: string; ask: (c: Client, who: Who) => Promise<unknown>; want: Record<Who, unknown> }[] = [
    ...[[4], [1059], [21059], [1, 4, 1059]].map((kinds) => ({
      path: `REQ kinds ${JSON.stringify(kinds)} #p`,
      ask: (c: Client) => reqIds(c, "k", { kinds, "#p": [R] }),
      want: {
        anonymous: "auth-required",
        third: kinds.includes(1) ? ids(pub) : [],
        recipient: ids(...[dm, wrap, pub].filter((e) => kinds.includes(e.kind))),
      },
    })),
    {
      path: "REQ #p",
      ask: (c) => reqIds(c, "p", { "#p": [R] }),
      want: { anonymous: ids(pub), third: ids(pub), recipient: ids(dm, wrap, pub) },
    },
    {
      path: "REQ #p limit 1",
      ask: (c) => reqIds(c, "p1", { "#p": [R], limit: 1 }),
      want: { anonymous: ids(pub), third: ids(pub), recipient: ids(pub) },
    },
    {
      path: "REQ ids",
      ask: (c) => reqIds(c, "i", { ids: ids(dm, wrap, pub, wrapperNote) }),
      want: { anonymous: ids(pub, wrapperNote), third: ids(pub, wrapperNote), recipient: ids(dm, wrap, pub, wrapperNote) },
    },
    {
      path: "REQ authors",
      ask: (c) => reqIds(c, "a", { authors: [sender.pubkey, wrapper.pubkey] }),
      want: { anonymous: ids(pub, wrapperNote), third: ids(pub, wrapperNote), recipient: ids(dm, wrap, pub, wrapperNote) },
    },
    {
      path: "REQ {}",
      ask: (c) => reqIds(c, "all", {}),
      want: { anonymous: ids(pub, wrapperNote), third: ids(pub, wrapperNote), recipient: ids(dm, wrap, pub, wrapperNote) },
    },
    // Restricted kinds are not in the search index at all: nobody finds them by content.
    {
      path: "REQ search",
      ask: (c) => reqIds(c, "s", { search: "leakcheck" }),
      want: { anonymous: ids(pub), third: ids(pub), recipient: ids(pub) },
    },
    {
      path: "COUNT #p (count + hll)",
      ask: (c) => countOf(c, "n1", { "#p": [R] }),
      want: {
        anonymous: { count: 1, hll: hll(R, [sender.pubkey]) },
        third: { count: 1, hll: hll(R, [sender.pubkey]) },
        recipient: { count: 3, hll: hll(R, [sender.pubkey, wrapper.pubkey]) },
      },
    },
    {
      path: "COUNT kinds 4/1059/21059 #p (count + hll)",
      ask: (c) => countOf(c, "n2", { ...restrictedKinds, "#p": [R] }),
      want: {
        anonymous: "auth-required",
        third: { count: 0, hll: "00".repeat(256) },
        recipient: { count: 2, hll: hll(R, [sender.pubkey, wrapper.pubkey]) },
      },
    },
    {
      path: "COUNT ids, authors (two filters)",
      ask: (c) => countOf(c, "n3", { ids: ids(dm, wrap) }, { authors: [wrapper.pubkey] }),
      want: { anonymous: { count: 1 }, third: { count: 1 }, recipient: { count: 3 } },
    },
    {
      path: "NEG-OPEN {}",
      ask: (c) => negOf(c, "g1", {}),
      want: { anonymous: ids(pub, wrapperNote), third: ids(pub, wrapperNote), recipient: ids(dm, wrap, pub, wrapperNote) },
    },
    {
      path: "NEG-OPEN #p",
      ask: (c) => negOf(c, "g2", { "#p": [R] }),
      want: { anonymous: ids(pub), third: ids(pub), recipient: ids(dm, wrap, pub) },
    },
    {
      path: "NEG-OPEN kinds",
      ask: (c) => negOf(c, "g3", restrictedKinds),
      want: { anonymous: "auth-required", third: [], recipient: ids(dm, wrap) },
    },
    {
      path: "NEG-OPEN authors",
      ask: (c) => negOf(c, "g4", { authors: [sender.pubkey, wrapper.pubkey] }),
      want: { anonymous: ids(pub, wrapperNote), third: ids(pub, wrapperNote), recipient: ids(dm, wrap, pub, wrapperNote) },
    },
  ];

  const seen: Record<string, Record<Who, unknown>> = {};
  for (const row of matrix) {
    seen[row.path] = {} as Record<Who, unknown>;
    for (const who of Object.keys(viewers) as Who[]) seen[row.path]![who] = await row.ask(viewers[who], who);
  }
  expect(seen).toEqual(Object.fromEntries(matrix.map((row) => [row.path, row.want])));

  // Live fanout. Same subscription id and filters on every connection = one shared group (topic).
  const groups = relay.ctx.fanout.groupCount;
  for (const who of Object.keys(viewers) as Who[]) expect((await viewers[who].req("live", { "#p": [R] })).end).toEqual(["EOSE", "live"]);
  const withKinds = { kinds: [1, 4, 1059, 21059], "#p": [R] };
  for (const who of ["third", "recipient"] as const) expect((await viewers[who].req("livek", withKinds)).end).toEqual(["EOSE", "livek"]);
  expect(authRequired((await viewers.anonymous.req("livek", withKinds)).end)).toBe("auth-required");
  expect(relay.ctx.fanout.groupCount - groups).toBe(2);

  const dm2 = sender.sign({ kind: 4, content: "live dm?iv=x", tags: [["p", R]] });
  const wrap2 = signer().sign({ kind: 1059, content: "live wrap", tags: [["p", R]] });
  const ephemeral = signer().sign({ kind: 21059, content: "live ephemeral wrap", tags: [["p", R]] });
  const barrier = sender.sign({ kind: 1, content: "public, after the others", tags: [["p", R]] });
  for (const e of [dm2, wrap2, ephemeral, barrier]) expect(await p.publish(e)).toEqual(["OK", e.id, true, ""]);
  for (const c of Object.values(viewers)) await c.next((f) => f[0] === "EVENT" && f[1] === "live" && f[2].id === barrier.id);
  for (const who of ["third", "recipient"] as const)
    await viewers[who].next((f) => f[0] === "EVENT" && f[1] === "livek" && f[2].id === barrier.id);
  await Bun.sleep(50);
  /** What a subscription got: stored (before its EOSE) and live (after), ids in arrival order. */
  const got = (who: Who, subId: string) => {
    const frames = viewers[who].frames.filter((f) => f[1] === subId && (f[0] === "EVENT" || f[0] === "EOSE"));
    const eose = frames.findIndex((f) => f[0] === "EOSE");
    return { stored: frames.slice(0, eose).map((f) => f[2].id), live: frames.slice(eose + 1).map((f) => f[2].id) };
  };
  const everything = [dm2.id, wrap2.id, ephemeral.id, barrier.id];
  expect({
    anonymous: got("anonymous", "live"),
    third: got("third", "live"),
    thirdKinds: got("third", "livek"),
    recipient: got("recipient", "live"),
    recipientKinds: got("recipient", "livek"),
  }).toEqual({
    anonymous: { stored: [pub.id], live: [barrier.id] },
    third: { stored: [pub.id], live: [barrier.id] },
    thirdKinds: { stored: [pub.id], live: [barrier.id] },
    recipient: { stored: [pub.id, wrap.id, dm.id], live: everything },
    recipientKinds: { stored: [pub.id, wrap.id, dm.id], live: everything },
  });
});

/** A websocket upgrade over raw TCP, so the HTTP status is visible; the socket stays open on 101. */
async function upgrade(port: number, headers: Record<string, string> = {}): Promise<{ status: number; close(): void }> {
  const sock: Socket = tcpConnect(port, "127.0.0.1");
  closers.push(() => sock.destroy());
  await new Promise<void>((res, rej) => {
    sock.once("connect", () => res());
    sock.once("error", rej);
  });
  const extra = Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join("");
  sock.write(
    `GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`,
  );
  const head = await new Promise<string>((res, rej) => {
    let buf = "";
    const onData = (d: Buffer) => {
      buf += d.toString("latin1");
      if (buf.includes("\r\n")) {
        sock.off("data", onData);
        res(buf);
      }
    };
    sock.on("data", onData);
    sock.once("error", rej);
    setTimeout(() => rej(new Error(`no HTTP answer: ${JSON.stringify(buf)}`)), 5000);
  });
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]);
  if (status !== 101) sock.destroy();
  return { status, close: () => sock.destroy() };
}

/** Bun's WebSocket client with extra request headers: "open", or "refused" when the upgrade fails. */
function bunWebSocket(url: string, headers: Record<string, string>): Promise<{ result: "open" | "refused"; ws: WebSocket }> {
  const ws = new WebSocket(url, { headers } as any);
  closers.push(() => ws.close());
  return new Promise((res) => {
    ws.onopen = () => res({ result: "open", ws });
    ws.onerror = () => res({ result: "refused", ws });
    ws.onclose = () => res({ result: "refused", ws });
  });
}

describe("network.remote_ip_header", () => {
  const xff = (v: string) => ({ "x-forwarded-for": v });

  test("from a peer that is not a trusted proxy the header is ignored: every connection counts as the peer's address", async () => {
    const relay = await relayWith({ network: { remote_ip_header: "x-forwarded-for" }, limits: { max_connections_per_ip: 2 } });
    const port = relay.server.port!;
    const a = await bunWebSocket(relay.url, xff("1.1.1.1"));
    const b = await bunWebSocket(relay.url, xff("2.2.2.2"));
    expect([a.result, b.result]).toEqual(["open", "open"]);
    expect((await bunWebSocket(relay.url, xff("3.3.3.3"))).result).toBe("refused");
    expect((await upgrade(port, xff("4.4.4.4"))).status).toBe(429);
    expect((await upgrade(port, { "X-Forwarded-For": "5.5.5.5, 6.6.6.6" })).status).toBe(429);
    expect((await upgrade(port)).status).toBe(429);
  });

  test("from a trusted proxy the header is believed, its last entry (the one the proxy appended) counts", async () => {
    const relay = await relayWith({
      network: { remote_ip_header: "x-forwarded-for", trusted_proxies: ["127.0.0.1"] },
      limits: { max_connections_per_ip: 2 },
    });
    const port = relay.server.port!;
    const three = await Promise.all(["1.1.1.1", "2.2.2.2", "3.3.3.3"].map((ip) => bunWebSocket(relay.url, xff(ip))));
    expect(three.map((x) => x.result)).toEqual(["open", "open", "open"]);
    // A second from 1.1.1.1 fits, a third does not.
    expect((await upgrade(port, xff("1.1.1.1"))).status).toBe(101);
    expect((await upgrade(port, xff("1.1.1.1"))).status).toBe(429);
    expect((await bunWebSocket(relay.url, xff("1.1.1.1"))).result).toBe("refused");
    // Entries a client put in front of the proxy's own do not count: this is 1.1.1.1 again...
    expect((await upgrade(port, xff("9.9.9.9, 8.8.8.8, 1.1.1.1"))).status).toBe(429);
    // ... and this is 7.7.7.7, whatever it claims before.
    expect((await upgrade(port, xff("1.1.1.1, 7.7.7.7"))).status).toBe(101);
    // No header from the proxy: the proxy's own address.
    expect((await upgrade(port)).status).toBe(101);
    expect((await upgrade(port)).status).toBe(101);
    expect((await upgrade(port)).status).toBe(429);
  });

  test("remote_ip_header empty: the header is ignored even from a listed proxy", async () => {
    const relay = await relayWith({
      network: { remote_ip_header: "", trusted_proxies: ["127.0.0.1"] },
      limits: { max_connections_per_ip: 1 },
    });
    const port = relay.server.port!;
    expect((await upgrade(port, xff("1.1.1.1"))).status).toBe(101);
    expect((await upgrade(port, xff("2.2.2.2"))).status).toBe(429);
  });
});

test("limits.max_connections_per_ip: the next upgrade gets HTTP 429, refusals take no slot, a closed connection frees one", async () => {
  const relay = await relayWith({ limits: { max_connections_per_ip: 2 } });
  const port = relay.server.port!;
  const first = await connect(relay.url);
  const second = await upgrade(port);
  expect(second.status).toBe(101);
  for (let i = 0; i < 3; i++) expect((await upgrade(port)).status).toBe(429);
  // A Bun client is refused too, and plain HTTP (NIP-11) is not counted.
  expect((await bunWebSocket(relay.url, {})).result).toBe("refused");
  // More NIP-11 fetches than the cap allows connections: each is served the relay's document.
  for (let i = 0; i < 3; i++) {
    const info = await fetch(relay.url.replace(/^ws/, "http"), { headers: { Accept: "application/nostr+json" } });
    expect(info.status).toBe(200);
    expect(((await info.json()) as { limitation?: unknown }).limitation).toMatchObject({
      max_subscriptions: relay.ctx.config.limits.max_subscriptions,
    });
  }
  // The first connection still works.
  expect((await first.req("x", { limit: 1 })).end).toEqual(["EOSE", "x"]);

  // Closing one (a clean websocket close, then an abrupt TCP close) frees exactly one slot each time.
  for (const close of [() => first.close(), () => second.close()]) {
    close();
    let status = 429;
    const deadline = Date.now() + 3000;
    while (status !== 101 && Date.now() < deadline) {
      await Bun.sleep(20);
      status = (await upgrade(port)).status;
    }
    expect(status).toBe(101);
    expect((await upgrade(port)).status).toBe(429);
  }
});
