// NIP-11 over HTTP on the relay path: the information document (with CORS), the browser
// landing page, 404s elsewhere, and a relay mounted on a non-root path.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { fetchRelayInformation } from "nostr-tools/nip11";
import { admissionOn } from "../src/config/admission.ts";
import { defaults, type Config } from "../src/config/schema.ts";
import { pubkeyOf } from "../src/protocol/schnorr.ts";
import { VERSION } from "../src/version.ts";
import { Client, signer, startTestRelay, testConfig, type ConfigPatch, type TestRelay } from "./helpers.ts";

const NOSTR_JSON = "application/nostr+json";
// `self` is always there: the relay key's pubkey.
const OPTIONAL_INFO = ["icon", "banner", "pubkey", "contact", "terms_of_service", "privacy_policy", "posting_policy"] as const;

const ADMIN = "a".repeat(64);
const RELAY_SECRET = "b".repeat(64);
const SELF = pubkeyOf(Buffer.from(RELAY_SECRET, "hex"));
const ALLOWED = signer();

/** Everything non-default, so a value that comes from the wrong key shows. */
const custom: ConfigPatch = {
  info: {
    name: "Test <Relay> & co",
    description: "A relay for the NIP-11 tests.",
    relay_url: "wss://relay.example.com/",
    icon: "https://example.com/icon.png",
    banner: "https://example.com/banner.jpg",
    pubkey: ADMIN,
    self: SELF,
    relay_secret_key: RELAY_SECRET,
    contact: "mailto:admin@example.com",
    terms_of_service: "https://example.com/tos.html",
    privacy_policy: "https://example.com/privacy.html",
    posting_policy: "https://example.com/posting.html",
  },
  options: { auth: "always" },
  limits: {
    created_at_upper_limit: 321,
    created_at_lower_limit: 86400,
    max_message_bytes: 65536,
    max_subscriptions: 3,
    max_filters: 7,
    max_limit: 2,
    default_limit: 1,
    max_subid_length: 33,
    max_event_tags: 44,
    max_content_length: 5555,
  },
  authorization: { pubkey_allowlist: [ALLOWED.pubkey] },
};

/** The NIP-11 `limitation` a config must produce: NIP-11 key <- config key. */
function expectedLimitation(c: Config): Record<string, unknown> {
  return {
    max_message_length: c.limits.max_message_bytes,
    max_subscriptions: c.limits.max_subscriptions,
    max_filters: c.limits.max_filters,
    max_limit: c.limits.max_limit,
    default_limit: c.limits.default_limit,
    max_subid_length: c.limits.max_subid_length,
    max_event_tags: c.limits.max_event_tags,
    max_content_length: c.limits.max_content_length,
    auth_required: c.options.auth === "always",
    payment_required: c.pay_to_relay.enabled,
    restricted_writes: c.authorization.pubkey_allowlist.length > 0 || c.authorization.kind_allowlist.length > 0 || admissionOn(c),
    min_pow_difficulty: 0,
    // Seconds into the past / future an event's created_at may be. 0 in the config means
    // "no limit", which must not be advertised as a zero-second window: omitted instead.
    ...(c.limits.created_at_lower_limit > 0 ? { created_at_lower_limit: c.limits.created_at_lower_limit } : {}),
    ...(c.limits.created_at_upper_limit > 0 ? { created_at_upper_limit: c.limits.created_at_upper_limit } : {}),
  };
}

const CREATED_AT_KEYS = ["created_at_lower_limit", "created_at_upper_limit"];
const without = (o: Record<string, unknown>, keys: string[]) => Object.fromEntries(Object.entries(o).filter(([k]) => !keys.includes(k)));

let plain: TestRelay; // defaults
let configured: TestRelay; // `custom`
let mounted: TestRelay; // network.path = /nostr
const clients: Client[] = [];

beforeAll(async () => {
  [plain, configured, mounted] = await Promise.all([
    startTestRelay(),
    startTestRelay(custom),
    startTestRelay({ network: { path: "/nostr" } }),
  ]);
});

afterAll(async () => {
  for (const c of clients) c.close();
  await Promise.all([plain, configured, mounted].filter(Boolean).map((r) => r.stop()));
});

const httpUrl = (r: TestRelay, path?: string): string => {
  const u = new URL(r.url.replace(/^ws/, "http"));
  if (path !== undefined) u.pathname = path;
  return u.href;
};

const getInfo = (url: string, init: RequestInit = {}) =>
  fetch(url, { ...init, headers: { Accept: NOSTR_JSON, ...(init.headers as Record<string, string>) } });

async function connect(url: string): Promise<Client> {
  const c = await Client.connect(url);
  clients.push(c);
  return c;
}

function expectCors(res: Response): void {
  expect(res.headers.get("access-control-allow-origin")).toBe("*");
  expect(res.headers.get("access-control-allow-headers")).toBeTruthy();
  const methods = res.headers.get("access-control-allow-methods") ?? "";
  expect(methods.split(",").map((m) => m.trim().toUpperCase())).toContain("GET");
}

/** Every string anywhere in a JSON value. */
function strings(v: unknown): string[] {
  if (typeof v === "string") return [v];
  if (Array.isArray(v)) return v.flatMap(strings);
  if (v && typeof v === "object") return Object.values(v).flatMap(strings);
  return [];
}

// ---- the information document --------------------------------------------------------------

describe("NIP-11 document", () => {
  test("GET with Accept: application/nostr+json returns the document, with CORS", async () => {
    const res = await getInfo(httpUrl(plain));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toStartWith(NOSTR_JSON);
    expectCors(res);
    const doc = (await res.json()) as Record<string, any>;

    const d = defaults();
    expect(doc.name).toBe(d.info.name);
    expect(doc.description).toBe(d.info.description);
    expect(typeof doc.software).toBe("string");
    expect(doc.software.length).toBeGreaterThan(0);
    expect(doc.version).toBe(VERSION);

    expect(Array.isArray(doc.supported_nips)).toBe(true);
    for (const n of doc.supported_nips) expect(Number.isInteger(n)).toBe(true);
    expect(doc.supported_nips).toContain(1);
    expect(doc.supported_nips).toContain(11);
    expect(doc.supported_nips).toContain(42); // AUTH is wired (the relay sends a challenge on connect)
    expect(new Set(doc.supported_nips).size).toBe(doc.supported_nips.length);

    // (created_at_* on a default config: see the test of its own below)
    expect(without(doc.limitation, CREATED_AT_KEYS)).toEqual(without(expectedLimitation(testConfig()), CREATED_AT_KEYS));
    expect(doc.limitation.created_at_upper_limit).toBe(defaults().limits.created_at_upper_limit);
  });

  test("limitation follows the config", async () => {
    const doc = (await (await getInfo(httpUrl(configured))).json()) as Record<string, any>;
    const c = testConfig(custom);
    expect(doc.limitation).toEqual(expectedLimitation(c));
    // Spelled out, for the keys the brief names:
    expect(doc.limitation.max_subscriptions).toBe(3);
    expect(doc.limitation.max_limit).toBe(2);
    expect(doc.limitation.max_message_length).toBe(65536);
    expect(doc.limitation.auth_required).toBe(true);
    expect(doc.limitation.restricted_writes).toBe(true);
  });

  test("a created_at window that is off (0 = no limit) is not advertised as a 0-second limit", async () => {
    // The default config has created_at_lower_limit = 0: any age is accepted…
    const c = await connect(plain.url);
    const s = signer();
    const yearOld = s.sign({ kind: 1, content: "old", created_at: Math.floor(Date.now() / 1000) - 365 * 86400 });
    expect(await c.publish(yearOld)).toEqual(["OK", yearOld.id, true, ""]);
    // …so the document must not claim that events may be at most 0 seconds old.
    const doc = (await (await getInfo(httpUrl(plain))).json()) as Record<string, any>;
    expect(doc.limitation).toEqual(expectedLimitation(testConfig()));
    expect(Object.keys(doc.limitation)).not.toContain("created_at_lower_limit");

    const r = await startTestRelay({ limits: { created_at_upper_limit: 0 } });
    try {
      const d2 = (await (await getInfo(httpUrl(r))).json()) as Record<string, any>;
      expect(Object.keys(d2.limitation)).not.toContain("created_at_upper_limit");
    } finally {
      await r.stop();
    }
  });

  test("empty optional info fields are omitted, set ones appear", async () => {
    const empty = (await (await getInfo(httpUrl(plain))).json()) as Record<string, unknown>;
    for (const k of OPTIONAL_INFO) expect(Object.keys(empty)).not.toContain(k);
    expect(strings(empty)).not.toContain("");

    const full = (await (await getInfo(httpUrl(configured))).json()) as Record<string, unknown>;
    for (const k of [...OPTIONAL_INFO, "self"]) expect(full[k]).toBe((custom.info as Record<string, unknown>)[k]);
    expect(full.name).toBe(custom.info!.name!);
    expect(full.description).toBe(custom.info!.description!);
  });

  test("an empty description is omitted too", async () => {
    const r = await startTestRelay({ info: { description: "" } });
    try {
      const doc = (await (await getInfo(httpUrl(r))).json()) as Record<string, unknown>;
      expect(Object.keys(doc)).not.toContain("description");
      expect(doc.name).toBe(defaults().info.name);
    } finally {
      await r.stop();
    }
  });

  test("nostr-tools fetchRelayInformation reads it from the ws:// URL", async () => {
    const info = await fetchRelayInformation(configured.url);
    expect(info.name).toBe(custom.info!.name!);
    expect(info.pubkey).toBe(ADMIN);
    expect(info.supported_nips).toContain(11);
    expect(info.limitation?.max_subscriptions).toBe(3);
  });

  test("an Accept list that includes application/nostr+json gets JSON", async () => {
    const res = await fetch(httpUrl(plain), { headers: { Accept: `text/html;q=0.9, ${NOSTR_JSON}` } });
    expect(res.headers.get("content-type")).toStartWith(NOSTR_JSON);
    expect(((await res.json()) as Record<string, unknown>).supported_nips).toBeArray();
  });

  test("the query string does not matter", async () => {
    const res = await getInfo(`${httpUrl(plain)}?x=1`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toStartWith(NOSTR_JSON);
  });
});

// ---- what the document promises is what the relay does -------------------------------------

describe("advertised limits are the enforced ones", () => {
  /** A connection to `configured`, authenticated (it requires AUTH) as the allowlisted key. */
  async function authed(): Promise<Client> {
    const c = await connect(configured.url);
    const [, challenge] = await c.next((f) => f[0] === "AUTH");
    const auth = ALLOWED.sign({
      kind: 22242,
      tags: [
        ["relay", custom.info!.relay_url!],
        ["challenge", challenge],
      ],
    });
    c.send(["AUTH", auth]);
    expect(await c.next((f) => f[0] === "OK" && f[1] === auth.id)).toEqual(["OK", auth.id, true, ""]);
    return c;
  }

  test("auth_required: an unauthenticated REQ and EVENT are refused with auth-required:", async () => {
    const c = await connect(configured.url);
    const { end } = await c.req("s", { kinds: [1] });
    expect(end[0]).toBe("CLOSED");
    expect(end[2]).toStartWith("auth-required:");
    const [, , ok, msg] = await c.publish(ALLOWED.sign({ kind: 1, content: "x" }));
    expect(ok).toBe(false);
    expect(msg).toStartWith("auth-required:");
  });

  test("max_subscriptions: one more subscription is CLOSED", async () => {
    const c = await authed();
    for (let i = 0; i < 3; i++) expect((await c.req(`s${i}`, { kinds: [1] })).end[0]).toBe("EOSE");
    const { end } = await c.req("one-too-many", { kinds: [1] });
    expect(end[0]).toBe("CLOSED");
  });

  test("max_limit and default_limit clamp what a REQ returns", async () => {
    const c = await authed();
    const t = Math.floor(Date.now() / 1000) - 10;
    for (let i = 0; i < 4; i++) expect((await c.publish(ALLOWED.sign({ kind: 1, content: `n${i}`, created_at: t + i })))[2]).toBe(true);
    expect((await c.req("big", { authors: [ALLOWED.pubkey], limit: 100 })).events.length).toBe(2);
    expect((await c.req("dflt", { authors: [ALLOWED.pubkey] })).events.length).toBe(1);
  });

  test("restricted_writes: a key not on the allowlist may not publish", async () => {
    const c = await authed();
    const [, , ok, msg] = await c.publish(signer().sign({ kind: 1, content: "not allowed" }));
    expect(ok).toBe(false);
    expect(msg).toStartWith("restricted:");
  });

  test("max_message_length: a larger EVENT is refused", async () => {
    const c = await authed();
    const e = ALLOWED.sign({ kind: 1, content: "x".repeat(5000), tags: Array.from({ length: 40 }, () => ["t", "y".repeat(1700)]) });
    expect(JSON.stringify(["EVENT", e]).length).toBeGreaterThan(65536);
    const [, , ok, msg] = await c.publish(e);
    expect(ok).toBe(false);
    expect(msg).toStartWith("invalid:");
  });
});

// ---- CORS preflight, methods, other paths --------------------------------------------------

describe("HTTP", () => {
  test("OPTIONS preflight: 204 with the three CORS headers", async () => {
    const res = await fetch(httpUrl(plain), {
      method: "OPTIONS",
      headers: { Origin: "https://client.example", "Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "accept" },
    });
    expect(res.status).toBe(204);
    expectCors(res);
    expect(await res.text()).toBe("");
  });

  test("a browser GET (Accept: text/html) gets the landing page", async () => {
    const res = await fetch(httpUrl(plain), { headers: { Accept: "text/html,application/xhtml+xml,*/*;q=0.8" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toStartWith("text/html");
    const html = await res.text();
    expect(html).toContain("<html");
    expect(html).toContain(defaults().info.name);
    expect(html).toContain(plain.url); // ws://127.0.0.1:<port>/ from the request's Host
    expect(html).toMatch(/ws:\/\/127\.0\.0\.1:\d+\//);
    expect(html).toContain("NIP-01");
    expect(html).toContain("NIP-11");
    expect(html).toContain("NIP-42");
  });

  test("the landing page uses info.relay_url when set, and escapes the name", async () => {
    const html = await (await fetch(httpUrl(configured), { headers: { Accept: "text/html" } })).text();
    expect(html).toContain("wss://relay.example.com/");
    expect(html).not.toContain("Test <Relay>");
    expect(html).toContain("Test &#60;Relay&#62; &#38; co");
  });

  test("unknown paths are 404, for JSON, HTML and websocket alike", async () => {
    for (const path of ["/foo", "/index.html", "/.well-known/nostr.json", "/favicon.png"]) {
      expect((await getInfo(httpUrl(plain, path))).status).toBe(404);
      expect((await fetch(httpUrl(plain, path), { headers: { Accept: "text/html" } })).status).toBe(404);
    }
    await expect(Client.connect(plain.url.replace(/\/$/, "/foo"))).rejects.toThrow();
  });

  test("a relay on network.path = /nostr serves NIP-11 and websockets there only", async () => {
    expect(mounted.url).toEndWith("/nostr");
    const res = await getInfo(httpUrl(mounted));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toStartWith(NOSTR_JSON);
    expectCors(res);
    expect(((await res.json()) as Record<string, unknown>).supported_nips).toContain(11);

    const html = await (await fetch(httpUrl(mounted), { headers: { Accept: "text/html" } })).text();
    expect(html).toContain(mounted.url); // ws://127.0.0.1:<port>/nostr

    for (const path of ["/", "/nostr/x", "/nostrx"]) {
      expect((await getInfo(httpUrl(mounted, path))).status).toBe(404);
      expect((await fetch(httpUrl(mounted, path), { method: "OPTIONS" })).status).toBe(404);
    }

    // Websocket on /nostr: a working relay connection.
    const c = await connect(mounted.url);
    expect((await c.next((f) => f[0] === "AUTH"))[1]).toBeString();
    const s = signer();
    const e = s.sign({ kind: 1, content: "on /nostr" });
    expect(await c.publish(e)).toEqual(["OK", e.id, true, ""]);
    expect((await c.req("q", { ids: [e.id] })).events).toEqual([e]);

    // …and not on /.
    await expect(Client.connect(mounted.url.replace(/\/nostr$/, "/"))).rejects.toThrow();
  });
});

describe("NIP-29 in the document", () => {
  test("self is always the relay key; with groups on, an empty pubkey is the relay key too (nostr-tools reads it there) and 29 is listed", async () => {
    const self = plain.ctx.relayKey.pubkey;
    const off = (await (await getInfo(httpUrl(plain))).json()) as Record<string, any>;
    expect(off.self).toBe(self);
    expect(off.pubkey).toBeUndefined();
    expect(off.supported_nips).not.toContain(29);

    const on = await startTestRelay({ groups: { enabled: true, creators: ["anyone"] } });
    const operator = await startTestRelay({ groups: { enabled: true, creators: ["anyone"] }, info: { pubkey: ADMIN } });
    try {
      const doc = (await (await getInfo(httpUrl(on))).json()) as Record<string, any>;
      expect(doc.self).toBe(on.ctx.relayKey.pubkey);
      expect(doc.pubkey).toBe(on.ctx.relayKey.pubkey);
      expect(doc.supported_nips).toContain(29);
      // An operator's pubkey stays what it is.
      const op = (await (await getInfo(httpUrl(operator))).json()) as Record<string, any>;
      expect(op.pubkey).toBe(ADMIN);
      expect(op.self).toBe(operator.ctx.relayKey.pubkey);
    } finally {
      await Promise.all([on.stop(), operator.stop()]);
    }
  });

  test("with groups off, an h-tagged event for a group nobody made is stored like any other", async () => {
    const c = await connect(plain.url);
    const s = signer();
    const e = s.sign({ kind: 9, content: "hello", tags: [["h", "nosuchgroup"]] });
    expect(await c.publish(e)).toEqual(["OK", e.id, true, ""]);
    expect((await c.req("h", { "#h": ["nosuchgroup"] })).events).toEqual([e]);
  });
});
