// The NIP-05 fetch against a real HTTP server that misbehaves in each way the relay must bound:
// a 50 MB body, a redirect loop, no answer, a trickle, garbage, a 500; and the hosts it refuses.
import { afterAll, describe, expect, test } from "bun:test";
import { fetchNostrJson, isInternalAddress, sizeText, type FetchLimits } from "../src/access/nip05-fetch.ts";
import { wellKnownUrl } from "../src/nips/nip05.ts";
import { startFakeNostrJson } from "./fakes/nostr-json.ts";
import { waitUntil } from "./helpers.ts";

const pk = "ab".repeat(32);
const fake = startFakeNostrJson();
afterAll(() => fake.close());
const limits: FetchLimits = { timeoutMs: 1000, maxBytes: 65536, loopback: true };
const urlOf = (name: string, domain = fake.domain) => wellKnownUrl({ name, domain }, true);

describe("fetchNostrJson", () => {
  test("a listed name comes back as the JSON", async () => {
    fake.names.set("bob", pk);
    expect(await fetchNostrJson(urlOf("bob"), limits)).toEqual({ kind: "json", json: { names: { bob: pk } } });
    expect(await fetchNostrJson(urlOf("nobody"), limits)).toEqual({ kind: "json", json: { names: {} } });
  });

  test("a 50 MB body is cut at the cap, having read little of it", async () => {
    fake.modes.set("huge", "huge");
    const t0 = performance.now();
    expect(await fetchNostrJson(urlOf("huge"), limits)).toEqual({ kind: "fault", error: "response larger than 64 KiB" });
    expect(performance.now() - t0).toBeLessThan(2000);
    // The server wrote far less than its 50 MB before the reader went away (socket buffers aside):
    // counted once the server has seen it go (its stream cancelled).
    await waitUntil("the huge body cancelled", () => fake.hugeCancelled() === 1, 5000);
    expect(fake.hugeBytesSent()).toBeLessThan(20 * 1024 * 1024);
  });

  test("a redirect is not followed: one request, a fault", async () => {
    fake.modes.set("loop", "redirect-loop");
    expect(await fetchNostrJson(urlOf("loop"), limits)).toEqual({ kind: "fault", error: "redirects are not followed" });
    expect(fake.requestsFor("loop")).toHaveLength(1);
  });

  test("a server that never answers, or trickles, times out at the deadline", async () => {
    fake.modes.set("hang", "hang");
    fake.modes.set("slow", "trickle");
    fake.names.set("slow", pk);
    for (const name of ["hang", "slow"]) {
      const t0 = performance.now();
      expect(await fetchNostrJson(urlOf(name), { ...limits, timeoutMs: 300 })).toEqual({ kind: "fault", error: "no answer within 300 ms" });
      const took = performance.now() - t0;
      expect(took).toBeGreaterThanOrEqual(290);
      expect(took).toBeLessThan(3000);
    }
  });

  test("garbage and a 500 are faults", async () => {
    fake.modes.set("junk", "garbage");
    fake.modes.set("err", "500");
    expect(await fetchNostrJson(urlOf("junk"), limits)).toEqual({ kind: "fault", error: "the answer is not JSON" });
    expect(await fetchNostrJson(urlOf("err"), limits)).toEqual({ kind: "fault", error: "HTTP 500" });
  });

  test("without http_loopback: http is refused, and so are loopback and private addresses over https", async () => {
    const off = { ...limits, loopback: false };
    const before = fake.requests.length;
    expect(await fetchNostrJson(`http://${fake.domain}/.well-known/nostr.json?name=bob`, off)).toEqual({
      kind: "refused",
      error: "only https addresses are fetched",
    });
    expect((await fetchNostrJson(wellKnownUrl({ name: "bob", domain: fake.domain }, false), off)).kind).toBe("refused");
    expect(await fetchNostrJson("https://localhost/.well-known/nostr.json?name=bob", off)).toMatchObject({
      kind: "refused",
      error: expect.stringContaining("localhost resolves to a private or loopback address"),
    });
    // A public-looking name resolving into the LAN (or any of its addresses doing so).
    const lan = { ...off, resolve: async () => ["93.184.215.14", "10.0.0.7"] };
    expect(await fetchNostrJson("https://example.com/.well-known/nostr.json?name=bob", lan)).toEqual({
      kind: "refused",
      error: "example.com resolves to a private or loopback address (10.0.0.7): not fetched",
    });
    for (const host of ["[::1]", "0.0.0.0", "192.168.1.1", "[::ffff:7f00:1]"])
      expect((await fetchNostrJson(`https://${host}/.well-known/nostr.json?name=bob`, off)).kind).toBe("refused");
    // With the switch on, http goes to loopback hosts only.
    expect((await fetchNostrJson("http://example.com/.well-known/nostr.json?name=bob", limits)).kind).toBe("refused");
    expect(fake.requests.length).toBe(before);
  });

  test("IPv6 forms that carry a private IPv4 address are internal: NAT64, 6to4, mapped, compatible, Teredo (issue 33 review, L4)", () => {
    for (const ip of [
      "64:ff9b::7f00:1", // NAT64 of 127.0.0.1
      "64:ff9b::10.0.0.1",
      "64:ff9b:1::1", // NAT64 local use
      "2002:7f00:1::", // 6to4 of 127.0.0.1
      "2002:c0a8:101::1", // 6to4 of 192.168.1.1
      "::127.0.0.1", // IPv4-compatible
      "::a00:1",
      "::ffff:0:10.0.0.1", // SIIT
      "0:0:0:0:0:ffff:7f00:1",
      "[::ffff:192.168.0.1]",
      "2001:0:7f00:1::", // Teredo, server 127.0.0.1
      "2001:0:5db8:1::f5ff:fffe", // Teredo, client 10.0.0.1 (inverted)
    ])
      expect([ip, isInternalAddress(ip)]).toEqual([ip, true]);
    for (const ip of ["64:ff9b::5db8:d70e", "2002:5db8:d70e::1", "::ffff:93.184.215.14", "2001:0:5db8:d70e::a247:28f1", "2001:db8::1"])
      expect([ip, isInternalAddress(ip)]).toEqual([ip, false]);
  });

  test("only the default https port is fetched without http_loopback (issue 33 review, L4)", async () => {
    const off = { ...limits, loopback: false, resolve: async () => ["93.184.215.14"] };
    expect(await fetchNostrJson("https://example.com:8443/.well-known/nostr.json?name=bob", off)).toEqual({
      kind: "refused",
      error: "only the default https port (443) is fetched",
    });
    expect(await fetchNostrJson("https://93.184.215.14:22/.well-known/nostr.json?name=bob", off)).toMatchObject({ kind: "refused" });
  });

  test("the connection goes to the address that was checked, not to a second lookup of the name (DNS rebinding, issue 33 review, L4)", async () => {
    // The system resolver knows no `.invalid` name: a fetch that looked the name up again would say it does not resolve.
    const off = { ...limits, loopback: false, timeoutMs: 500, resolve: async () => ["192.0.2.1"] };
    const outcome = await fetchNostrJson("https://pinned.invalid/.well-known/nostr.json?name=bob", off);
    expect(outcome.kind).toBe("fault");
    expect(outcome).not.toEqual({ kind: "fault", error: "pinned.invalid does not resolve" });
  });

  test("a name that does not resolve is a fault", async () => {
    const off = { ...limits, loopback: false, resolve: () => Promise.reject(Object.assign(new Error("nx"), { code: "ENOTFOUND" })) };
    expect(await fetchNostrJson("https://nowhere.invalid/.well-known/nostr.json?name=bob", off)).toEqual({
      kind: "fault",
      error: "nowhere.invalid does not resolve",
    });
  });

  test("internal addresses and sizes", () => {
    for (const ip of [
      "127.0.0.1",
      "10.1.2.3",
      "172.16.0.1",
      "192.168.0.1",
      "169.254.1.1",
      "0.0.0.0",
      "100.64.0.1",
      "224.0.0.1",
      "::1",
      "::",
      "fd00::1",
      "fe80::1",
      "ff02::1",
      "::ffff:127.0.0.1",
      "::ffff:a00:1",
    ])
      expect(isInternalAddress(ip)).toBe(true);
    for (const ip of ["93.184.215.14", "1.1.1.1", "100.128.0.1", "2606:4700::1111", "::ffff:101:101"])
      expect(isInternalAddress(ip)).toBe(false);
    expect(sizeText(65536)).toBe("64 KiB");
    expect(sizeText(1000)).toBe("1000 bytes");
  });
});
