// Config hot reload: SIGHUP (and watch_config) re-read the --config file; reloadable keys apply at
// once without dropping connections, the others are reported as "restart required", and a bad
// file is reported (file:line) while the running config stays.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { applyReload, diffConfig } from "../src/config/reload.ts";
import { defaults, schema, setOf } from "../src/config/schema.ts";
import { accepted, Client, failOnRelayErrors, refusedWith, relayInfo, signer, startTestRelay } from "./helpers.ts";
import { freePort } from "./process-helpers.ts";
import { signalAndWait, spawnBunstr, type Bunstr } from "./relay-process.ts";

const dir = mkdtempSync(join(tmpdir(), "bunstr-reload-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

type Sections = Record<string, Record<string, unknown>>;

/** A TOML file from sections of values (strings quoted, the rest as TOML writes them). */
function toml(sections: Sections): string {
  const lines: string[] = [];
  for (const [s, keys] of Object.entries(sections)) {
    lines.push(`[${s}]`);
    for (const [k, v] of Object.entries(keys))
      lines.push(`${k} = ${typeof v === "string" && !v.startsWith("RAW:") ? JSON.stringify(v) : String(v).replace(/^RAW:/, "")}`);
    lines.push("");
  }
  return lines.join("\n");
}

/** Replaces the file in one step (as editors and config managers do), so no reader sees half of it. */
function writeConfig(file: string, text: string): void {
  writeFileSync(`${file}.tmp`, text);
  renameSync(`${file}.tmp`, file);
}

describe("applyReload", () => {
  test("copies changed reloadable keys in place, keeps the others and lists them", () => {
    const live = defaults();
    const sections = live.limits;
    const next = defaults();
    next.info.name = "new";
    next.limits.max_subscriptions = 7;
    next.network.port = 9999;
    next.database.reader_workers = 5;
    const { applied, restartRequired } = applyReload(live, next);
    expect(applied.map((c) => c.key).sort()).toEqual(["info.name", "limits.max_subscriptions"]);
    expect(restartRequired.map((c) => c.key).sort()).toEqual(["database.reader_workers", "network.port"]);
    expect(live.info.name).toBe("new");
    expect(live.limits.max_subscriptions).toBe(7);
    expect(live.network.port).toBe(7447);
    expect(live.database.reader_workers).toBe(2);
    expect(live.limits).toBe(sections); // same objects: holders of config see the change
  });

  test("a changed list is a new array (sets compiled from the old one are rebuilt); an equal one is kept", () => {
    const live = defaults();
    const kinds = live.authorization.restricted_read_kinds;
    const denylist = live.authorization.kind_denylist;
    const before = setOf(denylist);
    const next = defaults();
    next.authorization.kind_denylist = [7];
    applyReload(live, next);
    expect(live.authorization.restricted_read_kinds).toBe(kinds);
    expect(live.authorization.kind_denylist).not.toBe(denylist);
    expect(setOf(live.authorization.kind_denylist)).not.toBe(before);
    expect(setOf(live.authorization.kind_denylist).has(7)).toBe(true);
    next.authorization.kind_denylist.push(8); // the live config does not share arrays with the file's
    expect(live.authorization.kind_denylist).toEqual([7]);
  });

  test("diffConfig compares lists by value and covers every key", () => {
    const a = defaults();
    expect(diffConfig(a, defaults())).toEqual([]);
    const keys = Object.values(schema).reduce((n, s) => n + Object.keys(s).length, 0);
    const b = defaults() as unknown as Sections;
    for (const [s, section] of Object.entries(b)) for (const k of Object.keys(section)) b[s]![k] = Symbol(k);
    expect(diffConfig(a, b as never).length).toBe(keys);
  });
});

describe("reload in a running relay (in process)", () => {
  failOnRelayErrors();
  test("policy lists, NIP-11 and Bun's frame limit follow applyReload + reconfigure", async () => {
    const relay = await startTestRelay({ limits: { max_message_bytes: 1024 } });
    try {
      const c = await Client.connect(relay.url);
      const s = signer();
      await accepted(c, s.sign({ kind: 7, content: "+" }));
      const next = structuredClone(relay.ctx.config);
      next.authorization.kind_denylist = [7];
      next.info.name = "reloaded";
      next.limits.max_message_bytes = 1024 * 1024;
      applyReload(relay.ctx.config, next);
      relay.reconfigure();
      await refusedWith(c, s.sign({ kind: 7, content: "-" }), "blocked:");
      expect((await relayInfo(relay.url)).name).toBe("reloaded");
      // 1.5 MiB: over the old hard limit (256 KiB, closed with 1009), under the new one (2 MiB): answered.
      await refusedWith(c, s.sign({ kind: 1, content: "x".repeat(1536 * 1024) }), "invalid: message is larger than 1048576 bytes");
      expect(c.closed).toBe(false);
      c.close();
    } finally {
      await relay.stop();
    }
  });
});

describe("reload over a real process", () => {
  const file = join(dir, "bunstr.toml");
  let port: number;
  let url: string;
  let relay: Bunstr;
  let base: Sections;

  beforeAll(async () => {
    port = freePort();
    url = `ws://127.0.0.1:${port}/`;
    base = {
      info: { name: "before", description: "first" },
      network: { host: "127.0.0.1", port: `RAW:${port}` },
      database: { data_directory: join(dir, "data") },
      options: { verify_workers: "RAW:1" },
      limits: { max_subscriptions: "RAW:5", max_message_bytes: "RAW:1024" },
    };
    writeConfig(file, toml(base));
    relay = await spawnBunstr(["--config", file], dir);
  });
  afterAll(async () => {
    relay.proc.kill("SIGTERM");
    await relay.proc.exited;
  });

  test("SIGHUP: NIP-11 and limits change at once; open connections and live subscriptions stay", async () => {
    const c = await Client.connect(url);
    const big = await Client.connect(url);
    await c.req("live", { kinds: [1] });
    expect((await relayInfo(url)).name).toBe("before");

    writeConfig(
      file,
      toml({
        ...base,
        info: { name: "after", description: "second" },
        limits: { max_subscriptions: "RAW:2", max_message_bytes: "RAW:1048576" },
      }),
    );
    const line = await signalAndWait(relay, "SIGHUP", /SIGHUP: config reloaded from .*\n/);
    expect(line).toContain(`info.name "before" -> "after"`);
    expect(line).toContain("limits.max_subscriptions 5 -> 2");
    expect(line).toContain("limits.max_message_bytes 1024 -> 1048576");
    expect(line).not.toContain("network.");

    const info = await relayInfo(url);
    expect(info.name).toBe("after");
    expect(info.description).toBe("second");
    expect(info.limitation.max_subscriptions).toBe(2);
    expect(info.limitation.max_message_length).toBe(1048576);

    // The connection opened before the reload is still there and its subscription still live.
    const s = signer();
    const publisher = await Client.connect(url);
    const e = s.sign({ kind: 1, content: "after reload" });
    await accepted(publisher, e);
    await c.next((f) => f[0] === "EVENT" && f[1] === "live" && f[2].id === e.id);
    // The new cap applies to new subscriptions: "live" + "a" = 2, "b" is one too many.
    expect((await c.req("a", { ids: [e.id] })).end[0]).toBe("EOSE");
    const refused = await c.req("b", { ids: [e.id] });
    expect(refused.end[0]).toBe("CLOSED");
    expect(refused.end[2]).toStartWith("rate-limited:");
    // 1.5 MiB: over Bun's frame limit before (256 KiB: closed with 1009), under it now (2 MiB):
    // answered, on a connection opened before the reload.
    const large = s.sign({ kind: 1, content: "x".repeat(1536 * 1024) });
    await refusedWith(big, large, "invalid: message is larger than 1048576 bytes");
    expect(big.closed).toBe(false);
    expect(c.closed).toBe(false);
    for (const x of [c, big, publisher]) x.close();
  });

  test("a changed port (not reloadable) is reported as restart required and kept", async () => {
    const other = freePort();
    writeConfig(file, toml({ ...base, info: { name: "moved?" }, network: { host: "127.0.0.1", port: `RAW:${other}` } }));
    const from = relay.output().length;
    relay.proc.kill("SIGHUP");
    const line = await relay.waitFor(/SIGHUP: restart required: .*\n/, 10_000, from);
    expect(line).toContain("restart required: network.port");
    expect(relay.output().slice(from)).toContain(`info.name "after" -> "moved?"`);
    expect((await relayInfo(url)).name).toBe("moved?"); // still on the old port, the rest applied
    await expect(fetch(`http://127.0.0.1:${other}/`)).rejects.toThrow();
  });

  test("an invalid file: reported with file:line, the running config stays", async () => {
    const before = await relayInfo(url);
    writeConfig(file, `[info]\nname = "broken"\n\n[limits]\nmax_subscriptions = "many"\n`);
    const from = relay.output().length;
    relay.proc.kill("SIGHUP");
    const line = await relay.waitFor(/SIGHUP: config reload failed.*\n/, 10_000, from);
    expect(line).toContain(`keeping the running config: ${file}:5: [limits] max_subscriptions = "many": expected an integer`);
    expect(await relayInfo(url)).toEqual(before);

    writeConfig(file, `[info\nname = "broken"\n`);
    const from2 = relay.output().length;
    relay.proc.kill("SIGHUP");
    expect(await relay.waitFor(/SIGHUP: config reload failed.*\n/, 10_000, from2)).toContain(`${file}:1:`);
    expect(await relayInfo(url)).toEqual(before);
    expect(relay.proc.exitCode).toBeNull();
  });

  test("a file with a misspelt key and a bad value: each problem logged with file:line, the running config stays", async () => {
    const before = await relayInfo(url);
    writeConfig(file, `[info]\nname = "typo"\ndescripton = "x"\n\n[limits]\nmax_subscriptions = "many"\n`);
    const from = relay.output().length;
    relay.proc.kill("SIGHUP");
    await relay.waitFor(/unknown keys are refused.*\n/, 10_000, from);
    const lines = relay
      .output()
      .slice(from)
      .split("\n")
      .filter((l) => l.includes("config reload failed"));
    expect(lines).toEqual([
      `error: SIGHUP: config reload failed, keeping the running config: ${file}:3: [info] unknown key "descripton"; did you mean "description"?`,
      `error: SIGHUP: config reload failed, keeping the running config: ${file}:6: [limits] max_subscriptions = "many": expected an integer (1..10000)`,
      `error: SIGHUP: config reload failed, keeping the running config: ${file}: unknown keys are refused; correct them, or pass --lenient to ignore them`,
    ]);
    expect(await relayInfo(url)).toEqual(before);
    expect(relay.proc.exitCode).toBeNull();
  });

  test("watch_config: saving the file reloads it, without a signal", async () => {
    writeConfig(file, toml({ ...base, options: { verify_workers: "RAW:1", watch_config: "RAW:true" }, info: { name: "watched" } }));
    await signalAndWait(relay, "SIGHUP", /options.watch_config false -> true.*\n/);
    expect((await relayInfo(url)).name).toBe("watched");
    const from = relay.output().length;
    writeConfig(file, toml({ ...base, options: { verify_workers: "RAW:1", watch_config: "RAW:true" }, info: { name: "saved" } }));
    const line = await relay.waitFor(/config file changed: config reloaded from .*\n/, 10_000, from);
    expect(line).toContain(`info.name "watched" -> "saved"`);
    expect((await relayInfo(url)).name).toBe("saved");
  });
});
