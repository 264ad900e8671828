// Write-policy plugins speaking strfry's protocol, over a real websocket with real child
// processes: strfry-style plugins run unchanged; accept, reject, shadowReject; timeouts, crashes,
// junk output and reloads are answered (never hung) and the relay keeps serving.
import { afterAll, beforeAll, describe, expect, spyOn, test } from "bun:test";
import { chmodSync, copyFileSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hexToBytes } from "@noble/hashes/utils.js";
import { finalizeEvent, getPublicKey } from "nostr-tools/pure";
import { MAX_PLUGIN_INFLIGHT, WritePolicyPlugin } from "../src/relay/plugin/plugin.ts";
import { rejectMessage, requestLine } from "../src/policy/plugin-protocol.ts";
import type { NostrEvent } from "../src/protocol/event.ts";
import { needInCI } from "./ci.ts";
import {
  accepted,
  Client,
  failOnRelayErrors,
  now,
  signer,
  startTestRelay,
  type ConfigPatch,
  type Signer,
  type TestRelay,
} from "./helpers.ts";

failOnRelayErrors();

const FIXTURES = join(import.meta.dir, "fixtures", "plugins");
const fixture = (name: string) => join(FIXTURES, name);
// Plugins in other languages need their interpreter. .ci/run installs them; in CI a missing one
// fails (test/ci.ts). Locally their tests are left out with a printed reason.
const has = (cmd: string): boolean => needInCI(`plugin.test: ${cmd}`, Bun.which(cmd) === null ? `${cmd} is not installed` : undefined);

const relays: TestRelay[] = [];
const clients: Client[] = [];
const dir = mkdtempSync(join(tmpdir(), "bunstr-plugin-"));

afterAll(async () => {
  for (const c of clients) c.close();
  await Promise.all(relays.map((r) => r.stop()));
  rmSync(dir, { recursive: true, force: true });
});

async function relayWith(plugin: string, patch: ConfigPatch = {}): Promise<TestRelay> {
  const r = await startTestRelay({ ...patch, options: { write_policy_plugin: plugin, ...patch.options } });
  relays.push(r);
  return r;
}

async function connect(r: TestRelay): Promise<Client> {
  const c = await Client.connect(r.url);
  clients.push(c);
  return c;
}

const stored = async (c: Client, e: NostrEvent) => (await c.req(`q${Math.random()}`, { ids: [e.id] })).events;

/** Publishes and resolves with [accepted, message]. */
const answer = async (c: Client, e: NostrEvent): Promise<[boolean, string]> => {
  const ok = await c.publish(e);
  return [ok[2], ok[3]];
};

/** Silences console.warn for a block and returns what was warned. */
async function warnings<T>(run: () => Promise<T>): Promise<{ result: T; warned: string[] }> {
  const spy = spyOn(console, "warn").mockImplementation(() => {});
  try {
    const result = await run();
    return { result, warned: spy.mock.calls.map((c) => c.map(String).join(" ")) };
  } finally {
    spy.mockRestore();
  }
}

/** The fixed key that whitelist.js lets through. */
const WHITELISTED: Signer = (() => {
  const sk = hexToBytes("5a".repeat(32));
  return {
    sk,
    pubkey: getPublicKey(sk),
    sign: (t) =>
      JSON.parse(
        JSON.stringify(
          finalizeEvent({ kind: t.kind, content: t.content ?? "", tags: t.tags ?? [], created_at: t.created_at ?? now() }, sk),
        ),
      ) as NostrEvent,
  };
})();

describe("protocol", () => {
  test("the request line has strfry's keys, in strfry's order, and authed only when there is one", () => {
    const json = '{"id":"x"}';
    expect(requestLine(json, 1700000000, { type: "IP4", info: "1.2.3.4" })).toBe(
      '{"event":{"id":"x"},"receivedAt":1700000000,"sourceInfo":"1.2.3.4","sourceType":"IP4","type":"new"}\n',
    );
    expect(JSON.parse(requestLine(json, 1, { type: "IP6", info: "::1", authed: "ab" }))).toEqual({
      authed: "ab",
      event: { id: "x" },
      receivedAt: 1,
      sourceInfo: "::1",
      sourceType: "IP6",
      type: "new",
    });
  });

  test("a reject message keeps a NIP-01 prefix and gets blocked: otherwise", () => {
    expect(rejectMessage("blocked: not on white-list")).toBe("blocked: not on white-list");
    expect(rejectMessage("rate-limited: slow down")).toBe("rate-limited: slow down");
    expect(rejectMessage("auth-required: members only")).toBe("auth-required: members only");
    expect(rejectMessage("no spam here")).toBe("blocked: no spam here");
    expect(rejectMessage("spam: too many links")).toBe("blocked: spam: too many links");
    expect(rejectMessage("")).toBe("blocked: rejected by the relay's write policy");
  });
});

describe("strfry plugins run unchanged", () => {
  test.skipIf(!has("node"))("whitelist.js (Node, as in strfry's docs): only the listed pubkey may publish", async () => {
    const c = await connect(await relayWith(fixture("whitelist.js")));
    const ok = WHITELISTED.sign({ kind: 1, content: "on the list" });
    await accepted(c, ok);
    expect(await stored(c, ok)).toEqual([ok]);
    const other = signer().sign({ kind: 1, content: "not on the list" });
    expect(await c.publish(other)).toEqual(["OK", other.id, false, "blocked: not on white-list"]);
    expect(await stored(c, other)).toEqual([]);
  });

  test.skipIf(!has("python3"))("accept-all.py (Python): everything is stored", async () => {
    const c = await connect(await relayWith(fixture("accept-all.py")));
    const s = signer();
    const events = [1, 2, 3].map((i) => s.sign({ kind: 1, content: `python ${i}` }));
    for (const e of events) await accepted(c, e);
    expect((await c.req("all", { authors: [s.pubkey] })).events).toHaveLength(3);
  });

  test.skipIf(!has("perl"))("spam-filter.pl (Perl): shadowReject and a reject message without a prefix", async () => {
    const c = await connect(await relayWith(fixture("spam-filter.pl")));
    const s = signer();
    const shadow = s.sign({ kind: 1, content: "BUY NOW cheap pills" });
    expect(await c.publish(shadow)).toEqual(["OK", shadow.id, true, ""]);
    expect(await stored(c, shadow)).toEqual([]);
    const spam = s.sign({ kind: 1, content: "this is spam" });
    expect(await c.publish(spam)).toEqual(["OK", spam.id, false, "blocked: no spam here"]);
    const fine = s.sign({ kind: 1, content: "hello" });
    await accepted(c, fine);
    expect(await stored(c, fine)).toEqual([fine]);
  });

  test.skipIf(!has("jq"))("kind-filter.sh (shell + jq): reports are refused", async () => {
    const c = await connect(await relayWith(fixture("kind-filter.sh")));
    const s = signer();
    const report = s.sign({ kind: 1984, tags: [["p", s.pubkey, "spam"]] });
    expect(await c.publish(report)).toEqual(["OK", report.id, false, "blocked: reports are not accepted here"]);
    await accepted(c, s.sign({ kind: 1, content: "a note" }));
  });
});

const TIMEOUT = 1500;

describe.skipIf(!has("node"))("answers, failures and restarts (misbehave.js)", () => {
  let relay: TestRelay;
  let c: Client;
  const s = signer();
  const ev = (content: string, kind = 1) => s.sign({ kind, content });
  const pidOf = async () => {
    const [ok, msg] = await answer(c, ev("pid"));
    expect(ok).toBe(false);
    return Number(/^blocked: pid (\d+)$/.exec(msg)![1]);
  };

  beforeAll(async () => {
    // Long enough for a fresh Node process to start on a busy machine.
    relay = await relayWith(fixture("misbehave.js"), { options: { write_policy_timeout_ms: TIMEOUT } });
    c = await connect(relay);
  });

  test("accept: stored and served", async () => {
    const e = ev("hello");
    await accepted(c, e);
    expect(await stored(c, e)).toEqual([e]);
  });

  test("reject: OK false with the plugin's message, prefixed with blocked: when it has no NIP-01 prefix", async () => {
    const cases: [string, string][] = [
      ["reject restricted: members only", "restricted: members only"],
      ["reject blocked: go away", "blocked: go away"],
      ["reject not today", "blocked: not today"],
      ["reject", "blocked: rejected by the relay's write policy"],
    ];
    for (const [content, message] of cases) {
      const e = ev(content);
      expect(await c.publish(e)).toEqual(["OK", e.id, false, message]);
      expect(await stored(c, e)).toEqual([]);
    }
  });

  test("shadowReject: OK true, but neither stored nor delivered to a live subscriber", async () => {
    const author = signer(); // nothing stored yet, so all the watcher gets is live
    const watcher = await connect(relay);
    expect((await watcher.req("live", { authors: [author.pubkey] })).end[0]).toBe("EOSE");
    const shadow = author.sign({ kind: 1, content: "shadow" });
    expect(await c.publish(shadow)).toEqual(["OK", shadow.id, true, ""]);
    const ephemeral = author.sign({ kind: 20001, content: "shadow" });
    expect(await c.publish(ephemeral)).toEqual(["OK", ephemeral.id, true, ""]);
    const marker = author.sign({ kind: 1, content: "after the shadow" });
    await accepted(c, marker);
    await watcher.next((f) => f[0] === "EVENT" && f[1] === "live" && f[2].id === marker.id);
    expect(watcher.eventsFor("live").map((e) => e.id)).toEqual([marker.id]);
    expect(await stored(c, shadow)).toEqual([]);
  });

  test("the request carries type, receivedAt, sourceType, sourceInfo, and authed once the connection has authenticated", async () => {
    const fresh = await connect(relay);
    const [, msg] = await answer(fresh, ev("echo"));
    const req = JSON.parse(msg.slice("blocked: ".length));
    expect(req).toEqual({ type: "new", receivedAt: expect.any(Number), sourceType: "IP4", sourceInfo: "127.0.0.1" });
    expect(Math.abs(req.receivedAt - now())).toBeLessThanOrEqual(2);

    const other = signer();
    expect((await fresh.auth(other, relay.url))[2]).toBe(true);
    const [, asOther] = await answer(fresh, ev("echo"));
    expect(JSON.parse(asOther.slice("blocked: ".length)).authed).toBe(other.pubkey);
    expect((await fresh.auth(s, relay.url))[2]).toBe(true);
    const [, asAuthor] = await answer(fresh, ev("echo")); // the author, when authenticated as several
    expect(JSON.parse(asAuthor.slice("blocked: ".length)).authed).toBe(s.pubkey);
  });

  test("the plugin never sees an invalid event or a duplicate", async () => {
    const pid = await pidOf();
    const crash = ev("crash");
    const forged = { ...crash, sig: crash.sig.replace(/^./, (x) => (x === "0" ? "1" : "0")) };
    expect(await answer(c, forged)).toEqual([false, "invalid: signature verification failed"]);
    const wrongId = { ...ev("crash"), content: "crash!" };
    expect((await answer(c, wrongId))[1]).toStartWith("invalid:");
    const e = ev("stored once");
    await accepted(c, e);
    expect(await answer(c, e)).toEqual([true, "duplicate: already have this event"]);
    expect(await pidOf()).toBe(pid);
  });

  test("answers out of order are matched by id; an answer for an unknown id is logged and ignored", async () => {
    const { warned } = await warnings(async () => {
      const hold = ev("hold");
      const release = ev("release");
      const [a, b] = await Promise.all([c.publish(hold), (await Bun.sleep(20), c.publish(release))]);
      expect(a).toEqual(["OK", hold.id, true, ""]);
      expect(b).toEqual(["OK", release.id, true, ""]);
      const unknown = ev("unknown-id");
      expect(await c.publish(unknown)).toEqual(["OK", unknown.id, true, ""]);
    });
    expect(warned.some((w) => w.includes("not asked about"))).toBe(true);
  });

  test("junk lines around an answer are logged and skipped, as strfry does", async () => {
    const { warned } = await warnings(async () => {
      const e = ev("junk");
      expect(await c.publish(e)).toEqual(["OK", e.id, true, ""]);
    });
    expect(warned.filter((w) => w.includes("ignored an output line"))).toHaveLength(4);
  });

  test("an answer with an invalid action: that event gets error:, the plugin keeps running", async () => {
    const pid = await pidOf();
    const { warned } = await warnings(async () => {
      const e = ev("bad-action");
      expect(await c.publish(e)).toEqual(["OK", e.id, false, "error: write policy plugin gave an invalid answer"]);
    });
    expect(warned.join("\n")).toContain("invalid answer");
    expect(await pidOf()).toBe(pid);
  });

  test("only junk: the event gets error: at the timeout, and the plugin is restarted", async () => {
    const pid = await pidOf();
    const { warned } = await warnings(async () => {
      const e = ev("only-junk");
      const t0 = Date.now();
      expect(await c.publish(e)).toEqual(["OK", e.id, false, "error: write policy plugin did not answer in time"]);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(TIMEOUT - 50);
      expect(await pidOf()).not.toBe(pid);
    });
    expect(warned.join("\n")).toContain("ignored an output line (not JSON): {");
  });

  test("timeout: error: for that event and the others in flight; the plugin is restarted; the next event is handled", async () => {
    const pid = await pidOf();
    await warnings(async () => {
      const hang = ev("hang");
      const held = ev("hold");
      // Either may reach the plugin first (signatures are checked in parallel): the first to
      // expire is the one that timed out, the other was in flight when the plugin was killed.
      const answers = await Promise.all([c.publish(hang), c.publish(held)]);
      for (const a of answers) expect([a[2], a[3].slice(0, 7)]).toEqual([false, "error: "]);
      expect(answers.map((a) => a[3])).toContain("error: write policy plugin did not answer in time");
    });
    expect(await pidOf()).not.toBe(pid);
    await accepted(c, ev("after the timeout"));
  });

  test("crash: error: for the events it held; the relay keeps serving, restarts it, handles the next event", async () => {
    const pid = await pidOf();
    const { warned } = await warnings(async () => {
      const held = ev("hold");
      const crash = ev("crash");
      const [a, b] = await Promise.all([c.publish(held), (await Bun.sleep(20), c.publish(crash))]);
      expect(a).toEqual(["OK", held.id, false, "error: write policy plugin exited"]);
      expect(b).toEqual(["OK", crash.id, false, "error: write policy plugin exited"]);
    });
    expect(warned.join("\n")).toMatch(/exited with code 3/);
    expect((await c.req("still", { authors: [s.pubkey], limit: 1 })).end[0]).toBe("EOSE");
    const next = ev("after the crash");
    await accepted(c, next);
    expect(await stored(c, next)).toEqual([next]);
    expect(await pidOf()).not.toBe(pid);
  });

  test("crashing again at once: restarts back off, and events meanwhile get error: at once", async () => {
    await warnings(async () => {
      expect((await answer(c, ev("crash")))[1]).toBe("error: write policy plugin exited"); // 1st failure: restart at once
      expect((await answer(c, ev("crash")))[1]).toBe("error: write policy plugin exited"); // 2nd: wait 250 ms
      const [ok, msg] = await answer(c, ev("too soon"));
      expect(ok).toBe(false);
      expect(msg).toStartWith("error: write policy plugin is restarting");
      await Bun.sleep(300);
    });
    await accepted(c, ev("after the backoff"));
  });

  test("an overlong answer line: error:, and the plugin is restarted after a backoff", async () => {
    const pid = await pidOf();
    await warnings(async () => {
      const e = ev("huge");
      expect((await answer(c, e))[1]).toStartWith("error: ");
      // A protocol violation: not restarted in a tight loop, even though it had answered before.
      expect(await answer(c, ev("pid"))).toEqual([false, expect.stringMatching(/^error: write policy plugin is restarting/)]);
      await Bun.sleep(1100);
    });
    expect(await pidOf()).not.toBe(pid);
  });
});

describe.skipIf(!has("node"))("reloads", () => {
  const script = (verdict: string) =>
    `#!/usr/bin/env node\nrequire('readline').createInterface({ input: process.stdin }).on('line', (l) => { const id = JSON.parse(l).event.id; console.log(JSON.stringify({ id, ${verdict} })); });\n`;
  const s = signer();

  test("a plugin file changed on disk (in place, or replaced by rename) is used from the next event", async () => {
    const path = join(dir, "policy.js");
    writeFileSync(path, script(`action: 'accept'`));
    chmodSync(path, 0o755);
    const relay = await relayWith(path);
    const c = await connect(relay);
    await accepted(c, s.sign({ kind: 1, content: "v1" }));

    writeFileSync(path, script(`action: 'reject', msg: 'blocked: v2'`)); // in place
    await Bun.sleep(150); // the file is looked at no more than every 100 ms
    expect(await answer(c, s.sign({ kind: 1, content: "v2" }))).toEqual([false, "blocked: v2"]);

    const tmp = join(dir, "policy.js.tmp");
    writeFileSync(tmp, script(`action: 'reject', msg: 'blocked: v3'`));
    chmodSync(tmp, 0o755);
    renameSync(tmp, path); // atomic replace, as editors and deploy tools do
    await Bun.sleep(150);
    expect(await answer(c, s.sign({ kind: 1, content: "v3" }))).toEqual([false, "blocked: v3"]);
  });

  test("a reload of the config switches plugins, and switches them off", async () => {
    const relay = await relayWith(fixture("misbehave.js"));
    const c = await connect(relay);
    expect(await answer(c, s.sign({ kind: 1, content: "reject one" }))).toEqual([false, "blocked: one"]);
    relay.ctx.config.options.write_policy_plugin = `${fixture("whitelist.js")}`;
    expect(await answer(c, s.sign({ kind: 1, content: "reject two" }))).toEqual([false, "blocked: not on white-list"]);
    const plugin = relay.ctx.plugin;
    const pid = plugin.pid!;
    relay.ctx.config.options.write_policy_plugin = "";
    // Stopped without waiting for another event.
    for (let i = 0; i < 50 && plugin.pid !== undefined; i++) await Bun.sleep(20);
    expect(plugin.pid).toBeUndefined();
    await accepted(c, s.sign({ kind: 1, content: "reject three" }));
    const gone = () => {
      try {
        process.kill(pid, 0);
        return false;
      } catch {
        return true;
      }
    };
    for (let i = 0; i < 50 && !gone(); i++) await Bun.sleep(20);
    expect(gone()).toBe(true);
  });

  test("a change between two events of the same tick: the first is answered by the old plugin, the second by the new", async () => {
    const settings = { command: `node ${fixture("misbehave.js")}`, timeoutMs: 5000 };
    const plugin = new WritePolicyPlugin(() => settings);
    const event = (id: string) => `{"id":"${id}","pubkey":"","created_at":0,"kind":1,"tags":[],"content":"reject by ${id}","sig":""}`;
    const source = { type: "IP4" as const, info: "127.0.0.1" };
    const first = plugin.ask("a", event("a"), source);
    settings.command = `node ${fixture("whitelist.js")}`;
    const second = plugin.ask("b", event("b"), source);
    expect(await Promise.all([first, second])).toEqual([
      { accepted: false, message: "blocked: by a" },
      { accepted: false, message: "blocked: not on white-list" },
    ]);
    await plugin.close();
  });

  test("a command with arguments and environment runs through /bin/sh, like strfry", async () => {
    const cmd = `MODE=x node ${fixture("misbehave.js")} --unused-flag`;
    const c = await connect(await relayWith(cmd));
    expect(await answer(c, s.sign({ kind: 1, content: "reject via sh" }))).toEqual([false, "blocked: via sh"]);
  });

  test("a command that does not exist: error:, logged, and the relay keeps serving", async () => {
    const c = await connect(await relayWith(join(dir, "no-such-plugin")));
    const { warned } = await warnings(async () => {
      const [ok, msg] = await answer(c, s.sign({ kind: 1, content: "nobody home" }));
      expect(ok).toBe(false);
      expect(msg).toStartWith("error: ");
    });
    expect(warned.join("\n")).toContain("code 127 (command not found)");
    expect((await c.req("r", { authors: [s.pubkey], limit: 1 })).end[0]).toBe("EOSE");
  });
});

describe.skipIf(!has("node"))("stopping", () => {
  test("when the relay closes, its plugin is stopped", async () => {
    const relay = await relayWith(fixture("misbehave.js"));
    const c = await connect(relay);
    await accepted(c, signer().sign({ kind: 1, content: "before closing" }));
    const pid = relay.ctx.plugin.pid!;
    expect(pid).toBeGreaterThan(0);
    await relay.close();
    const gone = () => {
      try {
        process.kill(pid, 0);
        return false;
      } catch {
        return true;
      }
    };
    for (let i = 0; i < 100 && !gone(); i++) await Bun.sleep(20);
    expect(gone()).toBe(true);
  });

  test("a hung plugin that ignores EOF and SIGTERM is killed with its whole process group", async () => {
    const path = join(dir, "stubborn.js");
    const pidFile = join(dir, "stubborn.pid");
    writeFileSync(
      path,
      `require('fs').writeFileSync(process.env.PIDFILE, String(process.pid));\nprocess.on('SIGTERM', () => {});\nsetInterval(() => {}, 1000);\n`,
    );
    // /bin/sh forks node rather than exec it: the plugin is the shell's child, not ours.
    const c = await connect(await relayWith(`PIDFILE=${pidFile} node ${path}`, { options: { write_policy_timeout_ms: 3000 } }));
    const { result } = await warnings(async () => {
      const ok = answer(c, signer().sign({ kind: 1, content: "anyone there?" }));
      // Up (and ignoring SIGTERM) well before the timeout, even on a busy machine.
      let pid = 0;
      for (let i = 0; i < 150 && !pid; i++) {
        pid = Number(
          await Bun.file(pidFile)
            .text()
            .catch(() => "0"),
        );
        if (!pid) await Bun.sleep(20);
      }
      return { pid, ok: await ok };
    });
    const pid = result.pid;
    expect(pid).toBeGreaterThan(0);
    expect(result.ok).toEqual([false, "error: write policy plugin did not answer in time"]);
    const alive = () => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    for (let i = 0; i < 200 && alive(); i++) await Bun.sleep(25); // SIGKILL follows SIGTERM after 2 s
    expect(alive()).toBe(false);
  });
});

describe("a plugin that floods its stdout", () => {
  test("`yes junk` as the plugin: another client's REQs stay fast; it is stopped, and restarted with a backoff", async () => {
    const relay = await relayWith("yes junk", { options: { write_policy_timeout_ms: 5000 } });
    const plugin = relay.ctx.plugin;
    const pub = await connect(relay);
    const reader = await connect(relay);
    const s = signer();
    const started = spyOn(console, "log").mockImplementation(() => {});
    const rtts: number[] = [];
    const answers: string[] = [];
    let warned: string[] = [];
    let starts = 0;
    try {
      ({ warned } = await warnings(async () => {
        const until = Date.now() + 3000;
        const publishing = (async () => {
          for (let i = 0; Date.now() < until; i++) {
            answers.push((await answer(pub, s.sign({ kind: 1, content: `flood ${i}` })))[1]);
            await Bun.sleep(150);
          }
        })();
        while (Date.now() < until) {
          const t0 = performance.now();
          expect((await reader.req("r", { authors: [s.pubkey], limit: 5 })).end[0]).toBe("EOSE");
          rtts.push(performance.now() - t0);
          await Bun.sleep(20);
        }
        await publishing;
      }));
    } finally {
      starts = started.mock.calls.filter((c) => String(c[0]).startsWith("write policy plugin started: yes junk")).length;
      started.mockRestore();
    }
    const stopped = [...warned.join("\n").matchAll(/stopped pid (\d+): it floods its output/g)].map((m) => Number(m[1]));
    console.log(
      `yes junk: ${rtts.length} REQs, slowest ${Math.max(...rtts).toFixed(0)} ms; ${answers.length} events; ${starts} plugin starts; stopped for flooding: ${stopped.length}`,
    );
    expect(Math.max(...rtts)).toBeLessThan(500);
    expect(answers.length).toBeGreaterThan(5);
    for (const a of answers) expect(a).toStartWith("error: write policy plugin ");
    // Restarted (more than one process, each stopped for flooding), but backing off: 1 s, then 2 s.
    expect(new Set(stopped).size).toBeGreaterThanOrEqual(2);
    expect(starts).toBe(stopped.length);
    expect(starts).toBeLessThanOrEqual(3);
    expect(plugin.pid).toBeUndefined();
  });

  test.skipIf(!has("node"))(
    "a plugin that answers, then floods: error: for what it held, stopped, and restarted only after a backoff",
    async () => {
      const c = await connect(await relayWith(fixture("misbehave.js"), { options: { write_policy_timeout_ms: TIMEOUT } }));
      const s = signer();
      const ev = (content: string) => s.sign({ kind: 1, content });
      const pidOf = async () => Number(/^blocked: pid (\d+)$/.exec((await answer(c, ev("pid")))[1])![1]);
      const pid = await pidOf();
      const { warned } = await warnings(async () => {
        const [ok, msg] = await answer(c, ev("flood"));
        expect([ok, msg.slice(0, 7)]).toEqual([false, "error: "]);
        // A plugin that answers and then floods is not restarted in a tight loop.
        expect(await answer(c, ev("pid"))).toEqual([false, expect.stringMatching(/^error: write policy plugin is restarting/)]);
        await Bun.sleep(1100);
      });
      expect(warned.join("\n")).toMatch(/stopped pid \d+: it floods its output/);
      expect(await pidOf()).not.toBe(pid);
    },
  );
});

describe.skipIf(!has("node"))("bounds", () => {
  test(`at most ${MAX_PLUGIN_INFLIGHT} events wait for the plugin; more are refused with rate-limited:`, async () => {
    const path = join(dir, "silent.js");
    copyFileSync(fixture("misbehave.js"), path); // outside the fixtures' package.json: CommonJS by default
    chmodSync(path, 0o755);
    const plugin = new WritePolicyPlugin(() => ({ command: path, timeoutMs: 2000 }));
    const event = (i: number) => `{"id":"${i}","pubkey":"","created_at":0,"kind":1,"tags":[],"content":"hang","sig":""}`;
    const waiting = Array.from({ length: MAX_PLUGIN_INFLIGHT }, (_, i) =>
      plugin.ask(String(i), event(i), { type: "IP4", info: "127.0.0.1" }),
    );
    expect(plugin.inflight).toBe(MAX_PLUGIN_INFLIGHT);
    expect(plugin.ask("one more", event(-1), { type: "IP4", info: "127.0.0.1" })).toEqual({
      accepted: false,
      message: "rate-limited: the relay's write policy is busy, try again shortly",
    });
    const { result } = await warnings(() => Promise.all(waiting));
    expect(result.every((v) => v?.accepted === false && v.message.startsWith("error: "))).toBe(true);
    expect(plugin.inflight).toBe(0);
    await plugin.close();
  });
});
