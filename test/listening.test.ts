// The start-up line says which addresses serve (0.0.0.0 and :: are listed as this machine's
// addresses), IPv6 in brackets, and the public URL when [info] relay_url is set (issue 16, item 7).
import { describe, expect, test } from "bun:test";
import { listeningOn, type ListeningInput } from "../src/cli/listening.ts";
import { startTestRelay } from "./helpers.ts";

/** A VPS: loopback, one public IPv4 and IPv6 address, a link-local one (not reachable by URL). */
const interfaces: ListeningInput["interfaces"] = {
  lo: [
    { address: "127.0.0.1", family: "IPv4", internal: true },
    { address: "::1", family: "IPv6", internal: true },
  ],
  eth0: [
    { address: "203.0.113.5", family: "IPv4", internal: false },
    { address: "2001:db8::5", family: "IPv6", internal: false },
    { address: "fe80::1", family: "IPv6", internal: false },
  ],
};
const line = (host: string, relayUrl = "") => listeningOn({ host, port: 7447, path: "/", relayUrl, interfaces });
const PUBLIC = "wss://relay.example.com/";

describe("start-up line: where the relay serves", () => {
  test("0.0.0.0 lists every IPv4 address of this machine, loopback first", () => {
    expect(line("0.0.0.0")).toBe("ws://127.0.0.1:7447/ and ws://203.0.113.5:7447/ (0.0.0.0 = all IPv4 addresses of this machine)");
    expect(line("0.0.0.0", PUBLIC)).toBe(
      "ws://127.0.0.1:7447/ and ws://203.0.113.5:7447/ (0.0.0.0 = all IPv4 addresses of this machine; public URL wss://relay.example.com/)",
    );
  });

  test(":: lists every address, IPv6 in brackets, without link-local ones", () => {
    expect(line("::")).toBe(
      "ws://127.0.0.1:7447/ and ws://[::1]:7447/, ws://203.0.113.5:7447/, ws://[2001:db8::5]:7447/ (:: = all addresses of this machine, IPv4 and IPv6)",
    );
    expect(line("::", PUBLIC)).toEndWith("(:: = all addresses of this machine, IPv4 and IPv6; public URL wss://relay.example.com/)");
  });

  test("one address is printed as itself, IPv6 in brackets", () => {
    expect(line("::1")).toBe("ws://[::1]:7447/");
    expect(line("::1", PUBLIC)).toBe("ws://[::1]:7447/ (public URL wss://relay.example.com/)");
    expect(line("127.0.0.1")).toBe("ws://127.0.0.1:7447/");
    expect(line("127.0.0.1", PUBLIC)).toBe("ws://127.0.0.1:7447/ (public URL wss://relay.example.com/)");
  });

  test("the path is kept; a machine without interfaces still gets its loopback URL", () => {
    expect(listeningOn({ host: "0.0.0.0", port: 80, path: "/nostr", relayUrl: "", interfaces: {} })).toStartWith(
      "ws://127.0.0.1:80/nostr ",
    );
    expect(listeningOn({ host: "::", port: 80, path: "/", relayUrl: "", interfaces: {} })).toStartWith(
      "ws://127.0.0.1:80/ and ws://[::1]:80/ ",
    );
  });
});

describe("the URL startRelay reports is one a client can connect to", () => {
  for (const [host, expected] of [
    ["::1", "[::1]"],
    ["::", "[::1]"],
    ["0.0.0.0", "127.0.0.1"],
  ] as const)
    test(`host ${host}`, async () => {
      const relay = await startTestRelay({ network: { host } as never });
      try {
        expect(relay.url).toBe(`ws://${expected}:${relay.server.port}/`);
        const res = await fetch(relay.url.replace("ws://", "http://"), { headers: { Accept: "application/nostr+json" } });
        expect(res.status).toBe(200);
      } finally {
        await relay.stop();
      }
    });
});
