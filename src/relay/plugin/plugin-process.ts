// One running write-policy plugin process (strfry's protocol): its pipe, its pending requests
// matched by id, timeouts, and how it is stopped. The policy around it (which command, restarts,
// reloads, the bound on waiting events) is WritePolicyPlugin in plugin.ts.
import { log } from "../../log.ts";
import { spawn, type ChildProcessByStdio } from "node:child_process";
import type { Readable, Writable } from "node:stream";
import { parseAnswerLine, rejectMessage } from "../../policy/plugin-protocol.ts";

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
  /**
   * The process is gone or going; a failure counts towards the restart backoff, a violation of
   * the protocol (a flood, an overlong line) towards a longer one that a valid answer does not reset.
   */
  detach(proc: PluginProcess, failure: boolean, violation?: boolean): void;
}

/** Longest answer line read (strfry: 8192); a longer one is a broken plugin, restarted. */
const MAX_LINE_BYTES = 64 * 1024;
/**
 * Output read in one turn of the event loop, at most; the rest waits, the pipe paused, for the
 * next turn. (Bun delivers a pipe that is always readable, e.g. `yes`, chunk after chunk without
 * ever running timers or sockets in between, unless the stream is paused.)
 */
const TURN_LINES = 1000;
const TURN_BYTES = 256 * 1024;
/**
 * Output that answers no waiting request (junk, blank lines, unknown or timed-out ids), per
 * second, beyond one line and 1 KiB per request sent in that second: more is a flood, and the
 * plugin is stopped and restarted with a backoff. A few such lines are logged and skipped.
 */
const JUNK_LINES_PER_SECOND = 1000;
/** Output lines that answer nothing logged per process; the rest are counted, and the count logged when it stops. */
const JUNK_LOGGED = 10;
const JUNK_BYTES_PER_SECOND = 1024 * 1024;
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

/**
 * Warnings about a misbehaving plugin, at most 20 a minute of each kind, then counted (a plugin
 * printing junk could flood the log): what it printed ("output") has its own budget, so that it
 * cannot crowd out why the plugin was stopped or restarted ("process").
 */
export class Warnings {
  private readonly kinds = new Map<string, { windowStart: number; count: number; suppressed: number }>();
  warn(msg: string, kind: "output" | "process" = "process"): void {
    const now = Date.now();
    let k = this.kinds.get(kind);
    if (!k) this.kinds.set(kind, (k = { windowStart: now, count: 0, suppressed: 0 }));
    if (now - k.windowStart > 60_000) {
      if (k.suppressed > 0) log.warn(`write policy plugin: ${k.suppressed} more warnings about its ${kind} suppressed`);
      k.windowStart = now;
      k.count = 0;
      k.suppressed = 0;
    }
    if (++k.count <= 20) log.warn(`write policy plugin: ${msg}`);
    else k.suppressed++;
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
  /** Output not yet parsed, from `pos` on: whole lines waiting for the next turn, then the start of a line. */
  private buf = "";
  private pos = 0;
  /** Lines and bytes parsed in this turn of the event loop; reset by `turnEnd`. */
  private turnLines = 0;
  private turnBytes = 0;
  private turnEnd = false;
  private paused = false;
  /** Output that answered nothing in the current second, and requests sent in it. */
  private windowStart = 0;
  private junkLines = 0;
  private junkBytes = 0;
  private sentInWindow = 0;
  /** Output lines that answered nothing, over the process's life. */
  private junkTotal = 0;
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
    log.info(`write policy plugin started: ${command} (pid ${this.proc.pid})`);
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
      this.junkWindow(Date.now());
      this.sentInWindow++;
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
    this.buf = this.pos === this.buf.length ? chunk : this.buf.slice(this.pos) + chunk;
    this.pos = 0;
    this.readLines();
  }

  /** Parses whole lines within this turn's budget; past it, pauses the pipe until the next turn. */
  private readLines(): void {
    while (!this.stopping) {
      if (this.turnLines >= TURN_LINES || this.turnBytes >= TURN_BYTES) return this.yieldTurn();
      const nl = this.buf.indexOf("\n", this.pos);
      const end = nl < 0 ? this.buf.length : nl;
      if (end - this.pos > MAX_LINE_BYTES) return this.kill(`an output line is longer than ${MAX_LINE_BYTES} bytes`, true, true);
      if (nl < 0) break;
      const line = this.buf.slice(this.pos, nl);
      this.pos = nl + 1;
      this.turnLines++;
      this.turnBytes += line.length + 1;
      this.startTurn();
      this.onLine(line);
    }
    if (this.stopping) return;
    if (this.pos > 0) {
      this.buf = this.buf.slice(this.pos);
      this.pos = 0;
    }
    if (this.paused) {
      this.paused = false;
      this.proc.stdout.resume();
    }
  }

  /** Counts this turn's work from its first line; the budget comes back at the next turn. */
  private startTurn(): void {
    if (this.turnEnd) return;
    this.turnEnd = true;
    setImmediate(() => {
      this.turnEnd = false;
      this.turnLines = 0;
      this.turnBytes = 0;
      if (this.paused && !this.stopping) this.readLines();
    });
  }

  private yieldTurn(): void {
    if (!this.paused) {
      this.paused = true;
      this.proc.stdout.pause();
    }
  }

  private junkWindow(now: number): void {
    if (now - this.windowStart < 1000) return;
    this.windowStart = now;
    this.junkLines = 0;
    this.junkBytes = 0;
    this.sentInWindow = 0;
  }

  /** A line that answers no waiting request: logged (a few), and a flood stops the plugin. */
  private junk(line: string, why?: string): void {
    this.junkWindow(Date.now());
    this.junkLines++;
    this.junkBytes += line.length + 1;
    if (this.junkLines > JUNK_LINES_PER_SECOND + this.sentInWindow || this.junkBytes > JUNK_BYTES_PER_SECOND + 1024 * this.sentInWindow)
      return this.kill(
        `it floods its output: more than ${this.junkLines > JUNK_LINES_PER_SECOND ? `${JUNK_LINES_PER_SECOND} lines` : `${JUNK_BYTES_PER_SECOND >> 20} MiB`} in a second that answer no request`,
        true,
        true,
      );
    if (++this.junkTotal <= JUNK_LOGGED && why)
      this.host.warnings.warn(
        `${why}${this.junkTotal === JUNK_LOGGED ? ` (more such lines from pid ${this.proc.pid} are counted, not logged)` : ""}`,
        "output",
      );
  }

  private onLine(raw: string): void {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (line.trim() === "") return this.junk(line);
    const parsed = parseAnswerLine(line);
    if (parsed.kind === "junk") return this.junk(line, `ignored an output line (${parsed.why}): ${line.slice(0, 200)}`);
    const p = this.pending.get(parsed.id)?.[0];
    if (!p) return this.junk(line, `ignored an answer for an event it was not asked about (or that timed out): ${parsed.id.slice(0, 64)}`);
    if (parsed.kind === "invalid") {
      this.host.warnings.warn(`invalid answer for ${parsed.id}: ${parsed.why}`, "output");
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
    if (this.inflight === 0 && (this.draining || this.host.isClosing() || this.host.settings().command !== this.command))
      this.kill("no longer wanted", false);
  }

  /** Ends the process: EOF on stdin, SIGTERM, SIGKILL if it lingers; what it held is answered with error:. */
  kill(why: string, failure: boolean, violation = false): void {
    if (this.stopping || this.dead) return;
    this.stopping = true;
    this.host.detach(this, failure, violation);
    this.failAll(failure ? "write policy plugin failed and is being restarted" : "write policy plugin stopped");
    // Its output is no longer read (what it held is answered): a plugin still writing gets EPIPE,
    // and the relay reads nothing more from it while it takes its time to die.
    this.buf = "";
    this.pos = 0;
    this.proc.stdout.destroy();
    this.proc.stdin.end();
    const pid = this.proc.pid;
    signalGroup(pid, "SIGTERM");
    // Whatever ignored SIGTERM: the shell may be gone while the plugin it started is not.
    setTimeout(() => signalGroup(pid, "SIGKILL"), KILL_GRACE_MS).unref();
    if (failure) this.host.warnings.warn(`stopped pid ${this.proc.pid}: ${why}${this.skipped()}`);
  }

  /** Replaced by a newer command or file: no more events; EOF lets it answer what it holds and exit. */
  retire(): void {
    this.draining = true;
    this.flush(); // lines asked for in this tick still go out before the EOF
    this.proc.stdin.end();
  }

  /** How many output lines that answered nothing went unlogged, for the process's last words. */
  private skipped(): string {
    const n = this.junkTotal - JUNK_LOGGED;
    return n > 0 ? ` (${n} output lines that answered no request were not logged)` : "";
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
      this.host.warnings.warn(`pid ${this.proc.pid} exited with ${how}; it will be started again for the next event${this.skipped()}`);
    } else if (!this.stopping && this.junkTotal > JUNK_LOGGED) this.host.warnings.warn(`pid ${this.proc.pid} exited${this.skipped()}`);
    this.host.detach(this, unexpected);
    this.failAll("write policy plugin exited");
  }
}
