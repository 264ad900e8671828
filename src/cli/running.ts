// The relays running with a given config file, to tell them to reload it (SIGHUP, as `systemctl
// reload bunstr` does): the processes whose command line is `bunstr [serve] … --config FILE` with
// FILE, resolved from the process's working directory, the same file. Linux only (/proc); elsewhere
// none are found and the caller says how to reload by hand.
import { readdirSync, readFileSync, readlinkSync, realpathSync } from "node:fs";
import { basename, isAbsolute, resolve } from "node:path";

/** A runtime running a script (bun src/main.ts …) rather than the compiled binary. */
const RUNTIME = /^(bun|bun-.*|bun\.exe|node)$/;

/** The --config value of a `bunstr serve` command line, or undefined for any other command line. */
export function serveConfigArg(argv: readonly string[]): string | undefined {
  let i = 1;
  if (RUNTIME.test(basename(argv[0] ?? ""))) {
    // bun [--watch …] script.ts: the command follows the script.
    while (i < argv.length && argv[i]!.startsWith("-")) i++;
    const script = argv[i] ?? "";
    if (!/(^|\/)(main\.ts|bunstr)$/.test(script)) return undefined;
    i++;
  } else if (basename(argv[0] ?? "") !== "bunstr") return undefined;
  const cmd = argv[i];
  if (cmd !== undefined && !cmd.startsWith("-") && cmd !== "serve") return undefined;
  for (let j = i; j < argv.length; j++) {
    if (argv[j] === "--config") return argv[j + 1];
    if (argv[j]!.startsWith("--config=")) return argv[j]!.slice("--config=".length);
  }
  return undefined;
}

const real = (path: string): string => {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
};

/** The relays (not this process) running on this machine, with the config file each serves with (resolved). */
export function runningRelays(): { pid: number; file: string }[] {
  let pids: string[];
  try {
    pids = readdirSync("/proc").filter((d) => /^\d+$/.test(d));
  } catch {
    return [];
  }
  const found: { pid: number; file: string }[] = [];
  for (const pid of pids) {
    if (Number(pid) === process.pid) continue;
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8")
        .split("\0")
        .filter((a, i, all) => a !== "" || i < all.length - 1);
      const arg = serveConfigArg(argv);
      if (arg === undefined) continue;
      found.push({ pid: Number(pid), file: real(isAbsolute(arg) ? arg : resolve(readlinkSync(`/proc/${pid}/cwd`), arg)) });
    } catch {
      // Gone meanwhile, or another user's (its cwd is not readable): not ours to reload.
    }
  }
  return found;
}

/** Pids of the relays (not this process) serving with `file` as their --config. */
export function relaysUsing(file: string): number[] {
  const target = real(resolve(file));
  return runningRelays()
    .filter((r) => r.file === target)
    .map((r) => r.pid);
}
