// One running write-policy plugin process (strfry's protocol): its pipe, its pending requests
// matched by id, timeouts, and how it is stopped. The policy around it (which command, restarts,
// reloads, the bound on waiting events) is WritePolicyPlugin in plugin.ts.
import { spawn, type ChildProcessByStdio } from "node:child_process";
import type { Readable, Writable } from "node:stream";
import { parseAnswerLine, rejectMessage } from "../policy/plugin-protocol.ts";

/** What to answer with OK; undefined means the plugin accepted and the pipeline goes on. */
export interface Verdict {
  accepted: boolean;
  message: string;
}

export interface PluginSettings {
  /** Run with /bin/sh -c, like strfry: a path, or any shell command with arguments. */
  command: string;
  timeoutMs: number;
}

/** What a process needs from the plugin that runs it. */
export interface PluginHost {
  settings(): PluginSettings;
  isClosing(): boolean;
  /** Events waiting for any process of this plugin. */
  inflight: number;
  readonly warnings: Warnings;
  /** A valid answer came: the plugin works. */
  answered(): void;
  /** The process is gone or going; a failure counts towards the restart backoff. */
  detach(proc: PluginProcess, failure: boolean): void;
}

/** Longest answer line read (strfry: 8192); a longer one is a broken plugin, restarted. */
const MAX_LINE_BYTES = 64 * 1024;
/** After SIGTERM, a plugin still alive this long is sent SIGKILL. */
const KILL_GRACE_MS = 2000;
/** After the shell exits, how long its last answers may take to come out of the pipe. */
const DRAIN_MS = 200;

export const errorVerdict = (message: string): Verdict => ({ accepted: false, message: `error: ${message}` });
const SHADOW: Verdict = { accepted: true, message: "" };

type Child = ChildProcessByStdio<Writable, Readable, null>;

interface Pending {
  id: string;
  deadline: number;
  settle(v: Verdict | undefined): void;
  settled: boolean;
}

/**
 * Signals the plugin's whole process group. /bin/sh need not exec the command (dash forks it),
 * so signalling the shell alone (as strfry does) can leave a hung plugin running.
 */
function signalGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // the group is gone already
  }
}

/** Plugins alive in this process, killed if it exits without closing them. */
const alive = new Set<number>();
let exitHook = false;
function track(pid: number | undefined): void {
  if (pid === undefined) return;
  alive.add(pid);
  if (exitHook) return;
  exitHook = true;
  process.on("exit", () => {
    for (const p of alive) signalGroup(p, "SIGKILL");
  });
}

/** Warnings about a misbehaving plugin, at most 20 a minute (a plugin printing junk could flood the log). */
export class Warnings {
  private windowStart = 0;
  private count = 0;
  private suppressed = 0;
  warn(msg: string): void {
    const now = Date.now();
    if (now - this.windowStart > 60_000) {
      if (this.suppressed > 0) console.warn(`write policy plugin: ${this.suppressed} more warnings suppressed`);
      this.windowStart = now;
      this.count = 0;
      this.suppressed = 0;
    }
    if (++this.count <= 20) console.warn(`write policy plugin: ${msg}`);
    else this.suppressed++;
  }
}

/** One running plugin process, its pending requests and its reader. */
export class PluginProcess {
  readonly proc: Child;
  private readonly pending = new Map<string, Pending[]>();
  /** In send order, for timeouts; settled entries are skipped. */
  private queue: Pending[] = [];
  private head = 0;
  private flushQueued = false;
  /** Request lines not yet written (written once per tick). */
  private outgoing = "";
  /** The start of a line not yet ended by a newline. */
  private partial = "";
  private readonly timer: ReturnType<typeof setInterval>;
  inflight = 0;
  /** Replaced (reload): gets no new events, exits when its answers are in. */
  draining = false;
  dead = false;
  /** Set when we end the process on purpose; an exit then is not a failure. */
  private stopping = false;
  /** Resolves when the process has exited and its output is read. */
  readonly exited: Promise<void>;

  constructor(
    readonly command: string,
    readonly version: string | undefined,
    private readonly host: PluginHost,
  ) {
    // Its own process group (setsid), so that stopping it reaches whatever the shell started.
    this.proc = spawn("/bin/sh", ["-c", command], { stdio: ["pipe", "pipe", "inherit"], detached: true });
    track(this.proc.pid);
    console.log(`write policy plugin started: ${command} (pid ${this.proc.pid})`);
    // A dead pipe shows as the process exiting; without a listener it would throw.
    this.proc.stdin.on("error", () => {});
    this.proc.stdout.setEncoding("utf8");
    this.proc.stdout.on("data", (chunk: string) => this.onData(chunk));
    const outputEnded = new Promise<void>((resolve) => {
      this.proc.stdout.once("end", resolve);
      this.proc.stdout.once("close", resolve);
    });
    this.exited = new Promise<void>((resolve) => {
      const done = async (code: number | null, signal: NodeJS.Signals | null, err?: Error) => {
        // Answers written just before exiting may still be in the pipe: read them first.
        await Promise.race([outputEnded, new Promise((r) => setTimeout(r, DRAIN_MS))]);
        this.onExit(code, signal, err);
        resolve();
      };
      this.proc.once("exit", (code, signal) => void done(code, signal));
      this.proc.once("error", (err) => void done(null, null, err)); // e.g. /bin/sh cannot be started
    });
    const timeoutMs = host.settings().timeoutMs;
    this.timer = setInterval(() => this.tick(), Math.min(250, Math.max(10, Math.floor(timeoutMs / 5))));
    this.timer.unref();
  }

  ask(id: string, line: string, timeoutMs: number): Promise<Verdict | undefined> {
    return new Promise((resolve) => {
      const p: Pending = { id, deadline: Date.now() + timeoutMs, settled: false, settle: resolve };
      const same = this.pending.get(id);
      if (same) same.push(p);
      else this.pending.set(id, [p]);
      this.queue.push(p);
      this.inflight++;
      this.host.inflight++;
      this.outgoing += line;
      if (!this.flushQueued) {
        this.flushQueued = true;
        queueMicrotask(() => this.flush());
      }
    });
  }

  /** One write per burst of events: the request lines of a tick go to the pipe together. */
  private flush(): void {
    this.flushQueued = false;
    const out = this.outgoing;
    this.outgoing = "";
    if (this.dead || this.stopping || out === "") return;
    this.proc.stdin.write(out);
  }

  private settle(p: Pending, v: Verdict | undefined): void {
    if (p.settled) return;
    p.settled = true;
    this.inflight--;
    this.host.inflight--;
    const same = this.pending.get(p.id);
    if (same) {
      const i = same.indexOf(p);
      if (i >= 0) same.splice(i, 1);
      if (same.length === 0) this.pending.delete(p.id);
    }
    p.settle(v);
  }

  private onData(chunk: string): void {
    if (this.stopping) return;
    const buf = this.partial + chunk;
    const lines = buf.split("\n");
    this.partial = lines.pop()!;
    for (const line of lines) {
      if (line.length > MAX_LINE_BYTES) return this.kill(`an output line is longer than ${MAX_LINE_BYTES} bytes`, true);
      this.onLine(line);
    }
    if (this.partial.length > MAX_LINE_BYTES) this.kill(`an output line is longer than ${MAX_LINE_BYTES} bytes`, true);
  }

  private onLine(raw: string): void {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (line.trim() === "") return;
    const parsed = parseAnswerLine(line);
    if (parsed.kind === "junk") return this.host.warnings.warn(`ignored an output line (${parsed.why}): ${line.slice(0, 200)}`);
    const p = this.pending.get(parsed.id)?.[0];
    if (!p) return this.host.warnings.warn(`ignored an answer for an event it was not asked about (or that timed out): ${parsed.id.slice(0, 64)}`);
    if (parsed.kind === "invalid") {
      this.host.warnings.warn(`invalid answer for ${parsed.id}: ${parsed.why}`);
      return this.settle(p, errorVerdict("write policy plugin gave an invalid answer"));
    }
    this.host.answered();
    if (parsed.action === "accept") this.settle(p, undefined);
    else if (parsed.action === "shadowReject") this.settle(p, SHADOW);
    else this.settle(p, { accepted: false, message: rejectMessage(parsed.msg) });
  }

  private tick(): void {
    const now = Date.now();
    while (this.head < this.queue.length) {
      const p = this.queue[this.head]!;
      if (p.settled) {
        this.head++;
        continue;
      }
      if (p.deadline > now) break;
      this.host.warnings.warn(`no answer for ${p.id} within ${this.host.settings().timeoutMs} ms; restarting the plugin`);
      this.settle(p, errorVerdict("write policy plugin did not answer in time"));
      this.kill("timeout", true);
      return;
    }
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    // Idle and no longer wanted: replaced, switched off or changed by a reload, or the relay is closing.
    if (this.inflight === 0 && (this.draining || this.host.isClosing() || this.host.settings().command !== this.command)) this.kill("no longer wanted", false);
  }

  /** Ends the process: EOF on stdin, SIGTERM, SIGKILL if it lingers; what it held is answered with error:. */
  kill(why: string, failure: boolean): void {
    if (this.stopping || this.dead) return;
    this.stopping = true;
    this.host.detach(this, failure);
    this.failAll(failure ? "write policy plugin failed and is being restarted" : "write policy plugin stopped");
    this.proc.stdin.end();
    const pid = this.proc.pid;
    signalGroup(pid, "SIGTERM");
    // Whatever ignored SIGTERM: the shell may be gone while the plugin it started is not.
    setTimeout(() => signalGroup(pid, "SIGKILL"), KILL_GRACE_MS).unref();
    if (failure) this.host.warnings.warn(`stopped pid ${this.proc.pid}: ${why}`);
  }

  /** Replaced by a newer command or file: no more events; EOF lets it answer what it holds and exit. */
  retire(): void {
    this.draining = true;
    this.flush(); // lines asked for in this tick still go out before the EOF
    this.proc.stdin.end();
  }

  private failAll(message: string): void {
    for (const list of [...this.pending.values()]) for (const p of [...list]) this.settle(p, errorVerdict(message));
  }

  private onExit(code: number | null, signal: NodeJS.Signals | null, err?: Error): void {
    if (this.dead) return;
    this.dead = true;
    if (this.proc.pid !== undefined) alive.delete(this.proc.pid);
    clearInterval(this.timer);
    const unexpected = !this.stopping && !this.draining;
    if (unexpected) {
      const how = err
        ? `an error (${err.message})`
        : signal
          ? `signal ${signal}`
          : `code ${code}${code === 127 ? " (command not found)" : code === 126 ? " (not executable)" : ""}`;
      this.host.warnings.warn(`pid ${this.proc.pid} exited with ${how}; it will be started again for the next event`);
    }
    this.host.detach(this, unexpected);
    this.failAll("write policy plugin exited");
  }
}

