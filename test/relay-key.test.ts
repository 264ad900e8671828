// The relay's own key (NIP-11 `self`, the signer of NIP-29 group metadata), as a real process:
// created once in the data directory (mode 0600, said where), kept across restarts, refused when
// others may read it or when [info] self names another pubkey, taken from the config when given
// there, copied by `bunstr backup`. NIP-11 advertises it, and NIP-29 only while groups are on.
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getPublicKey, verifyEvent } from "nostr-tools/pure";
import { hasValidId } from "../src/protocol/event.ts";
import { pubkeyOf, relayKeyFromHex, signEvent, verifySchnorr } from "../src/protocol/schnorr.ts";
import { backupKeyFile, readOrCreateKeyFile } from "../src/cli/relay-key.ts";
import { freePort } from "./process-helpers.ts";
import { signalAndWait, spawnBunstr, SOURCE, type Bunstr } from "./relay-process.ts";
import { startTestRelay, testConfig } from "./helpers.ts";

const root = mkdtempSync(join(tmpdir(), "bunstr-relay-key-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const keyOf = (file: string) => pubkeyOf(Buffer.from(readFileSync(file, "utf8").trim(), "hex"));
const mode = (file: string) => statSync(file).mode & 0o777;

/** A relay serving `dataDir` on a free port (`extra`: more flags); stopped by the caller. */
async function serve(dataDir: string, extra: string[] = []): Promise<{ relay: Bunstr; http: string }> {
  const port = freePort();
  const relay = await spawnBunstr(["--host", "127.0.0.1", "--port", String(port), "--data-dir", dataDir, ...extra], root);
  return { relay, http: `http://127.0.0.1:${port}/` };
}

async function stop(relay: Bunstr): Promise<void> {
  relay.proc.kill("SIGTERM");
  await relay.proc.exited;
}

const info = async (http: string) =>
  (await (await fetch(http, { headers: { Accept: "application/nostr+json" } })).json()) as Record<string, any>;

/** A start that must fail: its exit code and everything it printed. */
async function failingStart(dataDir: string, extra: string[] = []): Promise<{ code: number | null; out: string }> {
  const proc = Bun.spawn([...SOURCE, "--host", "127.0.0.1", "--port", String(freePort()), "--data-dir", dataDir, ...extra], {
    cwd: root,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const timer = setTimeout(() => proc.kill("SIGKILL"), 20_000);
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  return { code: proc.signalCode ? null : code, out: out + err };
}

describe("the relay key file", () => {
  const data = join(root, "data");
  const file = join(data, "relay.key");

  test("first start creates it (0600) and says where; NIP-11 self is its pubkey; a restart keeps it silently", async () => {
    const first = await serve(data);
    let pubkey: string;
    try {
      pubkey = keyOf(file);
      expect(first.relay.output()).toContain(`relay key created: ${file} (pubkey ${pubkey}); it is in backups`);
      expect(mode(file)).toBe(0o600);
      expect(readFileSync(file, "utf8")).toMatch(/^[0-9a-f]{64}\n$/);
      const doc = await info(first.http);
      expect(doc.self).toBe(pubkey);
      // Groups are off: the key is not offered as the operator's pubkey, nor NIP-29.
      expect(doc.pubkey).toBeUndefined();
      expect(doc.supported_nips).not.toContain(29);
    } finally {
      await stop(first.relay);
    }
    const second = await serve(data);
    try {
      expect(second.relay.output()).not.toContain("relay key created");
      expect((await info(second.http)).self).toBe(pubkey);
      expect(keyOf(file)).toBe(pubkey);
    } finally {
      await stop(second.relay);
    }
  }, 60_000);

  test("a key file others may read: exit 1 with one line saying what to run", async () => {
    const dir = join(root, "loose");
    mkdirSync(dir);
    const loose = join(dir, "relay.key");
    writeFileSync(loose, `${"1".repeat(64)}\n`);
    chmodSync(loose, 0o644);
    const r = await failingStart(dir);
    expect(r.code).toBe(1);
    expect(r.out.trimEnd().split("\n")).toEqual([
      `error: relay key file ${loose} is readable by others (mode 0644): run chmod 600 ${loose}`,
    ]);
  }, 30_000);

  test("a key file that is not 64 hex: exit 1, one line", async () => {
    const dir = join(root, "bad");
    mkdirSync(dir);
    const bad = join(dir, "relay.key");
    writeFileSync(bad, "not a key\n", { mode: 0o600 });
    const r = await failingStart(dir);
    expect(r.code).toBe(1);
    expect(r.out.trimEnd().split("\n")).toEqual([`error: relay key file ${bad} must hold 64 hex characters`]);
  }, 30_000);

  test("[info] self naming another pubkey: exit 1, one line naming both", async () => {
    const dir = join(root, "self");
    const other = "c".repeat(64);
    const config = join(root, "self.toml");
    writeFileSync(config, `[info]\nself = "${other}"\n`);
    const r = await failingStart(dir, ["--config", config]);
    const key = join(dir, "relay.key");
    expect(r.code).toBe(1);
    expect(r.out).toContain(`error: [info] self ${other} is not the relay key's pubkey ${keyOf(key)} (${key}): remove it or fix it`);
  }, 30_000);
});

test("a reload that sets [info] self to another pubkey is refused; the running config stays", async () => {
  const dir = join(root, "reload");
  const config = join(root, "reload.toml");
  writeFileSync(config, `[info]\nname = "before"\n`);
  const { relay, http } = await serve(dir, ["--config", config]);
  try {
    // Answered from the event loop, so after serve has set its signal handlers.
    expect((await info(http)).name).toBe("before");
    const other = "d".repeat(64);
    writeFileSync(config, `[info]\nname = "after"\nself = "${other}"\n`);
    const line = await signalAndWait(relay, "SIGHUP", /config reload failed[^\n]*/);
    expect(line).toContain(`[info] self ${other} is not the relay key's pubkey ${keyOf(join(dir, "relay.key"))}`);
    const doc = await info(http);
    expect(doc.name).toBe("before");
    expect(doc.self).toBe(keyOf(join(dir, "relay.key")));
  } finally {
    await stop(relay);
  }
}, 30_000);

describe("a key given in the config", () => {
  test("relay_secret_key: NIP-11 self is its pubkey, no file is made; with groups on it is also pubkey and 29 is listed", async () => {
    const dir = join(root, "configured");
    const secret = "5".repeat(64);
    const config = join(root, "configured.toml");
    writeFileSync(config, `[info]\nrelay_secret_key = "${secret}"\n[groups]\nenabled = true\ncreators = "anyone"\n`);
    const { relay, http } = await serve(dir, ["--config", config]);
    try {
      const doc = await info(http);
      const pubkey = pubkeyOf(Buffer.from(secret, "hex"));
      expect(doc.self).toBe(pubkey);
      expect(doc.pubkey).toBe(pubkey);
      expect(doc.supported_nips).toContain(29);
      expect(relay.output()).not.toContain("relay key created");
      expect(() => statSync(join(dir, "relay.key"))).toThrow();
    } finally {
      await stop(relay);
    }
  }, 30_000);

  test("relay_key_file elsewhere: created there", async () => {
    const dir = join(root, "elsewhere");
    const keyFile = join(root, "keys", "mine.key");
    const config = join(root, "elsewhere.toml");
    writeFileSync(config, `[info]\nrelay_key_file = "${keyFile}"\n`);
    const { relay, http } = await serve(dir, ["--config", config]);
    try {
      expect(relay.output()).toContain(`relay key created: ${keyFile}`);
      expect((await info(http)).self).toBe(keyOf(keyFile));
      expect(mode(keyFile)).toBe(0o600);
    } finally {
      await stop(relay);
    }
  }, 30_000);
});

test("bunstr backup writes <dest>.key (0600) holding the relay key", async () => {
  const dir = join(root, "backed");
  const { relay } = await serve(dir);
  await stop(relay);
  const dest = join(root, "out.sqlite");
  const proc = Bun.spawn([...SOURCE, "backup", dest, "--data-dir", dir], { cwd: root, stdout: "pipe", stderr: "pipe" });
  const [out, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
  expect(code).toBe(0);
  expect(out).toContain(`copied to ${dest}.key`);
  expect(mode(`${dest}.key`)).toBe(0o600);
  expect(readFileSync(`${dest}.key`, "utf8")).toBe(readFileSync(join(dir, "relay.key"), "utf8"));
}, 30_000);

test("a key file that is not a regular file, or is another user's, is refused; backup does not follow a symlink at <dest>.key", () => {
  const dir = join(root, "odd");
  mkdirSync(dir);
  const fifo = join(dir, "fifo.key");
  expect(Bun.spawnSync(["mkfifo", "-m", "600", fifo]).exitCode).toBe(0);
  expect(() => readOrCreateKeyFile(fifo, () => {})).toThrow(`relay key file ${fifo} is not a regular file`);
  const theirs = join(dir, "theirs.key");
  writeFileSync(theirs, `${"1".repeat(64)}\n`, { mode: 0o600 });
  const me = process.getuid!();
  try {
    chownSync(theirs, me + 4242, -1); // as root: a file of another uid (others may not give a file away)
  } catch {}
  if (statSync(theirs).uid !== me)
    expect(() => readOrCreateKeyFile(theirs, () => {})).toThrow(
      `relay key file ${theirs} is owned by uid ${me + 4242}, not by the user running bunstr (uid ${me})`,
    );

  const own = join(dir, "own.key");
  const key = readOrCreateKeyFile(own, () => {});
  const config = testConfig({ info: { relay_key_file: own } });
  const elsewhere = join(dir, "elsewhere");
  writeFileSync(elsewhere, "untouched\n");
  const dest = join(dir, "backup.sqlite");
  symlinkSync(elsewhere, `${dest}.key`);
  expect(() => backupKeyFile(config, dest)).toThrow(`${dest}.key is a symbolic link: not followed for the relay key`);
  expect(readFileSync(elsewhere, "utf8")).toBe("untouched\n");
  rmSync(`${dest}.key`);
  expect(backupKeyFile(config, dest)).toBe(`${dest}.key`);
  expect(keyOf(`${dest}.key`)).toBe(key.pubkey);
});

test("processes creating the key file at once all end up with the one key written", async () => {
  const file = join(root, "race", "relay.key");
  const script = `import { readOrCreateKeyFile } from ${JSON.stringify(join(import.meta.dir, "..", "src", "cli", "relay-key.ts"))};
console.log(readOrCreateKeyFile(${JSON.stringify(file)}, () => {}).pubkey);`;
  const runs = Array.from({ length: 4 }, () => Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", stderr: "pipe" }));
  const pubkeys = await Promise.all(runs.map(async (p) => (await new Response(p.stdout).text()).trim()));
  expect(new Set(pubkeys).size).toBe(1);
  expect(pubkeys[0]).toBe(keyOf(file));
  // In process, the same file gives the same key again.
  expect(readOrCreateKeyFile(file, () => {}).pubkey).toBe(pubkeys[0]!);
}, 30_000);

test("signEvent: an event any client accepts (id and signature), signed by the key", () => {
  const key = relayKeyFromHex("3".repeat(64), "test");
  const e = signEvent(
    {
      kind: 39000,
      created_at: 1_700_000_000,
      tags: [
        ["d", "g"],
        ["name", "ü ✓"],
      ],
      content: "",
    },
    key,
  );
  expect(e.pubkey).toBe(key.pubkey);
  expect(e.pubkey).toBe(getPublicKey(key.secret));
  expect(hasValidId(e)).toBe(true);
  expect(verifySchnorr(e)).toBe(true);
  expect(verifyEvent({ ...e })).toBe(true);
  // The id is NIP-01's serialization, control characters verbatim (what bunstr checks first).
  const control = signEvent({ kind: 39000, created_at: 1_700_000_000, tags: [["name", "a\u0001b"]], content: "" }, key);
  expect(hasValidId(control)).toBe(true);
  expect(verifySchnorr(control)).toBe(true);
});

test("startTestRelay keeps its key across a restart on the same dir", async () => {
  const first = await startTestRelay();
  const pubkey = first.ctx.relayKey.pubkey;
  await first.close();
  const again = await startTestRelay({}, { dir: first.dir });
  try {
    expect(again.ctx.relayKey.pubkey).toBe(pubkey);
    expect(again.ctx.relayKey.where).toBe(join(first.dir, "relay.key"));
  } finally {
    await again.stop();
    rmSync(first.dir, { recursive: true, force: true });
  }
});
