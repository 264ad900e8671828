// Hot reload of the running relay's config: on SIGHUP, and (with [options] watch_config) when the
// --config file changes. The file is read again with the same command-line overrides, which still
// win; reloadable keys take effect at once, the others keep their value and are reported.
import { log } from "../log.ts";
import { watch, type FSWatcher } from "node:fs";
import { basename, dirname } from "node:path";
import { ConfigError } from "../config/load.ts";
import { applyReload, describeChanges } from "../config/reload.ts";
import type { Config } from "../config/schema.ts";
import { configWarnings } from "../config/warnings.ts";
import type { Relay } from "../relay/server.ts";
import { checkSelf, RelayKeyError } from "./relay-key.ts";

interface ReloaderOptions {
  /** The --config file (absolute), if one was given. */
  file?: string;
  /** Reads the file and applies the command-line overrides, as at start. */
  load: () => Promise<Config>;
  /** The running config, changed in place. */
  live: Config;
  relay: Relay;
  log?: (line: string) => void;
  error?: (line: string) => void;
}

/** Quiet time after the last change to the file before it is read (editors write in steps). */
const WATCH_DEBOUNCE_MS = 500;
const WATCHED = "config file changed";

export class ConfigReloader {
  private running?: Promise<void>;
  private again?: string;
  private watcher?: FSWatcher;
  private debounce?: ReturnType<typeof setTimeout>;
  private readonly log: (line: string) => void;
  private readonly error: (line: string) => void;

  constructor(private readonly opts: ReloaderOptions) {
    this.log = opts.log ?? ((l) => log.info(l));
    this.error = opts.error ?? ((l) => log.error(l));
    this.syncWatcher();
  }

  /** Reloads now; a request during a reload runs once more after it (they never overlap). */
  reload(why: string): Promise<void> {
    if (this.running) {
      this.again = why;
      return this.running;
    }
    this.running = this.run(why)
      .catch((err) => this.error(`${why}: config reload failed: ${String((err as Error)?.stack ?? err)}`))
      .finally(() => {
        this.running = undefined;
        const next = this.again;
        this.again = undefined;
        if (next) void this.reload(next);
      });
    return this.running;
  }

  close(): void {
    clearTimeout(this.debounce);
    this.watcher?.close();
    this.watcher = undefined;
  }

  private async run(why: string): Promise<void> {
    const { file, live, relay } = this.opts;
    if (!file) return this.log(`${why}: no --config file to reload`);
    if (relay.ctx.closing) return;
    let next: Config;
    try {
      next = await this.opts.load();
      // [info] self must stay the relay key's pubkey, as at start.
      checkSelf(next, relay.ctx.relayKey);
    } catch (err) {
      // A bad file (ConfigError: each problem with file:line) or an unreadable one; a line each.
      const problems = err instanceof ConfigError ? err.problems : [`${file}: ${err instanceof RelayKeyError ? err.message : String(err)}`];
      if (err instanceof ConfigError) for (const text of err.warnings) this.log(`${why}: warning: ${text}`);
      for (const text of problems) this.error(`${why}: config reload failed, keeping the running config: ${text}`);
      return;
    }
    const { applied, restartRequired } = applyReload(live, next);
    log.configure(live.log);
    relay.reconfigure();
    this.syncWatcher();
    // A save that changed nothing (or touched the file) is not worth a line when watching.
    if (why === WATCHED && applied.length === 0 && restartRequired.length === 0) return;
    this.log(`${why}: config reloaded from ${file}: ${applied.length > 0 ? describeChanges(applied) : "no changes"}`);
    if (restartRequired.length > 0)
      this.log(
        `${why}: restart required: ${restartRequired.map((c) => c.key).join(", ")} (changed in the file; running with the old values)`,
      );
    for (const line of configWarnings(live)) this.log(line);
  }

  /** Watches the file's directory while watch_config is on (an editor's save may replace the file). */
  private syncWatcher(): void {
    const { file, live } = this.opts;
    if (!file || !live.options.watch_config) return this.close();
    if (this.watcher) return;
    const name = basename(file);
    try {
      this.watcher = watch(dirname(file), { persistent: false }, (_event, changed) => {
        if (changed !== null && changed !== name) return;
        clearTimeout(this.debounce);
        this.debounce = setTimeout(() => void this.reload(WATCHED), WATCH_DEBOUNCE_MS);
      });
      this.watcher.on("error", (err) => {
        this.error(`watch_config: watching ${file} failed (${String(err)}); reload with SIGHUP`);
        this.close();
      });
    } catch (err) {
      this.error(`watch_config: cannot watch ${file} (${String(err)}); reload with SIGHUP`);
    }
  }
}
