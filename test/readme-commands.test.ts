// README.md's quick start as written (issue 34): its commands run from the checkout (`npx bunstr
// …`, `npm start`) and, when it has been built (`npm run build`; CI runs this file again after
// the build), from the binary (`./dist/bunstr …`). The commands are taken from the README's own
// text, so it cannot drift from what is tested; only the file name (bunstr.toml -> a temp file)
// is changed, and `--port P --data-dir DIR` appended to the relay's start (a free port, a temp
// database). Ctrl-C is sent as a terminal sends it: SIGINT to the whole foreground process group
// (npm, its shell and the relay), and the status checked is the one the shell would see.
import { afterAll, describe, expect, test } from "bun:test";
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, readSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { collectOutput, freePort } from "./process-helpers.ts";

const root = resolve(import.meta.dir, "..");
const readme = readFileSync(join(root, "README.md"), "utf8");
const quickStart = readme.slice(readme.indexOf("## Quick start\n"), readme.indexOf("\n## ", readme.indexOf("## Quick start\n") + 1));
/** The quick start's block of `bunstr` commands: config init, config check, the relay with the file. */
const commands = [...quickStart.matchAll(/^```sh\n([\s\S]*?)^```$/gm)]
  .map((m) => m[1]!)
  .find((b) => b.includes("config init"))!
  .split("\n")
  .map((l) => l.replace(/\s+#.*$/, "").trim())
  .filter(Boolean);
/** npm without its update check (nothing leaves this machine). */
const env = { ...process.env, npm_config_update_notifier: "false" };
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "bunstr-readme-"));
  dirs.push(d);
  return d;
}

/** One command line through bash in the checkout, as a user types it. */
function sh(line: string): { exitCode: number; stdout: string; stderr: string } {
  const r = Bun.spawnSync(["bash", "-c", line], { cwd: root, env, stdout: "pipe", stderr: "pipe" });
  return { exitCode: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

interface Stopped {
  status: number;
  signal: NodeJS.Signals | number | null;
  output: () => string;
  relayPid: number;
}

/**
 * Starts `line` as a terminal's foreground job (its own process group), waits for the relay's
 * start line, then stops it: by default Ctrl-C, SIGINT to the whole group. The status is what the
 * shell sees (128 + 2 when the job died of SIGINT).
 */
async function stopJob(line: string, stop = (job: number, _relay: number) => process.kill(-job, "SIGINT")): Promise<Stopped> {
  const proc = Bun.spawn(["bash", "-c", line], { cwd: root, env, stdin: "ignore", stdout: "pipe", stderr: "pipe", detached: true });
  const output = collectOutput(proc);
  for (const deadline = Date.now() + 30_000; !/listening on .*pid (\d+)\)/.test(output()); await Bun.sleep(20))
    if (proc.exitCode !== null || Date.now() > deadline) throw new Error(`${line}: no start line:\n${output()}`);
  const relayPid = Number(/listening on .*pid (\d+)\)/.exec(output())![1]);
  stop(proc.pid, relayPid);
  const status = await proc.exited;
  return { status, signal: proc.signalCode, output, relayPid };
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** The quick start's three commands with `bunstr` run as `cli` ("npx bunstr" or the binary) and the relay started by `start`. */
function quickStartSuite(name: string, cli: string, relayStart: (line: string) => string): void {
  describe(name, () => {
    const dir = tempDir();
    const file = join(dir, "bunstr.toml");
    const line = (i: number) => commands[i]!.replace("npx bunstr", cli).replaceAll("bunstr.toml", file);

    test("the README's block is config init, config check, then the relay with that file", () => {
      expect(commands).toEqual([
        "npx bunstr config init > bunstr.toml",
        "npx bunstr config check bunstr.toml",
        "npm start -- --config bunstr.toml",
      ]);
    });

    test("config init > FILE writes the commented config and nothing else; config check FILE says ok", () => {
      const init = sh(line(0));
      expect(init.exitCode).toBe(0);
      const text = readFileSync(file, "utf8");
      expect(text).toStartWith("# bunstr configuration.");
      expect(text).not.toContain("> bunstr@"); // npm's banner
      const check = sh(line(1));
      expect(check.stderr).toBe("");
      expect(check.exitCode).toBe(0);
      expect(check.stdout.trim()).toBe(`${file}: ok`);
    });

    test("the relay with that file: Ctrl-C shuts it down cleanly and the shell sees 0", async () => {
      if (!existsSync(file)) expect(sh(line(0)).exitCode).toBe(0); // when run alone (-t)
      const start = `${relayStart(line(2))} --port ${freePort()} --data-dir ${join(dir, "data")}`;
      const run = await stopJob(start);
      expect(run.output()).toContain("SIGINT: shutting down");
      expect(run.output()).toContain("bye");
      expect({ status: run.status, signal: run.signal }).toEqual({ status: 0, signal: null });
      expect(alive(run.relayPid)).toBe(false); // the job ended with the relay, not before it
    });
  });
}

quickStartSuite("README quick start from the checkout (npx bunstr, npm start)", "npx bunstr", (l) => l);

describe("README: stopping the relay", () => {
  test("kill with the pid on its start line: the relay shuts down and npm start exits 0", async () => {
    expect(quickStart).toContain("Stop it with Ctrl-C (or `kill` the pid on its\nstart line)");
    const dir = tempDir();
    const run = await stopJob(`npm start -- --port ${freePort()} --data-dir ${join(dir, "data")}`, (_job, relay) =>
      process.kill(relay, "SIGTERM"),
    );
    expect({ status: run.status, signal: run.signal }).toEqual({ status: 0, signal: null });
    expect(run.output()).toContain("SIGTERM: shutting down");
  });

  test("Ctrl-C ends npx at once with 130 while the relay finishes its shutdown behind it, as the README warns", async () => {
    expect(quickStart).toContain("on Ctrl-C npx exits at once with\nstatus 130");
    const dir = tempDir();
    const run = await stopJob(`npx bunstr --port ${freePort()} --data-dir ${join(dir, "data")}`);
    expect({ status: run.status, signal: run.signal }).toEqual({ status: 130, signal: "SIGINT" });
    for (const deadline = Date.now() + 15_000; alive(run.relayPid) && Date.now() < deadline; ) await Bun.sleep(20);
    expect(alive(run.relayPid)).toBe(false);
    for (const deadline = Date.now() + 5000; !run.output().includes("bye") && Date.now() < deadline; ) await Bun.sleep(20);
    expect(run.output()).toContain("bye");
  });

  test("npm start -- config init > FILE would carry npm's banner (why the README says npx)", () => {
    const file = join(tempDir(), "banner.toml");
    expect(sh(`npm start -- config init > ${file}`).exitCode).toBe(0);
    expect(readFileSync(file, "utf8")).toContain("> bunstr@");
  });
});

/** The program interpreter (PT_INTERP) a 64-bit little-endian ELF file asks for: which C library's loader runs it. */
function elfInterpreter(path: string): string | undefined {
  const head = Buffer.alloc(64 * 1024);
  const fd = openSync(path, "r");
  try {
    readSync(fd, head, 0, head.length, 0);
  } finally {
    closeSync(fd);
  }
  if (head.readUInt32BE(0) !== 0x7f454c46 || head[4] !== 2 || head[5] !== 1)
    throw new Error(`${path} is not a 64-bit little-endian ELF file`);
  const [phoff, phentsize, phnum] = [Number(head.readBigUInt64LE(0x20)), head.readUInt16LE(0x36), head.readUInt16LE(0x38)];
  for (let i = 0; i < phnum; i++) {
    const ph = phoff + i * phentsize;
    if (head.readUInt32LE(ph) !== 3) continue; // PT_INTERP
    const [offset, size] = [Number(head.readBigUInt64LE(ph + 8)), Number(head.readBigUInt64LE(ph + 32))];
    return head.toString("latin1", offset, offset + size - 1);
  }
  return undefined;
}

// The binary: built by `npm run build` (CI builds it after the suite and runs this file again).
// Without it the suite is not declared at all (not skipped: .ci/run fails on skips).
const binary = process.env.BUNSTR_BINARY ? resolve(process.env.BUNSTR_BINARY) : join(root, "dist/bunstr");
if (existsSync(binary)) {
  quickStartSuite(`README quick start with the binary (${binary})`, binary, (l) => l.replace(/^npm start --/, binary));
  test.if(process.platform === "linux")("the binary needs glibc, as the README says: its loader is glibc's, not musl's", () => {
    const loader = elfInterpreter(binary);
    expect(loader).toMatch(/^\/lib(64)?\/ld-linux-(x86-64|aarch64)\.so\.[12]$/); // glibc's dynamic loader
    expect(readme).toContain("`dist/bunstr` needs nothing else installed on a Linux with glibc");
    expect(readme).toContain("loaded by `/lib64/ld-linux-x86-64.so.2`");
    if (process.arch === "x64") expect(loader).toBe("/lib64/ld-linux-x86-64.so.2");
  });
} else console.log(`readme-commands: ${binary} is not built; the binary's half runs after \`npm run build\``);
