// A small websocket client for `bunstr sync` and `bunstr stream`: frames parsed and dispatched by
// subscription id (EVENT, EOSE, CLOSED, NEG-MSG, NEG-ERR) or event id (OK).
import type { NostrEvent } from "../protocol/event.ts";

type SubFrame = unknown[];

export class RelayClient {
  private readonly subs = new Map<string, (f: SubFrame) => void>();
  private readonly oks = new Map<string, (ok: boolean, message: string) => void>();
  private readonly closeHandlers: ((reason: string) => void)[] = [];
  readonly notices: string[] = [];
  private noticeHandler?: (m: string) => void;
  closed = false;

  private constructor(
    readonly url: string,
    private readonly ws: WebSocket,
  ) {
    ws.onmessage = (m) => this.onFrame(m.data);
    ws.onclose = (e) => this.onClosed(`closed (${e.code}${e.reason ? ` ${e.reason}` : ""})`);
    ws.onerror = () => this.onClosed("connection error");
  }

  static connect(url: string, timeoutMs = 10_000): Promise<RelayClient> {
    return new Promise((resolve, reject) => {
      let ws: WebSocket;
      try {
        ws = new WebSocket(url);
      } catch (e) {
        return reject(new Error(`cannot connect to ${url}: ${(e as Error).message}`));
      }
      const timer = setTimeout(() => {
        ws.close();
        reject(new Error(`cannot connect to ${url}: timed out`));
      }, timeoutMs);
      ws.onopen = () => {
        clearTimeout(timer);
        resolve(new RelayClient(url, ws));
      };
      ws.onerror = () => {
        clearTimeout(timer);
        reject(new Error(`cannot connect to ${url}`));
      };
      ws.onclose = (e) => {
        clearTimeout(timer);
        reject(new Error(`cannot connect to ${url}: closed (${e.code})`));
      };
    });
  }

  send(frame: unknown[]): void {
    if (!this.closed) this.ws.send(JSON.stringify(frame));
  }

  /** Frames for a subscription id (REQ or NEG), until unsubscribe(). */
  subscribe(subId: string, handler: (f: SubFrame) => void): void {
    this.subs.set(subId, handler);
  }

  unsubscribe(subId: string): void {
    this.subs.delete(subId);
  }

  onNotice(h: ((m: string) => void) | undefined): void {
    this.noticeHandler = h;
  }

  /** Called once when the connection drops (or close() is called). */
  onClose(h: (reason: string) => void): void {
    if (this.closed) h("closed");
    else this.closeHandlers.push(h);
  }

  /** Publishes and resolves with the relay's OK (false "error: ..." if the connection drops or no answer comes). */
  publish(e: NostrEvent, timeoutMs = 30_000): Promise<{ ok: boolean; message: string }> {
    return new Promise((resolve) => {
      if (this.closed) return resolve({ ok: false, message: "error: connection closed" });
      const timer = setTimeout(() => {
        this.oks.delete(e.id);
        resolve({ ok: false, message: "error: no OK from the relay" });
      }, timeoutMs);
      this.oks.set(e.id, (ok, message) => {
        clearTimeout(timer);
        resolve({ ok, message });
      });
      this.send(["EVENT", e]);
    });
  }

  /**
   * REQ and collect until EOSE: the events received, and how it ended ("eose", or the CLOSED
   * message). Rejects if the connection drops or the relay says nothing for timeoutMs.
   */
  fetch(subId: string, filter: object, onEvent: (e: NostrEvent) => void, timeoutMs = 60_000): Promise<"eose" | string> {
    return new Promise((resolve, reject) => {
      let timer: ReturnType<typeof setTimeout>;
      const arm = () => {
        clearTimeout(timer);
        timer = setTimeout(() => done(() => reject(new Error(`no answer to REQ in ${timeoutMs / 1000} s`))), timeoutMs);
      };
      const done = (f: () => void) => {
        clearTimeout(timer);
        this.unsubscribe(subId);
        f();
      };
      this.subscribe(subId, (f) => {
        arm();
        if (f[0] === "EVENT") onEvent(f[2] as NostrEvent);
        else if (f[0] === "EOSE") done(() => (this.send(["CLOSE", subId]), resolve("eose")));
        else if (f[0] === "CLOSED") done(() => resolve(String(f[2] ?? "closed")));
        else if (f[0] === "DROPPED") done(() => reject(new Error("connection closed")));
      });
      arm();
      this.send(["REQ", subId, filter]);
    });
  }

  close(): void {
    if (this.closed) return;
    try {
      this.ws.close();
    } catch {}
    this.onClosed("closed by us");
  }

  private onClosed(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    for (const [id, h] of this.oks) h(false, "error: connection closed"), this.oks.delete(id);
    for (const [, h] of this.subs) h(["DROPPED"]);
    this.subs.clear();
    for (const h of this.closeHandlers.splice(0)) h(reason);
  }

  private onFrame(data: unknown): void {
    let f: unknown;
    try {
      f = JSON.parse(String(data));
    } catch {
      return;
    }
    if (!Array.isArray(f) || typeof f[0] !== "string") return;
    if (f[0] === "OK" && typeof f[1] === "string") {
      const h = this.oks.get(f[1]);
      if (h) this.oks.delete(f[1]), h(f[2] === true, String(f[3] ?? ""));
    } else if (f[0] === "NOTICE") {
      const m = String(f[1]);
      this.notices.push(m);
      this.noticeHandler?.(m);
    } else if (typeof f[1] === "string") this.subs.get(f[1])?.(f);
  }
}
