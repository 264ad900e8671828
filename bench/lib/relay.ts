// The relay under test as a child process: spawn on a free 127.0.0.1 port with a temp data
// directory, wait until it listens, sample its CPU and memory from /proc, stop it with SIGTERM.
import type { Subprocess } from "bun";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { schema } from "../../src/config/schema.ts";
import { readResidentKib } from "../../src/observe/proc-status.ts";

export const REPO_ROOT = resolve(import.meta.dir, "..", "..");
/** The relay's entry point: src/main.ts, or BUNSTR_RELAY_MAIN (e.g. a patched copy, to check that a check can fail). */
export const RELAY_MAIN = process.env.BUNSTR_RELAY_MAIN ? resolve(process.env.BUNSTR_RELAY_MAIN) : "src/main.ts";
/**
 * Bun flags for the spawned relay alone, space-separated: BUNSTR_RELAY_BUN_FLAGS="--cpu-prof
 * --cpu-prof-dir=/tmp/prof" profiles the relay and not the load generator (bench/cpuprofile-top.ts
 * reads the profile).
 */
export const RELAY_BUN_FLAGS = (process.env.BUNSTR_RELAY_BUN_FLAGS ?? "").split(" ").filter(Boolean);
/**
 * A command prefix for the spawned relay alone, space-separated: BUNSTR_RELAY_WRAP="taskset -c 0"
 * pins the relay (and its worker threads, which inherit the mask) to one core, the load generator
 * not; the way to measure how the relay scales with cores.
 */
const RELAY_WRAP = (process.env.BUNSTR_RELAY_WRAP ?? "").split(" ").filter(Boolean);
/**
 * Environment for the spawned relay alone, space-separated K=V: BUNSTR_RELAY_ENV="BUN_JSC_numberOfGCMarkers=1"
 * tries a JSC option on the relay without changing the load generator's.
 */
const RELAY_ENV = Object.fromEntries(
  (process.env.BUNSTR_RELAY_ENV ?? "")
    .split(" ")
    .filter((kv) => kv.includes("="))
    .map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
);

/**
 * [rate_limits] all off, as TOML: a bench or stress run is many clients from one address, and its
 * numbers must not depend on the relay's defaults. Append it to a --config file; a relay spawned
 * without --config gets a file with just this.
 */
export const RATE_LIMITS_OFF = `[rate_limits]\n${Object.keys(schema.rate_limits)
  .filter((k) => k.endsWith("_per_minute"))
  .map((k) => `${k} = 0\n`)
  .join("")}`;

let rateLimitsOffFile: string | undefined;
function rateLimitsOffConfig(): string {
  if (rateLimitsOffFile) return rateLimitsOffFile;
  const dir = mkdtempSync(join(tmpdir(), "bunstr-bench-config-"));
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  writeFileSync((rateLimitsOffFile = join(dir, "bunstr.toml")), RATE_LIMITS_OFF);
  return rateLimitsOffFile;
}

export interface SpawnOptions {
  verify: boolean;
  /** How long to wait for the "listening on" line. */
  startTimeoutMs?: number;
  /**
   * Use this data directory (created if missing) instead of a new temp directory: a restart on
   * the same data. It is not removed when the start fails; removeDataDir() still removes it.
   */
  dataDir?: string;
  /** More flags for `bunstr serve`, e.g. ["--config", file] (that file should include RATE_LIMITS_OFF). */
  args?: string[];
  /**
   * A command the relay's command line is appended to, e.g. a shell that lowers `ulimit -n` first:
   * ["sh", "-c", 'ulimit -Sn 1024 && exec "$@"', "sh"]. The process we watch is then that command,
   * so it must exec the relay.
   */
  wrap?: string[];
  /** The relay's command instead of `bun src/main.ts`, e.g. ["dist/bunstr"] (the compiled binary). */
  command?: string[];
}

/** Keeps the last `max` characters of a stream, so a chatty child never fills a pipe or our memory. */
class Tail {
  text = "";
  /** Bytes (UTF-8) pushed since the start: what the relay wrote to this stream in all. */
  bytes = 0;
  constructor(private readonly max = 16_384) {}
  push(chunk: string): void {
    this.bytes += Buffer.byteLength(chunk);
    this.text = (this.text + chunk).slice(-this.max);
  }
}

export class RelayProcess {
  readonly stdout = new Tail();
  readonly stderr = new Tail();
  exitCode: number | null = null;

  /** The websocket URL the relay reported ("listening on …"). */
  url = "";

  private constructor(
    readonly proc: Subprocess<"ignore", "pipe", "pipe">,
    readonly dataDir: string,
    readonly args: string[],
  ) {}

  get pid(): number {
    return this.proc.pid;
  }

  get running(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  static async spawn(opts: SpawnOptions): Promise<RelayProcess> {
    let lastError: unknown;
    // A port found free can be taken before the relay binds it; try a few.
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        return await RelayProcess.spawnOnce(opts, await freePort());
      } catch (err) {
        lastError = err;
      }
    }
    throw lastError;
  }

  private static async spawnOnce(opts: SpawnOptions, port: number): Promise<RelayProcess> {
    const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), "bunstr-bench-"));
    const args = [
      ...(opts.command ?? [process.execPath, ...RELAY_BUN_FLAGS, RELAY_MAIN]),
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      "--data-dir",
      dataDir,
    ];
    if (!opts.verify) args.push("--no-verify");
    if (opts.args) args.push(...opts.args);
    if (!opts.args?.includes("--config")) args.push("--config", rateLimitsOffConfig());
    const proc = Bun.spawn([...(opts.wrap ?? RELAY_WRAP), ...args], {
      cwd: REPO_ROOT,
      env: { ...process.env, ...RELAY_ENV },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    const relay = new RelayProcess(proc, dataDir, args);
    trackForExit(relay, !opts.dataDir);
    const timeoutMs = opts.startTimeoutMs ?? 15_000;
    try {
      relay.url = await new Promise<string>((resolveUrl, reject) => {
        const timer = setTimeout(() => reject(new Error(`relay did not report listening within ${timeoutMs} ms`)), timeoutMs);
        pump(proc.stdout, (chunk) => {
          relay.stdout.push(chunk);
          const m = /listening on (ws:\/\/\S+)/.exec(relay.stdout.text);
          if (m) clearTimeout(timer), resolveUrl(m[1]!);
        });
        pump(proc.stderr, (chunk) => relay.stderr.push(chunk));
        void proc.exited.then((code) => {
          clearTimeout(timer);
          reject(new Error(`relay exited with ${code} before listening:\n${relay.stderr.text || relay.stdout.text}`));
        });
      });
      return relay;
    } catch (err) {
      proc.kill("SIGKILL");
      await proc.exited;
      if (!opts.dataDir) relay.removeDataDir();
      throw err;
    }
  }

  /** SIGTERM, then wait; SIGKILL after `timeoutMs`. Returns the exit code (null if it had to be killed). */
  async stop(timeoutMs = 15_000): Promise<number | null> {
    if (this.running) this.proc.kill("SIGTERM");
    const code = await Promise.race([this.proc.exited, Bun.sleep(timeoutMs).then(() => undefined)]);
    if (code === undefined) {
      this.proc.kill("SIGKILL");
      await this.proc.exited;
      return (this.exitCode = null);
    }
    return (this.exitCode = code);
  }

  /** Last resort (exit handlers, timeouts): kill without waiting. */
  kill(): void {
    if (this.running) this.proc.kill("SIGKILL");
  }

  /** Bytes in the data directory: all files, and the part in SQLite write-ahead logs (*-wal). */
  dataBytes(): { total: number; wal: number } {
    let total = 0;
    let wal = 0;
    for (const f of readdirSync(this.dataDir)) {
      const size = statSync(join(this.dataDir, f)).size;
      total += size;
      if (f.endsWith("-wal")) wal += size;
    }
    return { total, wal };
  }

  removeDataDir(): void {
    rmSync(this.dataDir, { recursive: true, force: true });
  }
}

// Relays still running when this process exits (a crash, an uncaught error, process.exit) are
// killed, so a failed run never leaves a relay behind.
// (Temp data directories we created for them go too; a directory the caller gave is left alone.)
const live = new Map<RelayProcess, boolean>();
let exitHookInstalled = false;
function trackForExit(relay: RelayProcess, ownsDataDir: boolean): void {
  live.set(relay, ownsDataDir);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const [r, owns] of live) {
      r.kill();
      if (owns) r.removeDataDir();
    }
  });
}

function pump(stream: ReadableStream<Uint8Array>, onChunk: (text: string) => void): void {
  const decoder = new TextDecoder();
  void (async () => {
    for await (const chunk of stream) onChunk(decoder.decode(chunk, { stream: true }));
  })().catch(() => {});
}

export function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      srv.close(() => (port ? resolvePort(port) : reject(new Error("could not find a free port"))));
    });
  });
}

// ---- /proc sampling (Linux) ----

let ticks: number | undefined;
/** Clock ticks per second for /proc/<pid>/stat times: `getconf CLK_TCK`, else 100. */
export function clockTicks(): number {
  if (ticks !== undefined) return ticks;
  try {
    const out = Bun.spawnSync(["getconf", "CLK_TCK"], { stdout: "pipe", stderr: "ignore" });
    const n = Number(out.stdout.toString().trim());
    ticks = out.exitCode === 0 && Number.isInteger(n) && n > 0 ? n : 100;
  } catch {
    ticks = 100;
  }
  return ticks;
}

/** User + system CPU seconds of a process, all threads included (utime + stime of /proc/<pid>/stat). */
export function cpuSeconds(pid: number): number {
  return statCpu(readFileSync(`/proc/${pid}/stat`, "utf8")).cpu;
}

/** A /proc stat line (a process's or a thread's): its command name and its user + system CPU seconds. */
function statCpu(stat: string): { name: string; cpu: number } {
  // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
  const close = stat.lastIndexOf(")");
  const fields = stat.slice(close + 2).split(" ");
  // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
  return { name: stat.slice(stat.indexOf("(") + 1, close), cpu: (Number(fields[11]) + Number(fields[12])) / clockTicks() };
}

/**
 * CPU seconds of each live thread of a process, by thread id, with the thread's name (comm). The
 * main thread is named "main" here whatever its comm (its tid is the pid). Bun names its worker
 * threads "Worker" (readers, writer and verifiers alike), JSC its compiler threads "JITWorker" and
 * its GC helpers "HeapHelper"; a thread that exited is not listed.
 */
export function threadCpuSeconds(pid: number): Map<number, { name: string; cpu: number }> {
  const out = new Map<number, { name: string; cpu: number }>();
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const { name, cpu } = statCpu(readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8"));
      out.set(Number(tid), { name: Number(tid) === pid ? "main" : name, cpu });
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return out;
}

/** CPU seconds used between two threadCpuSeconds samples, summed by thread name, largest first. */
export function threadCpuDelta(
  before: Map<number, { name: string; cpu: number }>,
  after: Map<number, { name: string; cpu: number }>,
): [string, number][] {
  const byName = new Map<string, number>();
  for (const [tid, t] of after) byName.set(t.name, (byName.get(t.name) ?? 0) + t.cpu - (before.get(tid)?.cpu ?? 0));
  return [...byName].sort((a, b) => b[1] - a[1]);
}

/**
 * Resident memory now and at peak, in MiB (VmRSS, VmHWM of /proc/<pid>/status), and of VmRSS now:
 * `anon`, anonymous memory (RssAnon: heaps, stacks; what the process alone holds) and `file`, pages
 * backed by files or shared memory (RssFile + RssShmem: the binary, a memory-mapped database; cache
 * the kernel can drop, or shares with another process mapping the same file).
 */
export function memoryMiB(pid: number): { rss: number; peak: number; anon: number; file: number } {
  const kib = readResidentKib(pid);
  return { rss: kib.rss / 1024, peak: kib.peak / 1024, anon: kib.anon / 1024, file: kib.file / 1024 };
}

/** Peaks of a phase, MiB: of VmRSS, and of its anonymous and file-backed parts (see memoryMiB). */
export interface PeakMiB {
  rss: number;
  anon: number;
  file: number;
}

/**
 * Peak resident memory of a process over a phase: VmHWM after resetting it at the start (writing 5
 * to /proc/<pid>/clear_refs, allowed for our own processes), and VmRSS sampled every `everyMs` as a
 * floor (and the answer where the reset is not allowed). The kernel keeps no high-water mark of
 * RssAnon or RssFile, so their peaks are the largest sampled (each on its own: they need not peak
 * together). Works for any PID (--relay-pid).
 */
export class PeakRss {
  private readonly max: PeakMiB = { rss: 0, anon: 0, file: 0 };
  private readonly reset: boolean;
  private readonly timer: Timer;
  constructor(
    private readonly pid: number,
    everyMs = 50,
  ) {
    try {
      writeFileSync(`/proc/${pid}/clear_refs`, "5");
      this.reset = true;
    } catch {
      this.reset = false;
    }
    this.sample();
    this.timer = setInterval(() => this.sample(), everyMs);
  }

  private sample(): void {
    try {
      const m = memoryMiB(this.pid);
      this.max.rss = Math.max(this.max.rss, m.rss);
      this.max.anon = Math.max(this.max.anon, m.anon);
      this.max.file = Math.max(this.max.file, m.file);
    } catch {
      // the process is gone; keep what we saw
    }
  }

  /** Stops sampling; the peaks in MiB. */
  stop(): PeakMiB {
    clearInterval(this.timer);
    this.sample();
    if (!this.reset) return { ...this.max };
    try {
      return { ...this.max, rss: Math.max(this.max.rss, memoryMiB(this.pid).peak) };
    } catch {
      return { ...this.max };
    }
  }
}

/** Bytes of the files under a directory (recursively): their sizes, and the disk blocks they take. */
export function dirBytes(dir: string): { size: number; allocated: number } {
  let size = 0;
  let allocated = 0;
  for (const f of readdirSync(dir, { recursive: true, encoding: "utf8" })) {
    const st = statSync(join(dir, f));
    if (!st.isFile()) continue;
    size += st.size;
    allocated += st.blocks * 512;
  }
  return { size, allocated };
}

/** Open file descriptors of a process (entries of /proc/<pid>/fd). */
export function openFds(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/** RLIMIT_NOFILE of a process, from /proc/<pid>/limits ("self" for this one). */
export function fdLimit(pid: number | "self"): { soft: number; hard: number } {
  const line = /^Max open files\s+(\S+)\s+(\S+)/m.exec(readFileSync(`/proc/${pid}/limits`, "utf8"));
  const n = (s: string | undefined) => (s === undefined ? NaN : s === "unlimited" ? Infinity : Number(s));
  return { soft: n(line?.[1]), hard: n(line?.[2]) };
}
