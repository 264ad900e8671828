// Issue 36 item 8, "compression: 1 KB on the wire costs ~1 MB of inflation": with [network]
// compression on, Bun inflates a client's compressed message before the relay sees it, so tiny
// frames that inflate to the frame limit (here 250 KB from ~250 bytes), sent at full rate, keep
// the main thread inflating. The relay
// runs as a child process with compression = "shared"; four attacker addresses flood such frames
// over connections that negotiated permessage-deflate, reconnecting whenever they are closed
// (within the connection rate limit), while an honest client on its own address publishes and
// reads every 100 ms. Each attacker address must lose compression after its inflation budget
// (inflated_bytes_per_ip_per_second, bursts of 8 s worth): its connections are closed and new
// ones are upgraded without the extension, and the honest client's latency stays low.
// BUNSTR_RELAY_MAIN=<old checkout>/src/main.ts runs this against other code (fc9185b: every
// reconnect negotiates compression again, and the honest p99 is seconds).
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { connect as tcpConnect, type Socket } from "node:net";
import { upgradeRequest } from "../bench/lib/tcp.ts";
import { constants, deflateRawSync } from "node:zlib";
import { RELAY_MAIN, REPO_ROOT } from "../bench/lib/relay.ts";
import { RawWs } from "../bench/lib/rawws.ts";
import { signer } from "./helpers.ts";
import { spawnRelay, type RelayProcess } from "./process-helpers.ts";

const ADDRESSES = ["127.0.37.1", "127.0.37.2", "127.0.37.3", "127.0.37.4"];
const CONNECTIONS_PER_ADDRESS = 4;
const ATTACK_MS = 8000;

const dir = mkdtempSync(join(tmpdir(), "bunstr-bomb-"));
let relay: RelayProcess | undefined;
let attacking = false;
const sockets = new Set<Socket>();

afterAll(async () => {
  attacking = false;
  for (const s of sockets) s.destroy();
  relay?.proc.kill("SIGKILL");
  await relay?.proc.exited;
  rmSync(dir, { recursive: true, force: true });
});

/**
 * A text message of 250 KB (under the frame limit, 256 KiB: Bun closes a larger one with 1009
 * before the relay sees it) deflated to ~250 bytes (RFC 7692: raw deflate, sync flush, the final
 * 00 00 ff ff left off), in a masked client frame with RSV1 set (mask key 0: payload as is).
 */
function bombFrame(): Buffer {
  const text = `["REQ","bomb",{"search":"${" ".repeat(250_000)}"}]`;
  const deflated = deflateRawSync(Buffer.from(text), { finishFlush: constants.Z_SYNC_FLUSH });
  const payload = deflated.subarray(0, deflated.length - 4);
  const n = payload.length;
  const head = Buffer.alloc(n < 126 ? 6 : 8);
  head[0] = 0x80 | 0x40 | 1;
  if (n < 126) head[1] = 0x80 | n;
  else (head[1] = 0x80 | 126), head.writeUInt16BE(n, 2);
  return Buffer.concat([head, payload]);
}

interface AttackStats {
  connections: number;
  negotiated: number;
  refused: number;
  bombs: number;
  bytes: number;
}

/** One attacker connection: offers permessage-deflate, then sends bombs until closed. */
async function bombard(port: number, address: string, bomb: Buffer, stats: AttackStats): Promise<void> {
  const sock: Socket = tcpConnect({ port, host: "127.0.0.1", localAddress: address });
  sock.on("error", () => {});
  sockets.add(sock);
  const closed = new Promise<void>((r) => sock.once("close", () => r()));
  // The end of the attack destroys every socket, also one still connecting: its "connect" never
  // comes, and waiting for it alone hung the test past its 90 s (beside a loaded CI run, twice).
  const connected = await Promise.race([new Promise<boolean>((r) => sock.once("connect", () => r(true))), closed.then(() => false)]);
  if (!connected) {
    sockets.delete(sock);
    return;
  }
  sock.write(upgradeRequest(port, "/", "permessage-deflate; client_max_window_bits"));
  const response = await new Promise<string>((r) => {
    let head = "";
    sock.on("data", (d: Buffer) => {
      if (head.includes("\r\n\r\n")) return;
      head += d.toString("latin1");
      if (head.includes("\r\n\r\n")) r(head);
    });
    sock.once("close", () => r(head));
  });
  if (!response.startsWith("HTTP/1.1 101")) {
    stats.refused++;
    sock.destroy();
    sockets.delete(sock);
    // Refused (rate-limited): try again a little later, as a flood would.
    return Bun.sleep(100);
  }
  stats.connections++;
  if (/permessage-deflate/i.test(response)) stats.negotiated++;
  // Sent whatever was negotiated: compressed frames on a plain connection are the attacker's loss.
  let open = true;
  void closed.then(() => (open = false));
  const batch = Buffer.concat(Array.from({ length: 16 }, () => bomb));
  while (open && attacking) {
    stats.bombs += 16;
    stats.bytes += batch.length;
    // As fast as the relay reads them (a write the kernel took at once still yields a turn).
    if (sock.write(batch)) await new Promise((r) => setImmediate(r));
    else await Promise.race([new Promise((r) => sock.once("drain", r)), closed]);
  }
  sock.destroy();
  sockets.delete(sock);
}

async function attacker(port: number, address: string, bomb: Buffer, stats: AttackStats): Promise<void> {
  while (attacking) await bombard(port, address, bomb, stats);
}

const p99 = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.99))]!;

test("a compression bomb flood loses compression and leaves the honest client's latency low", async () => {
  writeFileSync(join(dir, "bunstr.toml"), '[network]\ncompression = "shared"\n[rate_limits]\nexempt_private_addresses = false\n');
  relay = await spawnRelay(
    [process.execPath, resolve(REPO_ROOT, RELAY_MAIN)],
    ["--data-dir", dir, "--config", join(dir, "bunstr.toml")],
    dir,
  );
  // The proxy warning says "listening on" too: wait for the line that means it.
  for (const deadline = Date.now() + 15_000; !relay.output().includes("listening on ws:"); await Bun.sleep(20))
    if (Date.now() > deadline) throw new Error(`relay did not start:\n${relay.output()}`);
  const honest = await RawWs.connect(relay.port, "127.0.37.100");
  await honest.next((f) => f[0] === "AUTH");
  const user = signer();

  const bomb = bombFrame();
  expect(bomb.length).toBeLessThan(500);
  const stats: AttackStats = { connections: 0, negotiated: 0, refused: 0, bombs: 0, bytes: 0 };
  attacking = true;
  const attacks = ADDRESSES.flatMap((a) => Array.from({ length: CONNECTIONS_PER_ADDRESS }, () => attacker(relay!.port, a, bomb, stats)));

  // The honest client: an EVENT and a REQ every 100 ms, each timed.
  const latencies: number[] = [];
  const end = performance.now() + ATTACK_MS;
  for (let i = 0; performance.now() < end; i++) {
    const e = user.sign({ kind: 1, content: `honest ${i}` });
    const t = performance.now();
    honest.send(["EVENT", e]);
    expect(await honest.next((f) => f[0] === "OK" && f[1] === e.id, 15_000)).toEqual(["OK", e.id, true, ""]);
    latencies.push(performance.now() - t);
    const { ms, end: eose } = await honest.req(`r${i}`, [{ authors: [user.pubkey], limit: 5 }], 15_000);
    expect(eose[0]).toBe("EOSE");
    latencies.push(ms);
    await Bun.sleep(100);
  }
  attacking = false;
  for (const s of sockets) s.destroy();
  await Promise.all(attacks);
  const worst = p99(latencies);
  console.log(
    `honest p99 ${worst.toFixed(0)} ms over ${latencies.length} round trips; attackers: ${stats.connections} connections ` +
      `(${stats.negotiated} compressed, ${stats.refused} refused), ${stats.bombs} bombs (${(stats.bytes / 1e6).toFixed(1)} MB on the wire)`,
  );
  // Each address negotiated compression on its first connections only, then lost it.
  expect(stats.connections).toBeGreaterThan(stats.negotiated);
  expect(stats.negotiated).toBeLessThanOrEqual(ADDRESSES.length * CONNECTIONS_PER_ADDRESS * 2);
  // Far below the seconds of the code before the fix; 10x what it takes here on a quiet machine.
  expect(worst).toBeLessThan(500);
  expect(honest.closed).toBe(false);
  // The attack lasts 8 s; starting the relay and closing 16 attackers' sockets take the rest. A full
  // suite on a loaded 2-core box once passed 30 s here (issue 31 item 6): the latency bound above is the check.
}, 90_000);
