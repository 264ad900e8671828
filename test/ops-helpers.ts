// Running the operator commands (export, import, backup, compact, stats) as real processes.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { NostrEvent } from "../src/protocol/event.ts";

export const BUNSTR = [process.execPath, join(import.meta.dir, "..", "src", "main.ts")];

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** `bunstr ...args`, stdin from a file (as `< FILE` gives it) or nothing. */
export async function bunstr(args: string[], opts: { stdinFile?: string; cwd?: string } = {}): Promise<Run> {
  const proc = Bun.spawn([...BUNSTR, ...args], {
    cwd: opts.cwd,
    stdin: opts.stdinFile ? Bun.file(opts.stdinFile) : "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

/** Writes events (or raw lines) as a JSON-lines file. */
export function writeLines(path: string, lines: (NostrEvent | string)[]): string {
  writeFileSync(path, lines.map((l) => (typeof l === "string" ? l : JSON.stringify(l))).join("\n") + "\n");
  return path;
}

/** `bunstr import --json` and its parsed summary. */
export async function importFile(args: string[], file: string): Promise<Record<string, any>> {
  const r = await bunstr(["import", "--json", ...args], { stdinFile: file });
  if (r.code !== 0) throw new Error(`import exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}
