// Raw TCP helpers for hostile-client scenarios: a websocket client that subscribes and then never
// reads another byte, and the kernel's view of a TCP connection (/proc/net/tcp) so we can see the
// relay close its end without reading (reading would drain the buffers we are testing).
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { connect as tcpConnect, type Socket } from "node:net";

/** A masked client text frame (RFC 6455), as a client must send it. */
export function clientTextFrame(text: string): Buffer {
  const payload = Buffer.from(text);
  const mask = Buffer.from([0x12, 0x34, 0x56, 0x78]);
  let header: Buffer;
  if (payload.length < 126) header = Buffer.from([0x81, 0x80 | payload.length]);
  else if (payload.length < 65536) header = Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 255]);
  else {
    header = Buffer.alloc(10);
    header[0] = 0x81;
    header[1] = 0x80 | 127;
    header.writeBigUInt64BE(BigInt(payload.length), 2);
  }
  const masked = Buffer.alloc(payload.length);
  for (let i = 0; i < payload.length; i++) masked[i] = payload[i]! ^ mask[i & 3]!;
  return Buffer.concat([header, mask, masked]);
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
  const sock = tcpConnect(port, "127.0.0.1");
  await new Promise<void>((resolve, reject) => {
    sock.once("connect", () => resolve());
    sock.once("error", reject);
  });
  sock.write(
    `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
  );
  let bytes = 0;
  let head = "";
  await new Promise<void>((resolve, reject) => {
    const onData = (b: Buffer) => {
      bytes += b.length;
      head += b.toString("latin1");
      if (!head.includes("\r\n\r\n")) return;
      sock.off("data", onData);
      if (!head.startsWith("HTTP/1.1 101")) reject(new Error(`websocket upgrade refused: ${head.slice(0, 200)}`));
      else resolve();
    };
    sock.on("data", onData);
  });
  sock.pause(); // from here on, nothing is read: the kernel buffers fill, then the relay's
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

const STATES = ["", "ESTABLISHED", "SYN_SENT", "SYN_RECV", "FIN_WAIT1", "FIN_WAIT2", "TIME_WAIT", "CLOSE", "CLOSE_WAIT", "LAST_ACK", "LISTEN", "CLOSING"];

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
