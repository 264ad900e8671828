// docs/operations.md, Logs: its journald + jq lines, run as written on a journal as an operator
// has it (issue 34). `journalctl -u bunstr -o cat` gives systemd's own lines about the unit, the
// relay's lines from before the switch to `--log-format json` (text, the default) and then its
// JSON lines; the doc's jq must read past the ones that are not JSON. Only `journalctl …` is
// replaced, by `cat` of such a journal made of real runs (no systemd here).
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { needInCI } from "./ci.ts";
import { freePort } from "./process-helpers.ts";
import { signalAndWait, spawnBunstr } from "./relay-process.ts";

const root = resolve(import.meta.dir, "..");
const doc = readFileSync(join(root, "docs/operations.md"), "utf8");
const logs = doc.slice(doc.indexOf("\n## Logs\n"), doc.indexOf("\n## ", doc.indexOf("\n## Logs\n") + 1));
const jq = Bun.which("jq");
const haveJq = needInCI("logs-doc: jq", jq ? undefined : "jq is not installed (apt-get install jq)");
const dir = mkdtempSync(join(tmpdir(), "bunstr-logs-doc-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** One run of the relay with `flags`, stopped by SIGTERM; its output lines (stdout and stderr, as journald keeps both). */
async function run(flags: string[]): Promise<string[]> {
  const relay = await spawnBunstr(["--port", String(freePort()), "--data-dir", join(dir, "data"), ...flags], dir);
  // Not a latency check: beside a CI run at load 14-18 a plain stop took longer than the default 10 s.
  await signalAndWait(relay, "SIGTERM", "bye", 40_000);
  await relay.proc.exited;
  return relay.output().trim().split("\n");
}

test.skipIf(!haveJq)(
  "the journald + jq lines of Logs work on a journal with text lines before the JSON ones",
  async () => {
    const block = [...logs.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!).find((b) => b.includes("journalctl"));
    if (!block) throw new Error("docs/operations.md, Logs, has no ```sh block with journalctl: update this test");
    const lines = block.trim().split("\n");
    expect(lines.length).toBe(2);
    // A config with a warning at start (the header without the proxies it is believed from).
    const config = join(dir, "bunstr.toml");
    writeFileSync(config, '[network]\nremote_ip_header = "x-forwarded-for"\n');
    const text = await run(["--config", config]);
    const json = await run(["--config", config, "--log-format", "json"]);
    expect(text.some((l) => l.startsWith("warning: "))).toBe(true);
    const journal = join(dir, "journal.txt");
    writeFileSync(
      journal,
      ["Starting bunstr.service - bunstr Nostr relay...", "Started bunstr.service - bunstr Nostr relay.", ...text, ...json].join("\n") +
        "\n",
    );
    const sh = (line: string) => {
      const cmd = line.replace(/^journalctl -u bunstr -o cat( -f)? \|/, `cat ${journal} |`);
      expect(cmd).not.toContain("journalctl");
      const r = Bun.spawnSync(["bash", "-c", cmd], { stdout: "pipe", stderr: "pipe" });
      return { exitCode: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
    };

    // The warnings and errors, as JSON objects: those of the JSON run.
    const problems = sh(lines[0]!);
    expect(problems.stderr).toBe("");
    expect(problems.exitCode).toBe(0);
    const selected = problems.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    const warnings = json.map((l) => JSON.parse(l)).filter((o) => o.level === "warn" || o.level === "error");
    expect(warnings.length).toBeGreaterThan(0);
    expect(selected).toEqual(warnings);

    // Every JSON line as "time level msg", the text lines passed over.
    const readable = sh(lines[1]!);
    expect(readable.stderr).toBe("");
    expect(readable.exitCode).toBe(0);
    const out = readable.stdout.trim().split("\n");
    expect(out.length).toBe(json.length);
    expect(out.some((l) => /^\d{4}-\d\d-\d\dT[\d:.]+Z info bunstr .* listening on /.test(l))).toBe(true);
    expect(out.at(-1)).toMatch(/ info bye$/);

    // Why the doc says -R and fromjson?: plain jq stops at the first line that is not JSON.
    const plain = Bun.spawnSync(["bash", "-c", `cat ${journal} | jq -c 'select(.level == "warn")'`], { stderr: "pipe" });
    expect(plain.exitCode).not.toBe(0);
    expect(plain.stderr.toString()).toContain("parse error");
  },
  120_000,
);
