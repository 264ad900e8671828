// A benchmark websocket connection: raw text frames out, parsed relay frames in, one handler.
// Deliberately thin (no nostr-tools Relay) so the load generator spends as little CPU as possible.

export type RelayFrame = [string, ...unknown[]];
export type FrameHandler = (frame: RelayFrame, raw: string) => void;

export class Conn {
  /** Set by the scenario; frames arriving with no handler are counted in `ignored`. */
  onFrame?: FrameHandler;
  ignored = 0;
  closed = false;
  closeCode?: number;
  /** Errors seen on this socket (parse errors, unexpected close), for the scenario to report. */
  readonly errors: string[] = [];

  private constructor(
    readonly ws: WebSocket,
    readonly name: string,
  ) {
    ws.onmessage = (m) => {
      const raw = typeof m.data === "string" ? m.data : String(m.data);
      let frame: unknown;
      try {
        frame = JSON.parse(raw);
      } catch {
        this.errors.push(`${name}: unparseable frame ${raw.slice(0, 120)}`);
        return;
      }
      if (!Array.isArray(frame) || typeof frame[0] !== "string") {
        this.errors.push(`${name}: not a relay frame ${raw.slice(0, 120)}`);
        return;
      }
      if (this.onFrame) this.onFrame(frame as RelayFrame, raw);
      else this.ignored++;
    };
    ws.onclose = (e) => {
      this.closed = true;
      this.closeCode = e.code;
    };
  }

  static connect(url: string, name: string, timeoutMs = 10_000): Promise<Conn> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url);
      const timer = setTimeout(() => {
        ws.close();
        reject(new Error(`${name}: no websocket connection to ${url} within ${timeoutMs} ms`));
      }, timeoutMs);
      ws.onopen = () => {
        clearTimeout(timer);
        resolve(conn);
      };
      ws.onerror = (e) => {
        clearTimeout(timer);
        const why = (e as ErrorEvent).message || (e as { error?: Error }).error?.message;
        reject(new Error(`${name}: cannot connect to ${url}${why ? ` (${why})` : ""}`));
      };
      const conn = new Conn(ws, name);
    });
  }

  send(text: string): void {
    this.ws.send(text);
  }

  /** Closes and waits (bounded) for the close handshake. */
  async close(timeoutMs = 2000): Promise<void> {
    if (this.closed) return;
    const done = new Promise<void>((resolve) => this.ws.addEventListener("close", () => resolve(), { once: true }));
    this.ws.close(1000, "bench done");
    await Promise.race([done, Bun.sleep(timeoutMs)]);
  }
}

export const connectAll = (url: string, count: number, prefix: string): Promise<Conn[]> =>
  Promise.all(Array.from({ length: count }, (_, i) => Conn.connect(url, `${prefix}${i}`)));
