// Running bunstr as a real process (from source or the compiled binary) for process-level tests.
import type { Subprocess } from "bun";
import { appendFileSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { RATE_LIMITS_OFF } from "../bench/lib/relay.ts";

/**
 * The arguments with rate limits off: appended to the test's own --config file (unless it sets
 * [rate_limits] itself), else a config file of just that in `cwd`.
 */
export function withRateLimitsOff(args: string[], cwd: string): string[] {
  const at = args.indexOf("--config");
  if (at >= 0) {
    const file = resolve(cwd, args[at + 1]!);
    if (!existsSync(file) || !readFileSync(file, "utf8").includes("[rate_limits]")) appendFileSync(file, `\n${RATE_LIMITS_OFF}`);
    return args;
  }
  const file = join(cwd, "rate-limits-off.toml");
  writeFileSync(file, RATE_LIMITS_OFF);
  return [...args, "--config", file];
}

export interface RelayProcess {
  proc: Subprocess<"ignore", "pipe", "pipe">;
  url: string;
  port: number;
  output(): string;
}

/** A free TCP port on 127.0.0.1 (bound once and released). */
export function freePort(): number {
  const s = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response() });
  const port = s.port!;
  s.stop(true);
  return port;
}

/** Starts `cmd` (e.g. [process.execPath, "src/main.ts"] or ["dist/bunstr"]) and waits for "listening". */
export async function spawnRelay(cmd: string[], args: string[], cwd: string): Promise<RelayProcess> {
  const port = freePort();
  const proc = Bun.spawn([...cmd, "--host", "127.0.0.1", "--port", String(port), ...withRateLimitsOff(args, cwd)], {
    cwd,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const output = collectOutput(proc);
  const deadline = Date.now() + 15000;
  while (!output().includes("listening on")) {
    if (proc.exitCode !== null || Date.now() > deadline) throw new Error(`relay did not start:\n${output()}`);
    await Bun.sleep(20);
  }
  return { proc, port, url: `ws://127.0.0.1:${port}/`, output };
}

/** Keeps everything a child prints (stdout and stderr, interleaved as it comes); returns a reader. */
export function collectOutput(proc: Subprocess<"ignore", "pipe", "pipe">): () => string {
  let out = "";
  const decoder = new TextDecoder();
  const pump = async (s: ReadableStream<Uint8Array>) => {
    for await (const chunk of s) out += decoder.decode(chunk);
  };
  void pump(proc.stdout);
  void pump(proc.stderr);
  return () => out;
}

/** A self-signed EC certificate for `host`, valid one day, written as cert.pem and key.pem in `dir` (a TLS proxy in front of a test relay). */
export function selfSignedCert(openssl: string, dir: string, host: string): { cert: string; key: string } {
  const [cert, key] = [join(dir, "cert.pem"), join(dir, "key.pem")];
  const gen = Bun.spawnSync(
    [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"].concat([
      "-subj",
      `/CN=${host}`,
      "-keyout",
      key,
      "-out",
      cert,
    ]),
    { stderr: "pipe" },
  );
  if (gen.exitCode !== 0) throw new Error(`openssl: ${gen.stderr}`);
  return { cert, key };
}

/**
 * `text` (a shipped file such as packaging/nginx.conf, adapted for a test) with each swap applied;
 * a swap that matches nothing means the shipped file changed.
 */
export function swap(file: string, text: string, swaps: [from: string | RegExp, to: string][]): string {
  for (const [from, to] of swaps) {
    const next = text.replace(from, to);
    if (next === text) throw new Error(`${file} no longer contains ${from}: update this test`);
    text = next;
  }
  return text;
}
