// A reader that never drains is disconnected once its unsent output passes max_pending_bytes;
// everyone else keeps being served.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { connect as tcpConnect, type Socket } from "node:net";
import { Client, signer, startTestRelay, type TestRelay } from "./helpers.ts";

let relay: TestRelay;
beforeAll(async () => (relay = await startTestRelay({ limits: { max_pending_bytes: 64 * 1024 } })));
afterAll(() => relay.stop());

/** A websocket client at the TCP level: subscribes, then never reads another byte. */
async function stuckReader(port: number, req: unknown): Promise<{ sock: Socket; closed: Promise<void> }> {
  const sock = tcpConnect(port, "127.0.0.1");
  await new Promise<void>((r) => sock.once("connect", () => r()));
  sock.write(
    "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
  );
  await new Promise<void>((r) => sock.once("data", () => r())); // the 101 (and maybe the AUTH frame)
  // A masked client text frame carrying the REQ.
  const payload = Buffer.from(JSON.stringify(req));
  const mask = Buffer.from([1, 2, 3, 4]);
  const header =
    payload.length < 126
      ? Buffer.from([0x81, 0x80 | payload.length])
      : Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 255]);
  sock.write(Buffer.concat([header, mask, payload.map((b, i) => b ^ mask[i % 4]!)]));
  sock.pause(); // never read again: the kernel buffers fill, then the relay's
  const closed = new Promise<void>((r) => sock.once("close", () => r()));
  return { sock, closed };
}

test("a subscriber that never reads is cut off; a normal subscriber gets every event", async () => {
  const s = signer();
  const stuck = await stuckReader(relay.server.port!, ["REQ", "firehose", { kinds: [1] }]);
  const good = await Client.connect(relay.url);
  await good.req("firehose", { kinds: [1], limit: 0 });
  const publisher = await Client.connect(relay.url);
  const big = "x".repeat(60 * 1024);
  const events = Array.from({ length: 400 }, (_, i) => s.sign({ kind: 1, content: `${i} ${big}` }));
  let cutOffAfter = -1;
  void stuck.closed.then(() => (cutOffAfter = publisher.frames.filter((f) => f[0] === "OK").length));
  for (let i = 0; i < events.length; i += 20) await Promise.all(events.slice(i, i + 20).map((e) => publisher.publish(e)));
  // Resume only to observe the close the relay already sent.
  stuck.sock.resume();
  await Promise.race([stuck.closed, Bun.sleep(5000)]);
  expect(cutOffAfter).toBeGreaterThan(0);
  const deadline = Date.now() + 5000;
  while (good.eventsFor("firehose").length < events.length && Date.now() < deadline) await Bun.sleep(10);
  expect(good.eventsFor("firehose").length).toBe(events.length);
  good.close();
  publisher.close();
});
