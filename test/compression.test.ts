// [network] compression: permessage-deflate (RFC 7692) for clients that offer it. Seen at the
// TCP level: the upgrade's Sec-WebSocket-Extensions answer, and the RSV1 bit and deflated payload
// of the EVENT frames of a REQ answer and of fanout. Off by default: no extension, plain frames.
import { afterEach, describe, expect, test } from "bun:test";
import { connect, type Socket } from "node:net";
import { constants, inflateRawSync } from "node:zlib";
import { clientTextFrame, serverFrame } from "../bench/lib/tcp.ts";
import type { Config } from "../src/config/schema.ts";
import { Client, failOnRelayErrors, now, signer, startTestRelay, type TestRelay } from "./helpers.ts";

interface Frame {
  compressed: boolean;
  text: string;
  /** Bytes the frame took on the wire. */
  size: number;
}

/** A websocket over plain TCP that offers permessage-deflate and decodes what comes back. */
class DeflateClient {
  private buf = Buffer.alloc(0);
  readonly frames: Frame[] = [];
  extensions = "";

  private constructor(private readonly sock: Socket) {}

  static async open(port: number): Promise<DeflateClient> {
    const sock = connect(port, "127.0.0.1");
    await new Promise<void>((resolve, reject) => {
      sock.once("connect", () => resolve());
      sock.once("error", reject);
    });
    const c = new DeflateClient(sock);
    sock.write(
      `GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
        "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n",
    );
    let head = Buffer.alloc(0);
    await new Promise<void>((resolve) => {
      const onData = (b: Buffer) => {
        head = Buffer.concat([head, b]);
        const at = head.indexOf("\r\n\r\n");
        if (at < 0) return;
        sock.off("data", onData);
        const lines = head.subarray(0, at).toString("latin1").split("\r\n");
        expect(lines[0]).toStartWith("HTTP/1.1 101");
        c.extensions = lines.find((l) => /^sec-websocket-extensions:/i.test(l))?.replace(/^[^:]*:\s*/, "") ?? "";
        c.take(head.subarray(at + 4));
        sock.on("data", (d: Buffer) => c.take(d));
        resolve();
      };
      sock.on("data", onData);
    });
    return c;
  }

  private take(data: Buffer): void {
    this.buf = Buffer.concat([this.buf, data]);
    for (let f = serverFrame(this.buf); f; f = serverFrame(this.buf)) {
      const compressed = (this.buf[0]! & 0x40) !== 0;
      const payload = compressed ? this.inflate(f.payload) : f.payload;
      if (f.opcode === 1) this.frames.push({ compressed, text: payload.toString("utf8"), size: f.size });
      this.buf = this.buf.subarray(f.size);
    }
  }

  // One inflate stream over every compressed message (RFC 7692 7.2.2: each ends with a sync flush
  // whose 00 00 ff ff tail is left off): a per-connection compressor refers back to earlier ones.
  private deflated = Buffer.alloc(0);
  private inflated = 0;
  private inflate(payload: Buffer): Buffer {
    this.deflated = Buffer.concat([this.deflated, payload, Buffer.from([0, 0, 0xff, 0xff])]);
    const all = inflateRawSync(this.deflated, { finishFlush: constants.Z_SYNC_FLUSH });
    const out = all.subarray(this.inflated);
    this.inflated = all.length;
    return out;
  }

  send(msg: unknown): void {
    this.sock.write(clientTextFrame(JSON.stringify(msg)));
  }

  async until(pred: (f: Frame) => boolean, timeoutMs = 5000): Promise<Frame> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const f = this.frames.find(pred);
      if (f) return f;
      if (Date.now() > end) throw new Error(`timed out; frames: ${this.frames.map((x) => x.text.slice(0, 60)).join(" | ")}`);
      await Bun.sleep(10);
    }
  }

  close(): void {
    this.sock.destroy();
  }
}

describe("[network] compression", () => {
  failOnRelayErrors();
  let relay: TestRelay | undefined;
  const open: (DeflateClient | Client)[] = [];
  afterEach(async () => {
    for (const c of open.splice(0)) c.close();
    await relay?.stop();
    relay = undefined;
  });

  const port = (r: TestRelay) => Number(new URL(r.url).port);
  const note = (i: number) => `a note long enough to be worth compressing, number ${i}, `.repeat(4);

  /** Stores three notes, REQs them over a deflate-offering socket, then has one fanned out to it. */
  async function exchange(compression: Config["network"]["compression"]) {
    relay = await startTestRelay({ network: { compression } });
    const author = signer();
    const pub = await Client.connect(relay.url);
    open.push(pub);
    for (let i = 0; i < 3; i++)
      expect((await pub.publish(author.sign({ kind: 1, content: note(i), created_at: now() - 10 + i })))[2]).toBe(true);
    const c = await DeflateClient.open(port(relay));
    open.push(c);
    c.send(["REQ", "s", { authors: [author.pubkey] }]);
    await c.until((f) => f.text.startsWith('["EOSE"'));
    const stored = c.frames.filter((f) => f.text.startsWith('["EVENT"'));
    const live = author.sign({ kind: 1, content: note(9) });
    expect((await pub.publish(live))[2]).toBe(true);
    const fanned = await c.until((f) => f.text.includes(live.id));
    return { c, stored, fanned, live };
  }

  test("off by default: no extension in the upgrade, plain frames", async () => {
    const { c, stored, fanned } = await exchange("off");
    expect(c.extensions).toBe("");
    expect(stored).toHaveLength(3);
    expect(stored.every((f) => !f.compressed)).toBe(true);
    expect(fanned.compressed).toBe(false);
  });

  for (const mode of ["shared", "4KB"] as const) {
    test(`${mode}: the REQ answer's and fanout's EVENT frames are deflated, and read back exactly`, async () => {
      const { c, stored, fanned, live } = await exchange(mode);
      expect(c.extensions).toStartWith("permessage-deflate");
      expect(stored).toHaveLength(3);
      for (const f of [...stored, fanned]) {
        expect(f.compressed).toBe(true);
        // Smaller on the wire than the frame's own text.
        expect(f.size).toBeLessThan(Buffer.byteLength(f.text));
      }
      expect(JSON.parse(fanned.text)).toEqual(["EVENT", "s", live]);
      expect(stored.map((f) => JSON.parse(f.text)[2].content)).toEqual([note(2), note(1), note(0)]);
      // A short frame (EOSE) is not worth deflating and goes out as it is.
      expect((await c.until((f) => f.text.startsWith('["EOSE"'))).compressed).toBe(false);
    });
  }

  test("shared: a client that negotiates it (Bun's WebSocket, as browsers do) reads answers and publishes through it", async () => {
    relay = await startTestRelay({ network: { compression: "shared" } });
    const c = await Client.connect(relay.url);
    open.push(c);
    expect(c.ws.extensions).toStartWith("permessage-deflate");
    const author = signer();
    const e = author.sign({ kind: 1, content: note(1).repeat(20) });
    expect((await c.publish(e))[2]).toBe(true);
    c.send(["REQ", "r", { ids: [e.id] }]);
    expect(await c.next((f) => f[0] === "EVENT" && f[1] === "r")).toEqual(["EVENT", "r", e]);
  });
});
