import { describe, expect, test } from "bun:test";
import { addressOfProfile, formatAddress, isLoopbackHost, namesMatch, parseAddress, siteOf, wellKnownUrl } from "./nip05.ts";

const pk = "b0635d6a9851d3aed0cd6c495b282167acf761729078d975fc341b22650b07b9";

describe("NIP-05", () => {
  test("an address splits into a lowercase name and domain; a bare domain is the root name _", () => {
    expect(parseAddress("bob@example.com")).toEqual({ name: "bob", domain: "example.com" });
    expect(parseAddress(" Bob.Smith_1-x@Example.COM ")).toEqual({ name: "bob.smith_1-x", domain: "example.com" });
    expect(parseAddress("example.com")).toEqual({ name: "_", domain: "example.com" });
    expect(parseAddress("_@example.com")).toEqual({ name: "_", domain: "example.com" });
    expect(parseAddress("bob@127.0.0.1:8080")).toEqual({ name: "bob", domain: "127.0.0.1:8080" });
    expect(parseAddress("bob@[::1]:8080")).toEqual({ name: "bob", domain: "[::1]:8080" });
    expect(parseAddress("bob@localhost")).toEqual({ name: "bob", domain: "localhost" });
  });

  test("what is not an address is refused", () => {
    for (const bad of [
      "",
      "@example.com",
      "bob@",
      "bo b@example.com",
      "bob+tag@example.com",
      "bob@ex ample.com",
      "bob@intranet",
      "bob@example.com/path",
      "https://example.com",
      "bob@-example.com",
      "bob@example.com:99999",
      "bob@exa_mple.com",
      `${"a".repeat(320)}@example.com`,
    ])
      expect(parseAddress(bad)).toBeUndefined();
    // Two @: the last one splits, and the local part with an @ is not a name.
    expect(parseAddress("a@b@example.com")).toBeUndefined();
  });

  test("shown as written, the root name as its bare domain", () => {
    expect(formatAddress({ name: "bob", domain: "example.com" })).toBe("bob@example.com");
    expect(formatAddress({ name: "_", domain: "example.com" })).toBe("example.com");
  });

  test("the well-known URL is https, http only for a loopback host with the loopback switch", () => {
    expect(wellKnownUrl({ name: "bob", domain: "example.com" }, false)).toBe("https://example.com/.well-known/nostr.json?name=bob");
    expect(wellKnownUrl({ name: "bob", domain: "example.com" }, true)).toBe("https://example.com/.well-known/nostr.json?name=bob");
    expect(wellKnownUrl({ name: "_", domain: "127.0.0.1:9" }, false)).toBe("https://127.0.0.1:9/.well-known/nostr.json?name=_");
    expect(wellKnownUrl({ name: "_", domain: "127.0.0.1:9" }, true)).toBe("http://127.0.0.1:9/.well-known/nostr.json?name=_");
    expect(wellKnownUrl({ name: "a", domain: "[::1]:9" }, true)).toBe("http://[::1]:9/.well-known/nostr.json?name=a");
    expect(isLoopbackHost("localhost:80")).toBe(true);
    expect(isLoopbackHost("127.0.0.2")).toBe(false);
    expect(isLoopbackHost("example.com")).toBe(false);
  });

  test("a profile's nip05 is read from its content", () => {
    expect(addressOfProfile(JSON.stringify({ name: "bob", nip05: " bob@example.com " }))).toBe("bob@example.com");
    expect(addressOfProfile(JSON.stringify({ name: "bob" }))).toBeUndefined();
    expect(addressOfProfile(JSON.stringify({ nip05: "" }))).toBeUndefined();
    expect(addressOfProfile(JSON.stringify({ nip05: 5 }))).toBeUndefined();
    expect(addressOfProfile("not json")).toBeUndefined();
    expect(addressOfProfile("[]")).toBeUndefined();
    expect(addressOfProfile("null")).toBeUndefined();
  });

  test("names match the pubkey, name another, omit it, or are garbage", () => {
    expect(namesMatch({ names: { bob: pk } }, "bob", pk)).toBe("match");
    expect(namesMatch({ names: { bob: pk.toUpperCase() } }, "bob", pk)).toBe("match");
    expect(namesMatch({ names: { bob: "ab".repeat(32) } }, "bob", pk)).toBe("mismatch");
    expect(namesMatch({ names: { alice: pk } }, "bob", pk)).toBe("mismatch");
    expect(namesMatch({ names: {} }, "bob", pk)).toBe("mismatch");
    expect(namesMatch({ names: { Bob: "ab".repeat(32) } }, "bob", pk)).toBe("mismatch");
    // An inherited property is not a listed name.
    expect(namesMatch({ names: {} }, "constructor", pk)).toBe("mismatch");
    expect(namesMatch({ names: { bob: 7 } }, "bob", pk)).toBe("mismatch");
    expect(namesMatch({ names: [pk] }, "0", pk)).toBe("garbage");
    expect(namesMatch({ names: "bob" }, "bob", pk)).toBe("garbage");
    expect(namesMatch([], "bob", pk)).toBe("garbage");
    expect(namesMatch("x", "bob", pk)).toBe("garbage");
    expect(namesMatch(null, "bob", pk)).toBe("garbage");
  });

  test("a host's site: its registrable part, roughly", () => {
    expect(siteOf("h7.attacker.example")).toBe("attacker.example");
    expect(siteOf("a.b.c.attacker.example:8443")).toBe("attacker.example");
    expect(siteOf("example.com")).toBe("example.com");
    expect(siteOf("x.b.co.uk")).toBe("b.co.uk");
    expect(siteOf("127.0.0.1:8080")).toBe("127.0.0.1");
    expect(siteOf("[::1]:80")).toBe("[::1]");
    expect(siteOf("localhost")).toBe("localhost");
  });

  test("a document without a names object is garbage (a fault), not a mismatch", () => {
    expect(namesMatch({ error: "not found" }, "bob", pk)).toBe("garbage");
    expect(namesMatch({}, "bob", pk)).toBe("garbage");
    expect(namesMatch({ names: null }, "bob", pk)).toBe("garbage");
  });

  test("names are matched case-insensitively (NIP-05: the local part is)", () => {
    expect(namesMatch({ names: { Bob: pk } }, "bob", pk)).toBe("match");
    expect(namesMatch({ names: { BOB: pk.toUpperCase() } }, "bob", pk)).toBe("match");
    expect(namesMatch({ names: { Bob: "ab".repeat(32), bob: pk } }, "bob", pk)).toBe("match");
  });
});
