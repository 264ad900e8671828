import { expect, test } from "bun:test";
import { ipGroup, isPrivateAddress, proxyWarning } from "./ip.ts";

test("IPv4 addresses are their own group", () => {
  expect(ipGroup("203.0.113.7")).toBe("203.0.113.7");
  expect(ipGroup("::ffff:203.0.113.7")).toBe("203.0.113.7");
});

test("IPv6 addresses group by /64, however they are written", () => {
  const g = "2001:db8:1:2::/64";
  expect(ipGroup("2001:db8:1:2::1")).toBe(g);
  expect(ipGroup("2001:0db8:0001:0002:ffff:eeee:dddd:cccc")).toBe(g);
  expect(ipGroup("2001:DB8:1:2:0:0:0:9")).toBe(g);
  expect(ipGroup("[2001:db8:1:2::5]")).toBe(g);
  expect(ipGroup("fe80::1%eth0")).toBe("fe80:0:0:0::/64");
  expect(ipGroup("2001:db8:1:3::1")).not.toBe(g);
  expect(ipGroup("::1")).toBe("0:0:0:0::/64");
});

test("loopback, private and link-local addresses are private; public ones and garbage are not", () => {
  const yes = ["127.0.0.1", "127.9.8.7", "::ffff:127.0.0.1", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "169.254.0.9"];
  const v6 = ["::1", "0:0:0:0:0:0:0:1", "[::1]", "fc00::1", "fd12:3456::9", "FD00::1", "fe80::1%eth0", "febf::1"];
  for (const ip of [...yes, ...v6]) expect([ip, isPrivateAddress(ip)]).toEqual([ip, true]);
  const no = ["203.0.113.7", "172.15.0.1", "172.32.0.1", "192.169.0.1", "11.0.0.1", "100.64.0.1", "::ffff:8.8.8.8"];
  const no6 = ["2001:db8::1", "::", "::2", "fc::1", "fec0::1", "fe8::1", "", "localhost", "1::1"];
  for (const ip of [...no, ...no6]) expect([ip, isPrivateAddress(ip)]).toEqual([ip, false]);
});

test("proxyWarning: a loopback or private peer forwarding for others while the config does not read it", () => {
  const unset = { remote_ip_header: "", trusted_proxies: [] };
  const xff = new Headers({ "X-Forwarded-For": "203.0.113.7" });
  expect(proxyWarning("127.0.0.1", xff, unset, true)).toStartWith(
    "warning: websocket connections from 127.0.0.1 carry x-forwarded-for (a reverse proxy?) but [network] remote_ip_header is not set",
  );
  expect(proxyWarning("127.0.0.1", xff, unset, true)).toContain(
    'Set [network] remote_ip_header = "x-forwarded-for" and trusted_proxies = ["127.0.0.1"]',
  );
  expect(proxyWarning("10.0.0.2", new Headers({ "X-Real-IP": "1.2.3.4" }), unset, true)).toContain('remote_ip_header = "x-real-ip"');
  expect(proxyWarning("::1", new Headers({ Forwarded: "for=1.2.3.4" }), unset, true)).toContain("Forwarded is not read");
  // No forwarding header, or a public peer (which could be any client writing the header): nothing.
  expect(proxyWarning("127.0.0.1", new Headers(), unset, true)).toBeUndefined();
  expect(proxyWarning("203.0.113.9", xff, unset, true)).toBeUndefined();
  // The header is set but the peer is not a trusted proxy.
  const untrusted = { remote_ip_header: "x-forwarded-for", trusted_proxies: ["::1"] };
  expect(proxyWarning("127.0.0.1", xff, untrusted, true)).toContain(
    "but 127.0.0.1 is not in [network] trusted_proxies, so the header is ignored",
  );
  // Set up right: nothing.
  expect(proxyWarning("127.0.0.1", xff, { remote_ip_header: "X-Forwarded-For", trusted_proxies: ["127.0.0.1"] }, true)).toBeUndefined();
});
