import { expect, test } from "bun:test";
import { ipGroup } from "./ip.ts";

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
