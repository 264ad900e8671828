// The relay under packaging/bunstr.service's RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6:
// no netlink socket, which glibc's getifaddrs (os.networkInterfaces) needs. Before issue 34's
// fix every start under the shipped unit exited 1 at the start-up line ("A system error
// occurred: getifaddrs returned an error"), found by test/systemd-vm. firejail's --protocol
// installs the same seccomp filter on socket(2) without systemd.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { networkInterfaces, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { RawWs } from "../bench/lib/rawws.ts";
import { needInCI } from "./ci.ts";
import { freePort } from "./process-helpers.ts";

const root = resolve(import.meta.dir, "..");
const firejail = Bun.which("firejail");
const haveFirejail = needInCI("sandboxed-start: firejail", firejail ? undefined : "firejail is not installed (apt-get install firejail)");
const dir = mkdtempSync(join(tmpdir(), "bunstr-sandboxed-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The families the unit allows, read from it, as firejail's --protocol list. */
function unitFamilies(): string {
  const unit = readFileSync(join(root, "packaging/bunstr.service"), "utf8");
  const line = /^RestrictAddressFamilies=(.*)$/m.exec(unit);
  if (!line) throw new Error("packaging/bunstr.service has no RestrictAddressFamilies: update this test");
  return line[1]!
    .trim()
    .split(/\s+/)
    .map((f) => f.replace(/^AF_/, "").toLowerCase())
    .join(",");
}

/** The relay under that filter with `flags`; resolves with its output once it listens (or exits). */
async function startSandboxed(flags: string[]): Promise<{ proc: Bun.Subprocess; output: () => string }> {
  const proc = Bun.spawn(
    [firejail!, "--quiet", "--noprofile", `--protocol=${unitFamilies()}`, process.execPath, join(root, "src/main.ts"), ...flags],
    { cwd: dir, stdout: "pipe", stderr: "pipe" },
  );
  let out = "";
  for (const s of [proc.stdout, proc.stderr])
    void (async () => {
      for await (const c of s) out += new TextDecoder().decode(c);
    })();
  const deadline = Date.now() + 30_000;
  while (!out.includes("listening on ws:") && proc.exitCode === null && Date.now() < deadline) await Bun.sleep(20);
  return { proc, output: () => out };
}

test.skipIf(!haveFirejail)(
  "without netlink (the systemd unit's address families) the relay starts, says where it listens and serves",
  async () => {
    expect(unitFamilies().split(",").sort()).toEqual(["inet", "inet6", "unix"]);
    const port = freePort();
    const relay = await startSandboxed(["--port", String(port), "--data-dir", join(dir, "data")]);
    try {
      expect(relay.output()).not.toContain("getifaddrs");
      expect(relay.proc.exitCode).toBeNull();
      expect(relay.output()).toContain(`listening on ws://127.0.0.1:${port}/`);
      const ws = await RawWs.connect(port, "127.0.0.1");
      ws.send(["REQ", "r", { limit: 1 }]);
      expect(await ws.next((f) => f[0] === "EOSE", 10_000)).toEqual(["EOSE", "r"]);
      ws.close();
    } finally {
      relay.proc.kill("SIGTERM");
      await relay.proc.exited;
    }
  },
  60_000,
);

test.skipIf(!haveFirejail)(
  "a host given as one of this machine's addresses is accepted there too",
  async () => {
    const mine = Object.values(networkInterfaces())
      .flatMap((l) => l ?? [])
      .find((i) => i.family === "IPv4" && !i.internal)?.address;
    // A machine with loopback only has no such address to give; the first test covers the start.
    const host = mine ?? "127.0.0.1";
    const port = freePort();
    const relay = await startSandboxed(["--host", host, "--port", String(port), "--data-dir", join(dir, "data2")]);
    try {
      expect(relay.output()).not.toContain("getifaddrs");
      expect(relay.proc.exitCode).toBeNull();
      expect(relay.output()).toContain(`listening on ws://${host}:${port}/`);
    } finally {
      relay.proc.kill("SIGTERM");
      await relay.proc.exited;
    }
  },
  60_000,
);
