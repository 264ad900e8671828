// A tiny Chrome DevTools Protocol client for the page tests: launch headless Chromium, open a
// page, evaluate script, wait for conditions. One websocket to the browser; pages are flat
// sessions on it (Target.attachToTarget with flatten), so commands carry a sessionId.
import type { Subprocess } from "bun";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const CHROMIUM = "/usr/bin/chromium";

type Params = Record<string, unknown>;
type Listener = (params: any, sessionId: string | undefined) => void;

/** Commands and events over the browser's DevTools websocket. */
class Connection {
  private nextId = 0;
  private readonly pending = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void; method: string }>();
  private readonly listeners = new Map<string, Set<Listener>>();

  private constructor(private readonly ws: WebSocket) {
    ws.onmessage = (m) => {
      const msg = JSON.parse(String(m.data));
      if (msg.id !== undefined) {
        const p = this.pending.get(msg.id);
        this.pending.delete(msg.id);
        if (msg.error) p?.reject(new Error(`${p.method}: ${msg.error.message}`));
        else p?.resolve(msg.result);
      } else for (const l of this.listeners.get(msg.method) ?? []) l(msg.params, msg.sessionId);
    };
    // A browser that went away must not leave a test waiting for its timeout.
    ws.onclose = () => {
      for (const p of this.pending.values()) p.reject(new Error(`${p.method}: DevTools connection closed`));
      this.pending.clear();
    };
  }

  static async open(url: string): Promise<Connection> {
    const ws = new WebSocket(url);
    await new Promise<void>((resolve, reject) => {
      ws.onopen = () => resolve();
      ws.onerror = () => reject(new Error(`cannot connect to DevTools at ${url}`));
    });
    return new Connection(ws);
  }

  send(method: string, params: Params = {}, sessionId?: string): Promise<any> {
    const id = ++this.nextId;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, method });
      this.ws.send(JSON.stringify({ id, method, params, sessionId }));
    });
  }

  on(method: string, listener: Listener): () => void {
    let set = this.listeners.get(method);
    if (!set) this.listeners.set(method, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  }

  close(): void {
    this.ws.close();
  }
}

/** One tab. */
export class Page {
  constructor(
    private readonly conn: Connection,
    readonly sessionId: string,
  ) {}

  send(method: string, params: Params = {}): Promise<any> {
    return this.conn.send(method, params, this.sessionId);
  }

  /** Listens to this page's events only. */
  on(method: string, listener: (params: any) => void): () => void {
    return this.conn.on(method, (params, sessionId) => sessionId === this.sessionId && listener(params));
  }

  /** Navigates and resolves when the load event fired. */
  async goto(url: string, timeoutMs = 15_000): Promise<void> {
    let off = () => {};
    const loaded = new Promise<void>((resolve) => (off = this.on("Page.loadEventFired", () => resolve())));
    try {
      const nav = await this.send("Page.navigate", { url });
      if (nav.errorText) throw new Error(`navigating to ${url}: ${nav.errorText}`);
      await withTimeout(loaded, timeoutMs, `load of ${url}`);
    } finally {
      off();
    }
  }

  /** The value of an expression (awaited if a promise), or throws with the page's exception. */
  async evaluate<T = unknown>(expression: string): Promise<T> {
    const r = await this.send("Runtime.evaluate", { expression, awaitPromise: true, returnByValue: true });
    if (r.exceptionDetails) throw new Error(`in page: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}`);
    return r.result.value as T;
  }

  /** Polls an expression until it is truthy; resolves with its value. */
  async waitFor<T = unknown>(expression: string, timeoutMs = 10_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = await this.evaluate<T>(expression);
      if (v) return v;
      if (Date.now() > deadline) throw new Error(`timed out waiting in page for: ${expression}`);
      await Bun.sleep(25);
    }
  }
}

export class Browser {
  private constructor(
    private readonly proc: Subprocess<"ignore", "ignore", "pipe">,
    private readonly conn: Connection,
    private readonly profile: string,
    /** What Chromium printed, for error messages. */
    readonly log: string[],
  ) {}

  /** `args` are extra Chromium switches, e.g. --host-resolver-rules. */
  static async launch(args: string[] = [], executable = CHROMIUM, timeoutMs = 30_000): Promise<Browser> {
    const profile = mkdtempSync(join(tmpdir(), "bunstr-chromium-"));
    const proc = Bun.spawn(
      [
        executable,
        "--headless=new",
        "--no-sandbox", // tests may run as root in a container
        "--remote-debugging-port=0",
        `--user-data-dir=${profile}`,
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-gpu",
        "--disable-dev-shm-usage", // containers often have a tiny /dev/shm
        "--disable-extensions",
        "--disable-background-networking",
        ...args,
        "about:blank",
      ],
      { stdin: "ignore", stdout: "ignore", stderr: "pipe" },
    );
    const log: string[] = [];
    try {
      const url = await withTimeout(devtoolsUrl(proc.stderr, log), timeoutMs, "Chromium's DevTools URL");
      return new Browser(proc, await Connection.open(url), profile, log);
    } catch (err) {
      proc.kill("SIGKILL");
      await proc.exited;
      rmSync(profile, { recursive: true, force: true });
      throw new Error(`${(err as Error).message}; chromium said: ${log.join("").slice(-2000)}`);
    }
  }

  async newPage(): Promise<Page> {
    const { targetId } = await this.conn.send("Target.createTarget", { url: "about:blank" });
    const { sessionId } = await this.conn.send("Target.attachToTarget", { targetId, flatten: true });
    const page = new Page(this.conn, sessionId);
    await page.send("Page.enable");
    await page.send("Runtime.enable");
    return page;
  }

  /** Browser.close, then the process if it lingers; the profile directory goes too. */
  async close(): Promise<void> {
    await withTimeout(this.conn.send("Browser.close"), 3000, "Browser.close").catch(() => {});
    this.conn.close();
    const exited = await withTimeout(this.proc.exited, 5000, "chromium exit").then(
      () => true,
      () => false,
    );
    if (!exited) {
      this.proc.kill("SIGKILL");
      await this.proc.exited;
    }
    rmSync(this.profile, { recursive: true, force: true });
  }
}

/** Reads stderr until Chromium prints its DevTools URL, then keeps draining it (a full pipe would stall Chromium). */
async function devtoolsUrl(stderr: ReadableStream<Uint8Array>, log: string[]): Promise<string> {
  const reader = stderr.getReader();
  const decoder = new TextDecoder();
  let seen = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error("chromium exited before printing its DevTools URL");
    const text = decoder.decode(value, { stream: true });
    log.push(text);
    seen += text;
    const m = /DevTools listening on (ws:\/\/\S+)/.exec(seen);
    if (m) {
      void (async () => {
        for (;;) {
          const r = await reader.read().catch(() => ({ done: true, value: undefined }));
          if (r.done) return;
          if (log.length < 200) log.push(decoder.decode(r.value, { stream: true }));
        }
      })();
      return m[1]!;
    }
  }
}

export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout>;
  const timeout = new Promise<never>(
    (_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms)),
  );
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}
