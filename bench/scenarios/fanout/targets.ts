// What the fanout run publishes to: bunstr as a child process, or the mock relay (mock-relay.ts).
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { RATE_LIMITS_OFF, RelayProcess } from "../../lib/relay.ts";
import type { Workload } from "./workload.ts";

const MOCK_RELAY = join(import.meta.dir, "mock-relay.ts");

export interface Target {
  pid: number;
  url: string;
  stop(): Promise<number | null>;
  kill(): void;
  stderr(): string;
  running(): boolean;
  cleanup(): void;
}

/** bunstr with a config that lets all our connections and subscriptions in (everything else default). */
export async function spawnRelay(opts: { verify: boolean; cpuProfDir?: string }, w: Workload): Promise<Target> {
  const cfgDir = mkdtempSync(join(tmpdir(), "bunstr-fanout-cfg-"));
  process.on("exit", () => rmSync(cfgDir, { recursive: true, force: true })); // also after a timeout
  const perConn = Math.max(...Array.from({ length: w.conns }, (_, c) => w.subs.filter((s) => s.conn === c).length));
  const cfg = join(cfgDir, "bunstr.toml");
  writeFileSync(
    cfg,
    `[limits]\nmax_connections_per_ip = ${w.conns + 100}\nmax_subscriptions = ${Math.max(50, perConn)}\n${RATE_LIMITS_OFF}`,
  );
  let relay: RelayProcess;
  try {
    // --cpu-prof goes between bun and the relay's entry point: a shell puts it there.
    const wrap = opts.cpuProfDir
      ? ["sh", "-c", 'd="$1"; b="$2"; shift 2; exec "$b" --cpu-prof --cpu-prof-dir="$d" "$@"', "sh", resolve(opts.cpuProfDir)]
      : undefined;
    relay = await RelayProcess.spawn({ verify: opts.verify, args: ["--config", cfg], wrap });
  } catch (err) {
    rmSync(cfgDir, { recursive: true, force: true });
    throw err;
  }
  return {
    pid: relay.pid,
    url: relay.url,
    stop: () => relay.stop(),
    kill: () => relay.kill(),
    stderr: () => relay.stderr.text,
    running: () => relay.running,
    cleanup: () => {
      relay.removeDataDir();
      rmSync(cfgDir, { recursive: true, force: true });
    },
  };
}

/**
 * A relay someone else started (e.g. strfry), measured through its PID. Not ours to stop: stop()
 * reports 0 while it still runs. It must start empty for each scenario (events published twice get
 * `OK true "duplicate: …"`, which the publisher counts as a failure).
 */
export function externalRelay(url: string, pid: number): Target {
  const running = () => existsSync(`/proc/${pid}/stat`);
  return {
    pid,
    url,
    stop: async () => (running() ? 0 : null),
    kill: () => {},
    stderr: () => "",
    running,
    cleanup: () => {},
  };
}

/** The mock relay (mock-relay.ts) as a child process. */
export async function spawnMock(): Promise<Target> {
  const proc = Bun.spawn([process.execPath, MOCK_RELAY], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  let stderr = "";
  void (async () => {
    for await (const c of proc.stderr) stderr = (stderr + new TextDecoder().decode(c)).slice(-8000);
  })().catch(() => {});
  const reader = proc.stdout.getReader();
  let out = "";
  const deadline = Date.now() + 15_000;
  while (!/listening on (\S+)/.test(out)) {
    const r = await Promise.race([reader.read(), Bun.sleep(Math.max(1, deadline - Date.now())).then(() => undefined)]);
    if (!r || r.done) {
      proc.kill("SIGKILL");
      throw new Error(`mock relay did not start: ${stderr}`);
    }
    out += new TextDecoder().decode(r.value);
  }
  reader.releaseLock();
  process.on("exit", () => proc.kill("SIGKILL"));
  const running = () => proc.exitCode === null && proc.signalCode === null;
  return {
    pid: proc.pid,
    url: /listening on (\S+)/.exec(out)![1]!,
    async stop() {
      if (running()) proc.kill("SIGTERM");
      const code = await Promise.race([proc.exited, Bun.sleep(5000).then(() => undefined)]);
      if (code === undefined) proc.kill("SIGKILL");
      return code ?? null;
    },
    kill: () => running() && proc.kill("SIGKILL"),
    stderr: () => stderr,
    running,
    cleanup: () => {},
  };
}
