// A bunstr process whose port comes from its arguments or config file (process-helpers.ts picks
// one itself), with its output kept and awaitable: for reload and restart tests.
import type { Subprocess } from "bun";
import { join } from "node:path";
import { collectOutput, withRateLimitsOff } from "./process-helpers.ts";

export const SOURCE = [process.execPath, join(import.meta.dir, "..", "src", "main.ts")];

export interface Bunstr {
  proc: Subprocess<"ignore", "pipe", "pipe">;
  output(): string;
  /** Resolves once the output (from `from` on) matches; rejects on timeout or exit. */
  waitFor(pattern: string | RegExp, timeoutMs?: number, from?: number): Promise<string>;
}

export async function spawnBunstr(args: string[], cwd: string, waitListening = true): Promise<Bunstr> {
  const proc = Bun.spawn([...SOURCE, ...withRateLimitsOff(args, cwd)], { cwd, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const output = collectOutput(proc);
  const relay: Bunstr = {
    proc,
    output,
    async waitFor(pattern, timeoutMs = 10_000, from = 0) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const out = output();
        const text = out.slice(from);
        const m = typeof pattern === "string" ? (text.includes(pattern) ? pattern : undefined) : pattern.exec(text)?.[0];
        if (m !== undefined) return m;
        // Killed by a signal, a process has no exit code, only a signal code: either ends the wait.
        if (proc.exitCode !== null || proc.signalCode !== null)
          throw new Error(`bunstr exited (${proc.exitCode ?? proc.signalCode}) before printing ${pattern}:\n${out}`);
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${pattern} in:\n${out}`);
        await Bun.sleep(10);
      }
    },
  };
  if (waitListening) await relay.waitFor("listening on", 15_000);
  return relay;
}

/** Sends a signal and waits for the output to show its effect (a new line matching `pattern`). */
export async function signalAndWait(relay: Bunstr, signal: NodeJS.Signals, pattern: string | RegExp, timeoutMs = 10_000): Promise<string> {
  const from = relay.output().length;
  relay.proc.kill(signal);
  return relay.waitFor(pattern, timeoutMs, from);
}
