// Issue 13 item 1, "file descriptors run out": TCP connections that send the start of an HTTP
// request and never finish it (reopened as soon as they are closed) fill the relay's descriptor
// table. The relay runs as a child process at `ulimit -n 256`, flooded from four 127.0.2.x
// addresses with more such connections than it has descriptors. It must stay up, answer the first
// REQ and EVENT of its life (worker threads started lazily at that moment would end the process),
// keep serving a websocket connected before the flood past the header timeout, cut the half-open
// requests within a second or two (Bun alone keeps them 10-13 s), and take a new client once the
// flood stops. The long version with figures: bench/fd-flood.ts.
import { afterAll, expect, spyOn, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { attackerIps, HalfOpenFlood } from "../bench/lib/flood.ts";
import { openFds, RELAY_MAIN, REPO_ROOT } from "../bench/lib/relay.ts";
import { connect as tcpConnect } from "node:net";
import { canonicalIp, connectionCeiling, FdGuard, fdReserve } from "../src/relay/connection/fd-guard.ts";
import { Client, signer } from "./helpers.ts";
import { spawnRelay, type RelayProcess } from "./process-helpers.ts";

const LIMIT = 256;
const dir = mkdtempSync(join(tmpdir(), "bunstr-fd-limits-"));
let relay: RelayProcess | undefined;
let flood: HalfOpenFlood | undefined;

afterAll(async () => {
  flood?.stop();
  relay?.proc.kill("SIGKILL");
  await relay?.proc.exited;
  rmSync(dir, { recursive: true, force: true });
});

const alive = () => relay!.proc.exitCode === null && relay!.proc.signalCode === null;

test("a half-open HTTP flood past the descriptor limit neither ends the relay nor starves its clients", async () => {
  // BUNSTR_RELAY_MAIN=<old checkout>/src/main.ts runs this against other code (it fails on the
  // code before the fix: "bun ran out of file descriptors (ProcessFdQuotaExceeded)", exit 1).
  const ulimit = ["sh", "-c", `ulimit -n ${LIMIT} && exec "$@"`, "sh", process.execPath, resolve(REPO_ROOT, RELAY_MAIN)];
  // More websockets than the limit could hold: lowered to the ceiling, with a warning.
  writeFileSync(join(dir, "bunstr.toml"), "[limits]\nmax_connections = 100000\n");
  relay = await spawnRelay(ulimit, ["--data-dir", dir, "--config", join(dir, "bunstr.toml")], dir);
  const established = await Client.connect(relay.url);
  const establishedAt = Date.now();
  await established.next((f) => f[0] === "AUTH");

  flood = new HalfOpenFlood({ port: relay.port, ips: attackerIps(4, 2), target: LIMIT * 2 });
  flood.start();
  // The table fills within a fraction of a second.
  const deadline = Date.now() + 5000;
  while (alive() && openFds(relay.proc.pid) < LIMIT - 32 && Date.now() < deadline) await Bun.sleep(20);
  expect(flood.stats().opened).toBeGreaterThan(LIMIT - 32);

  // The relay's first query and first signature check, with the table full.
  const fail = (what: string) => (err: unknown) => {
    throw new Error(
      `${what}: ${String(err)}; relay ${alive() ? "alive" : `exited ${relay!.proc.exitCode}`}:\n${relay!.output().slice(-800)}`,
    );
  };
  const { end } = await established.req("first", { kinds: [1], limit: 1 }).catch(fail("REQ"));
  expect(end).toEqual(["EOSE", "first"]);
  const e = signer().sign({ kind: 1, content: "published during the flood" });
  expect(await established.publish(e).catch(fail("EVENT"))).toEqual(["OK", e.id, true, ""]);
  expect(alive()).toBe(true);

  // Past the header timeout (5 s) for the established websocket, and more half-open requests cut
  // than the table holds: they were cut early and often, the established websocket was not.
  const cutDeadline = Date.now() + 15_000;
  while (alive() && (Date.now() < establishedAt + 5500 || flood.stats().cut <= LIMIT) && Date.now() < cutDeadline) await Bun.sleep(50);
  expect(alive()).toBe(true);
  const s = flood.stats();
  expect(s.cut).toBeGreaterThan(LIMIT);
  expect(s.lifetimes[s.lifetimes.length >> 1]!).toBeLessThan(3000);
  expect(established.closed ? `closed with ${established.closeCode}` : "open").toBe("open");
  const again = await established.req("again", { ids: [e.id] }).catch(fail("REQ after 5 s"));
  expect(again.events.map((x) => x.id)).toEqual([e.id]);

  flood.stop();
  const late = await Client.connect(relay.url);
  const { end: lateEnd } = await late.req("late", { limit: 1 });
  expect(lateEnd).toEqual(["EOSE", "late"]);
  late.close();
  established.close();
  expect(relay.output()).not.toContain("file descriptors (ProcessFdQuotaExceeded)");
  expect(relay.output()).toContain(
    `max_connections = 100000 does not fit the open-files limit ${LIMIT}; using ${connectionCeiling(LIMIT)}`,
  );
}, 40_000);

test("the reserve and the websocket ceiling follow the limit", () => {
  expect([256, 1024, 4096, 65536, 1 << 20].map((l) => [fdReserve(l), connectionCeiling(l)])).toEqual([
    [64, 64],
    [64, 832],
    [256, 3328],
    [1024, 62464],
    [1024, 1045504],
  ]);
});

test("peer addresses from Bun and from the kernel compare equal", () => {
  expect(canonicalIp("127.0.0.1")).toBe("127.0.0.1");
  expect(canonicalIp("::ffff:127.0.0.1")).toBe("127.0.0.1");
  expect(canonicalIp("::1")).toBe("0:0:0:0:0:0:0:1");
  expect(canonicalIp("2001:DB8::0:1")).toBe("2001:db8:0:0:0:0:0:1");
  expect(canonicalIp("fe80::1:2")).toBe("fe80:0:0:0:0:0:1:2");
  expect(canonicalIp("2001:db8:1:2:3:4:5:6")).toBe("2001:db8:1:2:3:4:5:6");
});

test.skipIf(process.platform !== "linux")(
  "the guard cuts over the per-address cap, then past the header timeout, and never a websocket",
  async () => {
    const logged = spyOn(console, "log").mockImplementation(() => {});
    let guard: FdGuard | undefined;
    const server = Bun.serve<undefined>({
      hostname: "127.0.0.1",
      port: 0,
      fetch(req, srv) {
        const peer = srv.requestIP(req)!;
        if (srv.upgrade(req, { data: undefined })) return void guard!.addWebsocket(peer.address, peer.port);
        return new Response("no");
      },
      websocket: { message() {} },
    });
    guard = FdGuard.start({
      limit: 4096,
      port: server.port!,
      settings: () => ({ headerTimeoutMs: 1000, maxPerIp: 2, trustedProxies: ["127.0.3.9"] }),
    })!;
    try {
      const ws = new WebSocket(`ws://127.0.0.1:${server.port}/`);
      await new Promise((resolve) => (ws.onopen = resolve));
      const closedAt: number[] = [];
      const t0 = performance.now();
      const halfOpen = (localAddress: string) => {
        const s = tcpConnect({ host: "127.0.0.1", port: server.port!, localAddress });
        s.on("connect", () => s.write("GET / HTTP/1.1\r\nHost: x\r\n"));
        s.on("close", () => closedAt.push(performance.now() - t0));
        s.on("error", () => {});
        return s;
      };
      // Five from one address (cap 2), one from a trusted proxy (no cap, same timeout).
      const socks = [...Array.from({ length: 5 }, () => halfOpen("127.0.3.1")), halfOpen("127.0.3.9")];
      const deadline = performance.now() + 6000;
      while (closedAt.length < socks.length && performance.now() < deadline) await Bun.sleep(20);
      expect(closedAt.length).toBe(6);
      closedAt.sort((a, b) => a - b);
      // Three over the cap at the first tick (~1 s), the rest 1 s after that scan first saw them.
      expect(closedAt[2]!).toBeLessThan(1900);
      expect(closedAt[3]! - closedAt[2]!).toBeGreaterThan(800);
      expect(guard.stats).toMatchObject({ cutPerIp: 3, cutTimeout: 3, cutPressure: 0 });
      // Said in words, once (a line a minute at most), at info (issue 34: it read "file descriptors:
      // … HTTP connections cut so far: … (longest scan slice 0.8 ms)").
      const lines = logged.mock.calls.map((c) => String(c[0])).filter((l) => l.startsWith("open files:"));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(
        /^open files: [\d,]+ of 4,096 allowed; HTTP connections closed since start: \d+ idle or slow past \[network\] header_timeout_seconds, \d+ over \[limits\] max_http_connections_per_ip, 0 oldest as the limit neared$/,
      );
      expect(ws.readyState).toBe(WebSocket.OPEN);
      ws.close();
    } finally {
      logged.mockRestore();
      guard.stop();
      server.stop(true);
    }
  },
);
