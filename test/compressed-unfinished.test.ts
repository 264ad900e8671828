// Issue 36 review, the unfinished-message guard on compressed connections (fd-guard.ts): a
// compressed message counts its inflated size, and each scan sets the count back to what the
// kernel received; so one message inflating to 250 KB from ~250 bytes, sent with the first 150 KB
// of a message that never ends, had those 150 KB taken for whole: the connection then read as
// holding nothing, and neither message_timeout_seconds nor the caps ever closed it (kept alive
// with a byte every half second). Now whatever a compressed connection receives after the scan
// that last saw a message complete, while none completes, is held. An idle compressed client
// (Bun's WebSocket, permessage-deflate) is never closed. The relay runs as a child process (the
// guard reads the kernel's byte counts; Linux only).
// BUNSTR_RELAY_MAIN=<old checkout>/src/main.ts runs this against other code.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { connect as tcpConnect, type Socket } from "node:net";
import { upgradeRequest } from "../bench/lib/tcp.ts";
import { constants, deflateRawSync } from "node:zlib";
import { RELAY_MAIN, REPO_ROOT } from "../bench/lib/relay.ts";
import { spawnRelay, type RelayProcess } from "./process-helpers.ts";
import { waitUntil } from "./helpers.ts";

const TIMEOUT_S = 3;
const dir = mkdtempSync(join(tmpdir(), "bunstr-compressed-unfinished-"));
let relay: RelayProcess | undefined;
const sockets: Socket[] = [];

afterAll(async () => {
  for (const s of sockets) s.destroy();
  relay?.proc.kill("SIGKILL");
  await relay?.proc.exited;
  rmSync(dir, { recursive: true, force: true });
});

/** A client frame header (mask key 0: the payload goes as is); `rsv1`: compressed (RFC 7692). */
function head(length: number, rsv1 = false): Buffer {
  const h = Buffer.alloc(length < 126 ? 6 : length < 65536 ? 8 : 14);
  h[0] = 0x80 | (rsv1 ? 0x40 : 0) | 1;
  if (length < 126) h[1] = 0x80 | length;
  else if (length < 65536) (h[1] = 0x80 | 126), h.writeUInt16BE(length, 2);
  else (h[1] = 0x80 | 127), h.writeBigUInt64BE(BigInt(length), 2);
  return h;
}

/** A compressed text message of ~250 KB that is ~250 bytes on the wire. */
function bomb(): Buffer {
  const text = `["REQ","bomb",{"search":"${" ".repeat(250_000)}"}]`;
  const deflated = deflateRawSync(Buffer.from(text), { finishFlush: constants.Z_SYNC_FLUSH });
  const payload = deflated.subarray(0, deflated.length - 4);
  return Buffer.concat([head(payload.length, true), payload]);
}

/** A raw connection from `address` that negotiated permessage-deflate. */
async function compressed(port: number, address: string): Promise<{ sock: Socket; closed: () => boolean }> {
  const sock: Socket = tcpConnect({ port, host: "127.0.0.1", localAddress: address });
  sockets.push(sock);
  sock.on("error", () => {});
  let closed = false;
  sock.once("close", () => (closed = true));
  await new Promise<void>((r) => sock.once("connect", () => r()));
  sock.write(upgradeRequest(port, "/", "permessage-deflate; client_max_window_bits"));
  const response = await new Promise<string>((r) => {
    let text = "";
    sock.on("data", (d: Buffer) => {
      if (text.includes("\r\n\r\n")) return;
      text += d.toString("latin1");
      if (text.includes("\r\n\r\n")) r(text);
    });
  });
  expect(response).toStartWith("HTTP/1.1 101");
  expect(response).toMatch(/permessage-deflate/i);
  return { sock, closed: () => closed };
}

test("a compressed message sent with the start of one that never ends does not hide it from the message timeout", async () => {
  writeFileSync(
    join(dir, "bunstr.toml"),
    `[network]\ncompression = "shared"\n[limits]\nmessage_timeout_seconds = ${TIMEOUT_S}\n[rate_limits]\nexempt_private_addresses = false\n`,
  );
  relay = await spawnRelay(
    [process.execPath, resolve(REPO_ROOT, RELAY_MAIN)],
    ["--data-dir", dir, "--config", join(dir, "bunstr.toml"), "--lenient"],
    dir,
  );
  await waitUntil("the relay listening", () => relay!.output().includes("listening on ws:"), 15_000);
  // An idle compressed client as browsers connect: one message, then nothing: never closed.
  const idle = new WebSocket(`ws://127.0.0.1:${relay.port}/`, { perMessageDeflate: true } as any);
  let idleClosed = false;
  idle.onclose = () => (idleClosed = true);
  await new Promise((r) => (idle.onopen = r));
  const eose = new Promise((r) => (idle.onmessage = (m) => String(m.data).includes("EOSE") && r(undefined)));
  idle.send(JSON.stringify(["REQ", "idle", { kinds: [1], limit: 1 }]));
  await eose;
  expect(idle.extensions).toMatch(/permessage-deflate/);

  // The attacker: the bomb and 150 KB of a 200 KB message in one write, then a byte now and then.
  const attacker = await compressed(relay.port, "127.0.38.1");
  attacker.sock.write(Buffer.concat([bomb(), head(200_000), Buffer.alloc(150_000, "a")]));
  const started = performance.now();
  const drip = setInterval(() => !attacker.closed() && attacker.sock.write("a"), 500);
  try {
    await waitUntil("the attacker closed at the message timeout", attacker.closed, (TIMEOUT_S + 8) * 1000);
  } finally {
    clearInterval(drip);
  }
  const after = performance.now() - started;
  console.log(`the attacker was closed after ${after.toFixed(0)} ms (message timeout ${TIMEOUT_S} s)`);
  expect(after).toBeGreaterThanOrEqual(TIMEOUT_S * 1000);
  // The idle compressed client outlived the timeout and is still served.
  expect(idleClosed).toBe(false);
  const again = new Promise((r) => (idle.onmessage = (m) => String(m.data).includes("EOSE") && r(undefined)));
  idle.send(JSON.stringify(["REQ", "again", { kinds: [1], limit: 1 }]));
  await again;
  expect(idleClosed).toBe(false);
  idle.close();
}, 30_000);
