// A strfry-compatible write-policy plugin: an operator's command that judges every new, valid
// event before it is stored or broadcast (docs/plugins.md). Unlike strfry, which waits for each
// answer before it sends the next event, requests are pipelined (strfry's docs reserve this:
// answers carry the id), so a plugin costs a pipe round trip per burst of events, not per event.
//
// Failure semantics (strfry: src/PluginEventSifter.h):
// - no answer within the timeout: that event gets "error: ..." and the plugin is stopped and
//   started again for the next event, as strfry does; the other events it held get "error:".
// - the plugin exits: the events it held get "error: ..."; it is started again for the next
//   event, at once after the first failure, then with a doubling backoff (250 ms .. 30 s) while
//   it keeps failing without answering anything; events meanwhile get "error: ..." at once.
// - a line that is not a JSON object with an id is logged and skipped, as strfry does, so debug
//   output on stdout does not break a plugin; the event it was meant for times out.
// - an answer for a pending id with no valid action: that event gets "error: ...", logged.
// - an answer for an id nobody is waiting for (e.g. after a timeout): logged and ignored.
// - a flood: more lines (or bytes) that answer no waiting request in a second than a bound
//   (plugin-process.ts), or a line longer than 64 KiB: the events it held get "error: ...", it is
//   stopped and started again after a backoff of 1 s, doubling up to 30 s for each such violation
//   (a valid answer does not reset it; ten quiet minutes do). Its output is read a bounded amount
//   per turn of the event loop, so a flood never stalls the relay.
// - the command, or (when it has no spaces, i.e. it is a path) the file's inode, size, mtime or
//   ctime, changes: new events go to a fresh process; the old one gets EOF on stdin, answers what
//   it holds and is stopped once idle.
// Stopping a plugin: EOF, SIGTERM to its process group, SIGKILL two seconds later.
import { log } from "../../log.ts";
import { statSync } from "node:fs";
import type { Config } from "../../config/schema.ts";
import type { NostrEvent } from "../../protocol/event.ts";
import { ipSourceType, requestLine, type Source } from "../../policy/plugin-protocol.ts";
import { errorVerdict, PluginProcess, Warnings, type PluginHost, type PluginSettings, type Verdict } from "./plugin-process.ts";

/** Events waiting for the plugin, relay-wide; more are refused with rate-limited:. Exported for tests (test/plugin.test.ts). */
export const MAX_PLUGIN_INFLIGHT = 2048;
/** The plugin file is stat()ed at most this often (strfry: on every event). */
const STAT_EVERY_MS = 100;
const BACKOFF_FIRST_MS = 250;
const BACKOFF_MAX_MS = 30_000;
/** The backoff after a protocol violation (flood, overlong line), doubling; forgotten after quiet minutes. */
const VIOLATION_BACKOFF_FIRST_MS = 1000;
const VIOLATIONS_FORGOTTEN_MS = 10 * 60_000;

/** A file's identity and version, when the command is a path (no spaces), as strfry decides. */
function fileVersion(command: string): string | undefined {
  if (command.includes(" ")) return undefined;
  try {
    const st = statSync(command);
    return `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
  } catch {
    return undefined;
  }
}

/** The plugin of one relay: the running process, restarts with backoff, reloads. */
export class WritePolicyPlugin implements PluginHost {
  private current?: PluginProcess;
  private readonly retired = new Set<PluginProcess>();
  private failures = 0;
  private violations = 0;
  private lastViolation = 0;
  private notBefore = 0;
  private lastStat = 0;
  inflight = 0;
  readonly warnings = new Warnings();

  constructor(
    readonly settings: () => PluginSettings,
    readonly isClosing: () => boolean = () => false,
  ) {}

  /** The verdict for one event: undefined = accepted, go on. */
  ask(id: string, eventJson: string, source: Source): Verdict | Promise<Verdict | undefined> {
    const { command, timeoutMs } = this.settings();
    const now = Date.now();
    let proc = this.current;
    if (proc && proc.command !== command) this.replace(proc);
    else if (proc && now - this.lastStat >= STAT_EVERY_MS) {
      this.lastStat = now;
      const version = fileVersion(command);
      if (version !== undefined && version !== proc.version) this.replace(proc);
    }
    proc = this.current;
    if (!proc) {
      if (now < this.notBefore)
        return errorVerdict(`write policy plugin is restarting, try again in ${Math.ceil((this.notBefore - now) / 1000)} s`);
      try {
        const version = fileVersion(command);
        this.lastStat = now;
        proc = this.current = new PluginProcess(command, version, this);
      } catch (err) {
        this.warnings.warn(`could not start ${command}: ${String(err)}`);
        this.failed();
        return errorVerdict("write policy plugin could not be started");
      }
    }
    if (this.inflight >= MAX_PLUGIN_INFLIGHT)
      return { accepted: false, message: "rate-limited: the relay's write policy is busy, try again shortly" };
    return proc.ask(id, requestLine(eventJson, Math.floor(now / 1000), source), timeoutMs);
  }

  private replace(proc: PluginProcess): void {
    log.info(`write policy plugin changed; restarting: ${this.settings().command || "(none)"}`);
    this.current = undefined;
    this.retired.add(proc);
    proc.retire();
    this.failures = 0;
    this.violations = 0;
    this.notBefore = 0;
  }

  /** A process is gone or going: forget it; count a failure (or a violation) for the backoff. */
  detach(proc: PluginProcess, failure: boolean, violation = false): void {
    if (this.current === proc) this.current = undefined;
    this.retired.delete(proc);
    if (failure) this.failed(violation);
  }

  private failed(violation = false): void {
    const now = Date.now();
    this.failures++;
    let delay = this.failures <= 1 ? 0 : Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** (this.failures - 2));
    if (violation) {
      if (now - this.lastViolation > VIOLATIONS_FORGOTTEN_MS) this.violations = 0;
      this.lastViolation = now;
      this.violations++;
      delay = Math.max(delay, Math.min(BACKOFF_MAX_MS, VIOLATION_BACKOFF_FIRST_MS * 2 ** (this.violations - 1)));
    }
    // A restart is also due no sooner than the last one's backoff (a failure while waiting does not shorten it).
    this.notBefore = Math.max(this.notBefore, now + delay);
  }

  /** A valid answer: the plugin works, so the next failure restarts it at once. */
  answered(): void {
    this.failures = 0;
  }

  /** The pid of the process new events go to (for tests and logs). */
  get pid(): number | undefined {
    return this.current?.proc.pid;
  }

  /** Stops every process; events they hold get error:. Resolves when they have exited. */
  async close(): Promise<void> {
    const procs = [...(this.current ? [this.current] : []), ...this.retired];
    for (const p of procs) p.kill("closed", false);
    await Promise.all(procs.map((p) => p.exited));
  }
}

/** [options] write_policy_plugin and its timeout; a relay reads them at every event (a reload may change them). */
export const pluginSettings = (config: Config): PluginSettings => ({
  command: config.options.write_policy_plugin,
  timeoutMs: config.options.write_policy_timeout_ms,
});

/**
 * Asks the configured plugin about a valid, new event from a client connection. undefined means
 * go on (no plugin, or it accepted); else the OK to answer with. strfry sends `authed` only for
 * NIP-70 protected events (whose author must have authenticated); its docs promise it whenever
 * the connection has authenticated, and so do we: the event's author if the connection
 * authenticated as it, else the first pubkey it authenticated as.
 */
export function askWritePolicy(
  owner: { readonly config: Config; readonly plugin: WritePolicyPlugin },
  conn: { readonly ip: string; readonly authed: ReadonlySet<string> },
  e: NostrEvent,
  eventJson: string,
): Verdict | undefined | Promise<Verdict | undefined> {
  if (!owner.config.options.write_policy_plugin) {
    if (owner.plugin.pid !== undefined) void owner.plugin.close(); // the plugin was switched off by a reload
    return undefined;
  }
  const authed = conn.authed.has(e.pubkey) ? e.pubkey : conn.authed.values().next().value;
  return owner.plugin.ask(e.id, eventJson, { type: ipSourceType(conn.ip), info: conn.ip, authed });
}
