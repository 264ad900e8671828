// Raw TCP websocket helpers for clients the usual WebSocket class cannot play: the upgrade by
// hand (openWebSocket, from any 127.x source address) and masked client frames (clientFrame),
// used by the raw websocket client (rawws.ts), the fanout receivers (scenarios/fanout/), and a
// client that subscribes and then never reads another byte (stuckReader); and the kernel's view
// of a TCP connection (/proc/net/tcp) so we can see the relay close its end without reading
// (reading would drain the buffers we are testing).
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { connect as tcpConnect, type Socket } from "node:net";

/** The mask of every client frame: a fixed one (RFC 6455 wants a random mask only against proxies). */
const MASK = [0x12, 0x34, 0x56, 0x78] as const;

/** A masked client frame (RFC 6455) with any opcode (1 text, 8 close, 9 ping, 10 pong), FIN set. */
export function clientFrame(opcode: number, payload: Uint8Array): Buffer {
  const n = payload.length;
  const head = n < 126 ? 2 : n < 65536 ? 4 : 10;
  const f = Buffer.alloc(head + 4 + n);
  f[0] = 0x80 | opcode;
  if (n < 126) f[1] = 0x80 | n;
  else if (n < 65536) (f[1] = 0x80 | 126), f.writeUInt16BE(n, 2);
  else (f[1] = 0x80 | 127), f.writeBigUInt64BE(BigInt(n), 2);
  f.set(MASK, head);
  for (let i = 0; i < n; i++) f[head + 4 + i] = payload[i]! ^ MASK[i & 3]!;
  return f;
}

/** A masked client text frame, as a client must send it. */
/**
 * The first complete server frame (unmasked) at the start of `buf`, and how many bytes it took;
 * undefined until all of it has arrived.
 */
export function serverFrame(buf: Buffer): { opcode: number; payload: Buffer; size: number } | undefined {
  if (buf.length < 2) return undefined;
  let len = buf[1]! & 0x7f;
  let off = 2;
  if (len === 126) {
    if (buf.length < 4) return undefined;
    len = buf.readUInt16BE(2);
    off = 4;
  } else if (len === 127) {
    if (buf.length < 10) return undefined;
    len = Number(buf.readBigUInt64BE(2));
    off = 10;
  }
  if (buf.length < off + len) return undefined;
  return { opcode: buf[0]! & 0x0f, payload: buf.subarray(off, off + len), size: off + len };
}

export const clientTextFrame = (text: string): Buffer => clientFrame(1, Buffer.from(text));

/** The HTTP request that asks 127.0.0.1:port to upgrade `path` to a websocket (`extensions`: e.g. permessage-deflate, offered). */
export const upgradeRequest = (port: number, path = "/", extensions?: string): string =>
  `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
  `${extensions ? `Sec-WebSocket-Extensions: ${extensions}\r\n` : ""}\r\n`;

export interface OpenedWebSocket {
  sock: Socket;
  /** What came after the 101 response in the same reads: the first websocket frames, if any. */
  rest: Buffer;
  /** Bytes read during the upgrade (the response and `rest`). */
  bytes: number;
}

/**
 * A websocket to 127.0.0.1:port over a plain TCP socket (optionally from `localAddress`), upgraded
 * by hand. The socket comes back paused, with no data listener: the caller decides when, and
 * whether, to read on.
 */
export async function openWebSocket(port: number, path = "/", localAddress?: string): Promise<OpenedWebSocket> {
  const sock = tcpConnect({ port, host: "127.0.0.1", localAddress });
  await new Promise<void>((resolve, reject) => {
    sock.once("connect", () => resolve());
    sock.once("error", reject);
  });
  sock.write(upgradeRequest(port, path));
  let head = Buffer.alloc(0);
  const end = await new Promise<number>((resolve, reject) => {
    const onData = (b: Buffer) => {
      head = Buffer.concat([head, b]);
      const at = head.indexOf("\r\n\r\n");
      if (at < 0) return;
      sock.off("data", onData);
      sock.off("error", reject);
      sock.pause();
      if (!head.subarray(0, 12).toString("latin1").startsWith("HTTP/1.1 101"))
        reject(new Error(`websocket upgrade refused: ${head.subarray(0, 200).toString("latin1")}`));
      else resolve(at + 4);
    };
    sock.on("data", onData);
    sock.once("error", reject);
  });
  return { sock, rest: head.subarray(end), bytes: head.length };
}

export interface StuckReader {
  sock: Socket;
  /** Our local port (the relay's "remote" port for this connection). */
  localPort: number;
  /** When the subscription frames were written (performance.now()). */
  subscribedAt: number;
  /** Resumes reading, counts every byte until the connection closes (bounded), returns the count. */
  drain(timeoutMs: number): Promise<{ bytes: number; closed: boolean }>;
}

/** Opens a websocket at the TCP level, sends `frames` (e.g. REQs), then stops reading for good. */
export async function stuckReader(port: number, frames: unknown[], path = "/"): Promise<StuckReader> {
  // Paused from the upgrade on, nothing is read: the kernel buffers fill, then the relay's.
  const { sock, bytes: upgradeBytes } = await openWebSocket(port, path);
  let bytes = upgradeBytes;
  for (const f of frames) sock.write(clientTextFrame(typeof f === "string" ? f : JSON.stringify(f)));
  const subscribedAt = performance.now();
  let closed = false;
  const closedP = new Promise<void>((resolve) => sock.once("close", () => ((closed = true), resolve())));
  sock.on("error", () => {});
  return {
    sock,
    localPort: sock.localPort!,
    subscribedAt,
    async drain(timeoutMs) {
      sock.on("data", (b: Buffer) => (bytes += b.length));
      sock.resume();
      await Promise.race([closedP, Bun.sleep(timeoutMs)]);
      if (!closed) sock.destroy();
      return { bytes, closed };
    },
  };
}

export interface TcpEntry {
  /** Kernel TCP state: ESTABLISHED, FIN_WAIT1, CLOSE_WAIT, … */
  state: string;
  /** Bytes in the send queue of this end (written by its process, not yet acknowledged by the peer). */
  txQueue: number;
  /** Bytes in the receive queue of this end (arrived, not yet read by its process). */
  rxQueue: number;
  /** Socket inode; 0 once no process holds it any more (closed by its owner, kernel finishing). */
  inode: number;
}

const STATES = [
  "",
  "ESTABLISHED",
  "SYN_SENT",
  "SYN_RECV",
  "FIN_WAIT1",
  "FIN_WAIT2",
  "TIME_WAIT",
  "CLOSE",
  "CLOSE_WAIT",
  "LAST_ACK",
  "LISTEN",
  "CLOSING",
];

/** The 127.0.0.1 connection from localPort to remotePort as the kernel sees it, or undefined if it is gone. */
export function tcpEntry(localPort: number, remotePort: number): TcpEntry | undefined {
  const hex = (p: number) => p.toString(16).toUpperCase().padStart(4, "0");
  // Cheap enough to poll every few ms with hundreds of sockets open: one indexOf, one line parsed.
  const text = readFileSync("/proc/net/tcp", "latin1");
  const at = text.indexOf(` 0100007F:${hex(localPort)} 0100007F:${hex(remotePort)} `);
  if (at < 0) return undefined;
  const f = text.slice(at, text.indexOf("\n", at)).trim().split(/\s+/);
  // f: local remote state tx:rx tr:when retrnsmt uid timeout inode …
  const [tx, rx] = f[3]!.split(":").map((x) => parseInt(x, 16));
  return { state: STATES[parseInt(f[2]!, 16)] ?? f[2]!, txQueue: tx!, rxQueue: rx!, inode: Number(f[8]) };
}

/**
 * The descriptor number under which process `pid` holds the socket with this inode (from
 * tcpEntry), or undefined. Polling `holdsSocket` on it afterwards costs one readlink, where
 * re-reading /proc/net/tcp costs milliseconds on a busy machine.
 */
export function socketFd(pid: number, inode: number): number | undefined {
  const want = `socket:[${inode}]`;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`) === want) return Number(fd);
    } catch {
      // closed while we looked
    }
  }
  return undefined;
}

/** Does process `pid` still hold socket `inode` as descriptor `fd`? False once it closed it. */
export function holdsSocket(pid: number, fd: number, inode: number): boolean {
  try {
    return readlinkSync(`/proc/${pid}/fd/${fd}`) === `socket:[${inode}]`;
  } catch {
    return false;
  }
}
