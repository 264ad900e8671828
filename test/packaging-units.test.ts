// packaging/bunstr@.service, the template unit of docs/operations.md's blue/green hand-over, kept
// equal to packaging/bunstr.service but for what a template needs; and the doc's blocks for it
// (issue 34). test/systemd-vm/run.sh runs those blocks under a real systemd; here they are checked
// for what a plain bash can show: they parse, they name the template and the units they should,
// and the hand-over function does the right calls in the right order with systemctl and journalctl
// stood in for (a new instance that listens; one whose journal only has an older process's line
// or the config warning that also says "listening on"; one that fails).
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";

const root = resolve(import.meta.dir, "..");
const read = (path: string) => readFileSync(join(root, path), "utf8");
const plain = read("packaging/bunstr.service");
const template = read("packaging/bunstr@.service");

/** A unit from its [Unit] line on: the header comment (how to install it) is each file's own. */
const body = (unit: string) => unit.slice(unit.indexOf("\n[Unit]\n") + 1);

describe("packaging/bunstr@.service", () => {
  test("is bunstr.service from [Unit] on, but for the instance name in Description", () => {
    const lines = body(template).split("\n");
    const want = body(plain).split("\n");
    expect(lines.length).toBe(want.length);
    const differ = lines.flatMap((line, i) => (line === want[i] ? [] : [[want[i], line]]));
    expect(differ).toEqual([["Description=bunstr Nostr relay", "Description=bunstr Nostr relay (%i)"]]);
  });

  test("its header says how it is installed and where its steps are", () => {
    const header = template.slice(0, template.indexOf("\n[Unit]\n"));
    expect(header.split("\n").every((l) => l.startsWith("#"))).toBe(true);
    expect(header).toContain("install -m 0644 packaging/bunstr@.service /etc/systemd/system/bunstr@.service");
    expect(header).toContain("docs/operations.md");
  });
});

const HEADING = "### With systemd: bunstr@blue and bunstr@green";
const ops = read("docs/operations.md");

/** The ```sh blocks of operations.md's blue/green section, in order. */
function handoverBlocks(): string[] {
  const start = ops.indexOf(`\n${HEADING}\n`);
  if (start < 0) throw new Error(`docs/operations.md has no "${HEADING}": update this test and test/systemd-vm/run.sh`);
  const rest = ops.slice(start + HEADING.length + 2);
  const end = rest.search(/^#{2,3} /m); // a level-2 or -3 heading (the blocks hold "# " comments)
  const text = end < 0 ? rest : rest.slice(0, end);
  return [...text.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
}

/** `text` as one bash word. */
const quote = (text: string) => `'${text.replaceAll("'", "'\\''")}'`;

const bash = (script: string) => {
  const r = Bun.spawnSync(["bash", "-c", script], { stdout: "pipe", stderr: "pipe" });
  return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
};

describe("docs/operations.md, With systemd: bunstr@blue and bunstr@green", () => {
  const blocks = handoverBlocks();
  const [define, once, upgrade] = blocks as [string, string, string];

  test("has the three blocks test/systemd-vm/run.sh runs, each valid bash", () => {
    expect(blocks.length).toBe(3);
    expect(read("test/systemd-vm/run.sh")).toContain(HEADING.slice(4));
    for (const b of blocks) expect(bash(`set -n\n${b}`).code).toBe(0);
    expect(define).toContain("bunstr_handover() {");
  });

  test("the switch installs the shipped template and hands over from bunstr to bunstr@blue", () => {
    expect(once).toContain("install -m 0644 packaging/bunstr@.service /etc/systemd/system/bunstr@.service");
    expect(once.trim().split("\n").at(-1)).toBe("bunstr_handover bunstr bunstr@blue");
  });

  test("the upgrade installs the binary as deploy.md's Upgrading does, then hands over to the idle instance", () => {
    const deploy = read("docs/deploy.md");
    for (const line of [
      "sha256sum -c --ignore-missing SHA256SUMS",
      "install -m 0755 bunstr-linux-x64 /usr/local/bin/bunstr.new",
      "mv /usr/local/bin/bunstr.new /usr/local/bin/bunstr",
    ]) {
      expect(deploy).toContain(`\n${line}\n`);
      expect(upgrade).toContain(`\n${line}\n`);
    }
    expect(upgrade).toContain("bunstr_handover bunstr@blue bunstr@green");
    expect(upgrade).toContain("bunstr_handover bunstr@green bunstr@blue");
  });

  /**
   * Runs `bunstr_handover OLD NEW` with systemctl, journalctl and sleep stood in for: NEW's
   * MainPID is 42 and its journal holds the lines `journal`; `failed` says whether systemd calls NEW failed.
   * Returns the systemctl calls, one a line (repeats as one), and the exit code.
   */
  function handover(journal: string[], failed: boolean) {
    const r = bash(`
calls=$(mktemp)
systemctl() {
  echo "$*" >> "$calls"
  case "$1" in
    show) echo 42 ;;
    is-active) return 1 ;;
    is-failed) ${failed ? "return 0" : "return 1"} ;;
  esac
}
journalctl() { printf '%s\\n' ${journal.map(quote).join(" ")}; }
sleep() { :; }
${define}
bunstr_handover bunstr@blue bunstr@green > /dev/null 2>&1
code=$?
uniq < "$calls"; rm -f "$calls"
echo "exit $code"`);
    return r.out;
  }

  test("a new instance that listens: the old one is drained, then the new one enabled and the old disabled", () => {
    const out = handover(
      [
        "bunstr 1.0 listening on ws://127.0.0.1:7447/ (database: /var/lib/bunstr/bunstr.sqlite, signatures: native libsecp256k1 (embedded), pid 42)",
      ],
      false,
    );
    expect(out).toBe(
      [
        "start bunstr@green",
        "show -p MainPID --value bunstr@green",
        "kill -s SIGUSR2 bunstr@blue",
        "is-active -q bunstr@blue",
        "enable bunstr@green",
        "disable bunstr@blue",
        "exit 0",
        "",
      ].join("\n"),
    );
  });

  test("only the line of the new process counts: an older run's, or the warning that says 'while listening on', does not", () => {
    const older = "bunstr 1.0 listening on ws://127.0.0.1:7447/ (database: x, signatures: y, pid 4242)";
    const warning =
      "warning: [rate_limits] exempt_private_addresses is off and [network] remote_ip_header is not set while listening on 0.0.0.0: …";
    const out = handover([older, warning], false);
    expect(out).not.toContain("SIGUSR2");
    expect(out).not.toContain("enable");
    expect(out).toContain("stop bunstr@green\nreset-failed bunstr@green\nexit 1\n");
  });

  test("a new instance that fails: it is stopped and reset, the old one is never signalled, nothing is enabled", () => {
    const out = handover(["error: /etc/bunstr/config.toml: line 3: invalid TOML"], true);
    expect(out).toBe(
      [
        "start bunstr@green",
        "show -p MainPID --value bunstr@green",
        "is-failed -q bunstr@green",
        "stop bunstr@green",
        "reset-failed bunstr@green",
        "exit 1",
        "",
      ].join("\n"),
    );
  });
});
