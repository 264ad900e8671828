// When a closing relay may close a connection (relay/shutdown.ts): once every EVENT the client
// sent before it was told is read and answered. A client pipelining EVENTs has some on the wire
// at any moment; closing then would leave them unread, and the client could not tell whether
// they were stored. So each connection is sent a ping right after the NOTICE "closing:": TCP
// delivers its pong after every frame the client sent before it saw the NOTICE. Once the pong is
// back, nothing of the connection's is in flight (its OKs are sent) and no frame came nor answer left for QUIET_MS
// (a client that goes on sending after the NOTICE is answered, `error:` to retry, until it
// stops), the connection is closed. DEADLINE_MS bounds the whole drain.
import type { Session, Socket } from "./session.ts";

/** "stop": the relay goes away. "restart": another process already serves the port (reuse_port). */
export type Shutdown = "stop" | "restart";

/** What connections are told while the relay closes: a NOTICE, then the close code and reason. */
export const CLOSING = {
  stop: { notice: "closing: relay is shutting down", code: 1001, reason: "relay shutting down" },
  restart: { notice: "closing: relay is restarting, reconnect", code: 1012, reason: "relay restarting" },
} as const;
export type Closing = (typeof CLOSING)[Shutdown];

/** The payload of the drain's ping: a pong to one of Bun's keep-alive pings proves nothing. */
const PING = "bunstr drain";
/**
 * How long a connection must have sent nothing, and been owed nothing, before it is closed: long
 * enough for a client on a busy machine to react to its last OK (100 ms left a loaded client's
 * next pipelined EVENTs on the wire).
 */
const QUIET_MS = 250;
/** After this, every connection is closed, answered or not. */
export const DEADLINE_MS = 5000;

interface State {
  /** The drain's pong came back (or no ping could be sent: then only the quiet time counts). */
  pong: boolean;
  /** When the last frame since the drain began arrived (performance.now()). */
  lastFrame: number;
}

export class Drain {
  private readonly conns = new WeakMap<Session, State>();
  /** Whether shutdown is still closing connections one by one as they are done; a connection opened then joins. */
  running = false;

  /** After the NOTICE: the ping whose pong shows that what the client sent before it has been read. */
  begin(ws: Socket): void {
    const state: State = { pong: false, lastFrame: Number.NEGATIVE_INFINITY };
    this.conns.set(ws.data, state);
    // 0: dropped (the socket is closing or over its backpressure limit); no pong will come.
    if (ws.data.closed || ws.ping(PING) === 0) state.pong = true;
  }

  /** A frame from the client while closing (before it is handled). */
  heard(ws: Socket): void {
    const state = this.conns.get(ws.data);
    if (state) state.lastFrame = performance.now();
  }

  pong(ws: Socket, data: Buffer): void {
    const state = this.conns.get(ws.data);
    if (state && data.toString() === PING) state.pong = true;
  }

  /** Whether the connection may be closed now: everything it sent is read and answered, and it went quiet. */
  done(ws: Socket, now: number): boolean {
    const state = this.conns.get(ws.data);
    if (ws.data.inflight > 0) {
      // Still being answered: the quiet time counts from the last answer, which the client may
      // answer with another EVENT (a pipelining client sends one per OK).
      if (state) state.lastFrame = now;
      return false;
    }
    return !state || (state.pong && now - state.lastFrame >= QUIET_MS);
  }
}
