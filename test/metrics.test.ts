// GET /metrics over real HTTP with traffic over real websockets: the numbers move with what
// happened, the gate (enabled, token) holds, and the body is valid Prometheus text 0.0.4.
// Each check compares a scrape before and after its own traffic.
import { afterEach, describe, expect, test } from "bun:test";
import { Exposition, Histogram } from "../src/http/exposition.ts";
import { metricsResponse } from "../src/http/metrics.ts";
import { defaults } from "../src/config/schema.ts";
import { MAX_KIND_LABELS } from "../src/observe/metrics.ts";
import { createGroup, join, mod } from "./groups-helpers.ts";
import { accepted, Client, failOnRelayErrors, refusedWith, signer, startTestRelay, type ConfigPatch, type TestRelay } from "./helpers.ts";

failOnRelayErrors();

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const promNumber = (t: string): number => (t === "+Inf" ? Infinity : t === "-Inf" ? -Infinity : Number(t));

/** Parses exposition text, failing on anything the format does not allow. */
function parseExposition(text: string): { types: Map<string, string>; samples: Sample[] } {
  expect(text.endsWith("\n")).toBe(true);
  const types = new Map<string, string>();
  const helps = new Set<string>();
  const samples: Sample[] = [];
  let current = "";
  for (const line of text.slice(0, -1).split("\n")) {
    const meta = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line);
    if (meta) {
      const [, what, name, rest] = meta;
      if (what === "HELP") helps.add(name!);
      else {
        expect(["counter", "gauge", "histogram", "summary", "untyped"]).toContain(rest!);
        expect(types.has(name!)).toBe(false); // one TYPE per family
        types.set(name!, rest!);
        current = name!;
      }
      continue;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${JSON.stringify(line)}`);
    const [, name, labelText, valueText] = m;
    const labels: Record<string, string> = {};
    if (labelText) {
      const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)/y;
      let at = 0;
      while (at < labelText.length) {
        re.lastIndex = at;
        const l = re.exec(labelText);
        if (!l) throw new Error(`bad labels: ${labelText}`);
        labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
        at = re.lastIndex;
      }
    }
    const value = promNumber(valueText!);
    expect(valueText === "NaN" || !Number.isNaN(value)).toBe(true);
    // Every sample belongs to the family declared just before it.
    const family = types.get(current) === "histogram" ? name!.replace(/_(bucket|sum|count)$/, "") : name!;
    if (family !== current) throw new Error(`sample ${name} outside its family (current: ${current})`);
    samples.push({ name: name!, labels, value });
  }
  for (const name of types.keys()) expect(helps.has(name)).toBe(true);
  // Histograms: buckets cumulative, +Inf bucket equal to _count.
  for (const [name, type] of types) {
    if (type !== "histogram") continue;
    const buckets = samples.filter((s) => s.name === `${name}_bucket`);
    expect(buckets.length).toBeGreaterThan(1);
    for (let i = 1; i < buckets.length; i++) {
      expect(promNumber(buckets[i]!.labels.le!)).toBeGreaterThan(promNumber(buckets[i - 1]!.labels.le!));
      expect(buckets[i]!.value).toBeGreaterThanOrEqual(buckets[i - 1]!.value);
    }
    expect(buckets.at(-1)!.labels.le).toBe("+Inf");
    expect(buckets.at(-1)!.value).toBe(samples.find((s) => s.name === `${name}_count`)!.value);
    expect(samples.some((s) => s.name === `${name}_sum`)).toBe(true);
  }
  return { types, samples };
}

/** The value of the one sample with these labels (0 when absent: counters start unreported). */
function sampleValue(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  expect(found.length).toBeLessThanOrEqual(1);
  return found[0]?.value ?? 0;
}

const httpBase = (r: TestRelay) => `http://127.0.0.1:${r.server.port}`;

async function scrape(r: TestRelay, headers: Record<string, string> = {}): Promise<Sample[]> {
  const res = await fetch(`${httpBase(r)}/metrics`, { headers });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
  return parseExposition(await res.text()).samples;
}

let relay: TestRelay | undefined;
const clients: Client[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  await relay?.stop();
  relay = undefined;
});

async function start(patch: ConfigPatch = {}): Promise<TestRelay> {
  relay = await startTestRelay(patch);
  return relay;
}

async function connect(r: TestRelay): Promise<Client> {
  const c = await Client.connect(r.url);
  clients.push(c);
  return c;
}

describe("metrics move with traffic", () => {
  test("messages, event results, fanout, connections, subscriptions, writer", async () => {
    const r = await start({ limits: { max_content_length: 100 } });
    const subscriber = await connect(r);
    const publisher = await connect(r);
    const before = await scrape(r);
    expect(sampleValue(before, "nostr_connections")).toBe(2);
    expect(sampleValue(before, "nostr_subscriptions")).toBe(0);

    expect((await subscriber.req("live", { kinds: [1] })).end[0]).toBe("EOSE");
    const alice = signer();
    const a = alice.sign({ kind: 1, content: "one" });
    const b = alice.sign({ kind: 1, content: "two" });
    await accepted(publisher, a);
    await accepted(publisher, b);
    expect(await publisher.publish(a)).toEqual(["OK", a.id, true, "duplicate: already have this event"]);
    const forged = { ...alice.sign({ kind: 1, content: "three" }) };
    forged.sig = (forged.sig[0] === "0" ? "1" : "0") + forged.sig.slice(1);
    await refusedWith(publisher, forged, "invalid:");
    await refusedWith(publisher, alice.sign({ kind: 1, content: "x".repeat(101) }), "invalid:");
    await subscriber.next((f) => f[0] === "EVENT" && f[1] === "live" && f[2].id === b.id);
    const from = publisher.frames.length;
    publisher.send("not json");
    await publisher.next((f) => f[0] === "NOTICE", 5000, from);

    const after = await scrape(r);
    const delta = (name: string, labels: Record<string, string> = {}) =>
      sampleValue(after, name, labels) - sampleValue(before, name, labels);
    expect(delta("nostr_client_messages_total", { verb: "EVENT" })).toBe(5);
    expect(delta("nostr_client_messages_total", { verb: "REQ" })).toBe(1);
    expect(delta("nostr_client_messages_total", { verb: "invalid" })).toBe(1);
    expect(delta("nostr_relay_messages_total", { verb: "OK" })).toBe(5);
    expect(delta("nostr_relay_messages_total", { verb: "NOTICE" })).toBe(1);
    expect(delta("nostr_relay_messages_total", { verb: "EOSE" })).toBe(1);
    const kind1 = (result: string, reason: string) => delta("nostr_events_received_total", { result, reason, kind: "1" });
    expect(kind1("accepted", "")).toBe(2);
    expect(kind1("duplicate", "duplicate")).toBe(1);
    expect(kind1("refused", "invalid")).toBe(2);
    expect(delta("nostr_fanout_deliveries_total")).toBe(2);
    expect(sampleValue(after, "nostr_subscriptions")).toBe(1);
    expect(sampleValue(after, "nostr_subscription_groups")).toBe(1);
    // The one REQ that reached its EOSE, timed on the relay's side: in the histogram's buckets,
    // cumulative, every bound at least the one before.
    expect(delta("bunstr_req_seconds_count")).toBe(1);
    expect(delta("bunstr_req_seconds_sum")).toBeGreaterThan(0);
    expect(delta("bunstr_req_seconds_bucket", { le: "+Inf" })).toBe(1);
    expect(delta("bunstr_req_seconds_bucket", { le: "10" })).toBe(1);
    expect(delta("bunstr_req_seconds_bucket", { le: "0.0005" })).toBeLessThanOrEqual(1);
    expect(delta("bunstr_writer_batch_size_count")).toBeGreaterThanOrEqual(1);
    expect(delta("bunstr_writer_batch_size_sum")).toBe(2);
    expect(delta("bunstr_writer_commit_seconds_count")).toBe(delta("bunstr_writer_batch_size_count"));
    expect(sampleValue(after, "bunstr_database_size_bytes")).toBeGreaterThan(0);
    expect(sampleValue(after, "process_resident_memory_bytes")).toBeGreaterThan(0);
    // The RSS split (Linux): the process's own pages and mapped files', which make it up together
    // (read a moment apart in one scrape).
    const anon = sampleValue(after, "bunstr_resident_anonymous_bytes");
    const file = sampleValue(after, "bunstr_resident_file_bytes");
    expect(anon).toBeGreaterThan(0);
    expect(file).toBeGreaterThan(0);
    expect((anon + file) / sampleValue(after, "process_resident_memory_bytes")).toBeWithin(0.8, 1.25);
    expect(sampleValue(after, "process_cpu_seconds_total")).toBeGreaterThan(0);
    expect(sampleValue(after, "process_start_time_seconds")).toBeCloseTo(r.ctx.startedAt / 1000, 3);

    // Closing the subscription and a connection shows at the next scrape.
    subscriber.send(["CLOSE", "live"]);
    publisher.close();
    // The COUNT is answered after the CLOSE sent before it was handled; the publisher's close
    // reaches the server on its own: scrape until it shows, with a deadline.
    expect((await subscriber.count("fence", [{ ids: ["0".repeat(64)] }]))[0]).toBe("COUNT");
    let later = await scrape(r);
    for (const deadline = Date.now() + 5000; sampleValue(later, "nostr_connections") !== 1 && Date.now() < deadline; ) {
      await Bun.sleep(10);
      later = await scrape(r);
    }
    expect(sampleValue(later, "nostr_subscriptions")).toBe(0);
    expect(sampleValue(later, "nostr_connections")).toBe(1);
    expect(
      sampleValue(later, "nostr_client_messages_total", { verb: "CLOSE" }) -
        sampleValue(after, "nostr_client_messages_total", { verb: "CLOSE" }),
    ).toBe(1);
  });

  test("stored events: counted at the first scrape, then cached", async () => {
    const r = await start();
    const c = await connect(r);
    const s = signer();
    for (let i = 0; i < 3; i++) await accepted(c, s.sign({ kind: 1, content: `n${i}` }));
    expect(sampleValue(await scrape(r), "bunstr_events_stored")).toBe(3);
    await accepted(c, s.sign({ kind: 1, content: "n3" }));
    // Within the cache period the count stays: a scrape never scans the table twice in 10 s.
    expect(sampleValue(await scrape(r), "bunstr_events_stored")).toBe(3);
  });

  test("the kind label is bounded", async () => {
    const r = await start();
    for (let k = 40000; k < 40000 + MAX_KIND_LABELS + 10; k++) r.ctx.metrics.countEventResult(k, true, "");
    const samples = await scrape(r);
    const kinds = new Set(samples.filter((s) => s.name === "nostr_events_received_total").map((s) => s.labels.kind));
    expect(kinds.size).toBeLessThanOrEqual(MAX_KIND_LABELS + 2); // + "other" and "unknown"
    expect(sampleValue(samples, "nostr_events_received_total", { result: "accepted", reason: "", kind: "other" })).toBeGreaterThanOrEqual(
      10,
    );
  });
});

describe("NIP-29 groups", () => {
  test("bunstr_groups and bunstr_group_members read the group state; refusals of group events are counted by reason", async () => {
    const r = await start({ groups: { enabled: true, creators: ["anyone"] } });
    const c = await connect(r);
    const [owner, other, m1, m2] = [signer(), signer(), signer(), signer()];
    await createGroup(c, r, owner, "alpha");
    const c2 = await connect(r);
    await createGroup(c2, r, other, "beta");
    for (const m of [m1, m2]) expect((await join(c, m, "alpha"))[2]).toBe(true);
    expect((await join(c, m1, "beta"))[2]).toBe(true);
    const before = await scrape(r);
    expect(sampleValue(before, "bunstr_groups")).toBe(2);
    expect(sampleValue(before, "bunstr_group_members")).toBe(5); // two owners (admins) and three joins
    await refusedWith(c, mod(9, m1, "nowhere"), "invalid:");
    await refusedWith(c, mod(9021, m1, "alpha"), "duplicate:");
    await refusedWith(c, mod(9, m1, "alpha", [], Math.floor(Date.now() / 1000) - 7200), "invalid:");
    // Not a group event: not counted here.
    await refusedWith(c, { ...m1.sign({ kind: 1, content: "x" }), sig: "00".repeat(64) }, "invalid:");
    const after = await scrape(r);
    expect(sampleValue(after, "bunstr_group_refusals_total", { reason: "invalid" })).toBe(
      sampleValue(before, "bunstr_group_refusals_total", { reason: "invalid" }) + 2,
    );
    expect(sampleValue(after, "bunstr_group_refusals_total", { reason: "duplicate" })).toBe(1);
  });

  test("no group metrics while [groups] is off", async () => {
    const r = await start();
    expect((await scrape(r)).some((s) => s.name.startsWith("bunstr_group"))).toBe(false);
  });
});

describe("the gate", () => {
  test("a token is required when set, read at request time", async () => {
    const r = await start({ metrics: { token: "s3cret-token" } });
    const url = `${httpBase(r)}/metrics`;
    expect((await fetch(url)).status).toBe(401);
    expect((await fetch(url, { headers: { Authorization: "Bearer wrong-token" } })).status).toBe(401);
    expect((await fetch(url, { headers: { Authorization: "Bearer s3cret-token-longer" } })).status).toBe(401);
    expect((await fetch(url, { headers: { Authorization: "Basic s3cret-token" } })).status).toBe(401);
    await scrape(r, { Authorization: "Bearer s3cret-token" });
    // A reload changes config in place.
    r.ctx.config.metrics.token = "";
    await scrape(r);
    r.ctx.config.metrics.enabled = false;
    expect((await fetch(url)).status).toBe(404);
  });

  test("without a token, served only to loopback and not through a proxy, unless public", async () => {
    const r = await start();
    const url = `${httpBase(r)}/metrics`;
    await scrape(r); // a scraper on the same host
    // A reverse proxy on the same host connects from loopback too: what it forwards is not local.
    const forwarded: Record<string, string>[] = [
      { "X-Forwarded-For": "203.0.113.7" },
      { Forwarded: "for=203.0.113.7" },
      { "X-Real-IP": "203.0.113.7" },
    ];
    for (const h of forwarded) {
      const res = await fetch(url, { headers: h });
      expect(res.status).toBe(403);
      expect(await res.text()).toContain("[metrics] token");
    }
    r.ctx.config.metrics.public = true; // reloadable
    await scrape(r, { "X-Forwarded-For": "203.0.113.7" });
    r.ctx.config.metrics.public = false;
    r.ctx.config.metrics.token = "t0ken";
    await scrape(r, { "X-Forwarded-For": "203.0.113.7", Authorization: "Bearer t0ken" });
    expect((await fetch(url, { headers: { "X-Forwarded-For": "203.0.113.7" } })).status).toBe(401);
  });

  test("a peer that is not loopback (tests connect only over loopback, so the gate is called directly)", async () => {
    const config = defaults();
    const req = () => new Request("http://relay.example.com/metrics");
    const render = async () => "m 1\n";
    expect((await metricsResponse(req(), config, render, "203.0.113.7")).status).toBe(403);
    expect((await metricsResponse(req(), config, render, "::ffff:10.0.0.1")).status).toBe(403);
    for (const peer of ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"])
      expect((await metricsResponse(req(), config, render, peer)).status).toBe(200);
    // Next to loopback, not in it.
    for (const peer of ["128.0.0.1", "::2"]) expect((await metricsResponse(req(), config, render, peer)).status).toBe(403);
    config.metrics.public = true;
    expect((await metricsResponse(req(), config, render, "203.0.113.7")).status).toBe(200);
  });

  test("404 when disabled; /metrics whatever the relay path is", async () => {
    const off = await start({ metrics: { enabled: false } });
    expect((await fetch(`${httpBase(off)}/metrics`)).status).toBe(404);
    await off.stop();
    const r = await start({ network: { path: "/relay" } as ConfigPatch["network"] });
    await scrape(r);
    expect((await fetch(`${httpBase(r)}/metrics`, { method: "POST" })).status).toBe(405);
  });

  test("a relay served at /metrics keeps its websocket and NIP-11", async () => {
    const r = await start({ network: { path: "/metrics" } as ConfigPatch["network"] });
    const c = await connect(r);
    expect((await c.req("x", { limit: 1 })).end[0]).toBe("EOSE");
    const info = await fetch(`${httpBase(r)}/metrics`, { headers: { Accept: "application/nostr+json" } });
    expect(info.headers.get("content-type")).toContain("application/nostr+json");
    await scrape(r);
  });
});

describe("exposition text", () => {
  test("label values and help are escaped", () => {
    const escaped = new Exposition()
      .family("e", "gauge", 'a\\b"c\nd')
      .sample("e", 1, [["v", 'a\\b"c\nd']])
      .text();
    expect(escaped).toContain('# HELP e a\\\\b"c\\nd\n');
    expect(escaped).toContain('e{v="a\\\\b\\"c\\nd"} 1\n');
    const h = new Histogram([1, 5]);
    [0.5, 1, 3, 7, 100].forEach((v) => h.observe(v));
    const x = new Exposition()
      .family("t_total", "counter", "help with \\ and\nnewline")
      .sample("t_total", 1, [["v", 'q"\\\n']])
      .histogram("t_h", "h", h);
    const { samples } = parseExposition(x.text());
    expect(samples[0]).toEqual({ name: "t_total", labels: { v: 'q"\\\n' }, value: 1 });
    expect(samples.filter((s) => s.name === "t_h_bucket").map((s) => s.value)).toEqual([2, 3, 5]);
    expect(sampleValue(samples, "t_h_sum")).toBe(111.5);
    expect(() => new Exposition().family("a", "gauge", "").family("a", "gauge", "")).toThrow();
  });
});
