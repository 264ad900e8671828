// `bunstr stream` as a real process: a source relay process, events published to it appear in
// the local database; the source killed and restarted on the same port, stream reconnects,
// resubscribes and keeps importing; SIGINT ends it with a summary.
import { afterAll, expect, spyOn, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { backoffDelay, followRelay } from "../src/ops/stream.ts";
import { loadConfigText } from "../src/config/load.ts";
import { Client, now, signer, startTestRelay } from "./helpers.ts";
import { bunstr } from "./ops-helpers.ts";
import { freePort, spawnRelay } from "./process-helpers.ts";
import { BUNSTR } from "./ops-helpers.ts";
import { spawnBunstr, type Bunstr } from "./relay-process.ts";

const dir = mkdtempSync(join(tmpdir(), "bunstr-ops-stream-"));
const procs: Bunstr[] = [];
afterAll(async () => {
  for (const p of procs) {
    p.proc.kill("SIGKILL");
    await p.proc.exited;
  }
  rmSync(dir, { recursive: true, force: true });
});

async function storedIds(dataDir: string): Promise<Set<string>> {
  const r = await bunstr(["export", "--data-dir", dataDir]);
  if (r.code !== 0) return new Set();
  return new Set(
    r.stdout
      .trim()
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l).id as string),
  );
}

async function until(what: string, pred: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await pred())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(100);
  }
}

test("backoff doubles from 1 s up to 60 s, with jitter in the upper half", () => {
  for (let i = 0; i < 200; i++) {
    const d0 = backoffDelay(0);
    expect(d0).toBeGreaterThanOrEqual(500);
    expect(d0).toBeLessThanOrEqual(1000);
    const d3 = backoffDelay(3);
    expect(d3).toBeGreaterThanOrEqual(4000);
    expect(d3).toBeLessThanOrEqual(8000);
    const big = backoffDelay(50);
    expect(big).toBeGreaterThanOrEqual(30_000);
    expect(big).toBeLessThanOrEqual(60_000);
  }
});

test("imports what the source receives, through a restart of the source on the same port", async () => {
  const port = freePort();
  const srcDir = join(dir, "source");
  const dst = join(dir, "local");
  const startSource = async () => {
    const p = await spawnBunstr(["--host", "127.0.0.1", "--port", String(port), "--data-dir", srcDir], dir);
    procs.push(p);
    return p;
  };
  let source = await startSource();
  const url = `ws://127.0.0.1:${port}/`;
  const a = signer();
  const b = signer();

  // An old event already on the source: not wanted (since = now by default).
  let c = await Client.connect(url);
  const old = a.sign({ kind: 1, content: "before the stream", created_at: now() - 3600 });
  expect((await c.publish(old))[2]).toBe(true);

  const stream = await spawnBunstr(["stream", url, "--data-dir", dst, "--filter", JSON.stringify({ kinds: [1, 7] })], dir, false);
  procs.push(stream);
  await stream.waitFor("subscribed to", 15_000);

  const first = [a.sign({ kind: 1, content: "live 1" }), b.sign({ kind: 7, content: "+" }), a.sign({ kind: 1, content: "live 2" })];
  const otherKind = b.sign({ kind: 0, content: "{}" });
  for (const e of [...first, otherKind]) expect((await c.publish(e))[2]).toBe(true);
  await until("the first events locally", async () => {
    const ids = await storedIds(dst);
    return first.every((e) => ids.has(e.id));
  });
  let ids = await storedIds(dst);
  expect(ids.has(old.id)).toBe(false);
  expect(ids.has(otherKind.id)).toBe(false);

  // The source goes away hard and comes back on the same port (same data).
  c.close();
  const mark = stream.output().length;
  source.proc.kill("SIGKILL");
  await source.proc.exited;
  await stream.waitFor("reconnecting in", 10_000, mark);
  await stream.waitFor("retrying in", 15_000, mark); // at least one failed attempt while it is down
  source = await startSource();
  await stream.waitFor("subscribed to", 30_000, mark);

  c = await Client.connect(url);
  const second = [b.sign({ kind: 1, content: "after restart 1" }), a.sign({ kind: 7, content: "-" })];
  for (const e of second) expect((await c.publish(e))[2]).toBe(true);
  c.close();
  await until("the events after the restart locally", async () => {
    const ids = await storedIds(dst);
    return second.every((e) => ids.has(e.id));
  });
  ids = await storedIds(dst);
  expect(ids.size).toBe(first.length + second.length);

  // SIGINT: a summary and exit 0. The resubscription since newest - margin re-sent the first
  // events: counted as duplicates, not stored twice.
  stream.proc.kill("SIGINT");
  expect(await stream.proc.exited).toBe(0);
  const out = stream.output();
  expect(out).toMatch(/streamed from ws:\/\/127\.0\.0\.1:\d+\/ into .* 2 connections, 1 drops/);
  expect(out).toContain("stored 5, duplicate 3");
  expect(out).toContain("invalid 0");
}, 90_000);

test("[mirror] relays inside serve: events of the source are stored and sent to live subscribers", async () => {
  const source = await spawnRelay(BUNSTR, ["--data-dir", join(dir, "mirror-source")], dir);
  const logs = spyOn(console, "log");
  const local = await startTestRelay({ mirror: { relays: [source.url], filter: JSON.stringify({ kinds: [1] }) } });
  try {
    await until("the mirror to subscribe", async () => logs.mock.calls.some((c) => String(c[0]).includes("subscribed to")));
    const reader = await Client.connect(local.url);
    await reader.req("live", { kinds: [1, 7] });
    const a = signer();
    const note = a.sign({ kind: 1, content: "mirrored" });
    const reaction = a.sign({ kind: 7, content: "+" }); // not in the mirror's filter
    const writer = await Client.connect(source.url);
    for (const e of [note, reaction]) expect((await writer.publish(e))[2]).toBe(true);
    writer.close();
    const live = await reader.next((f) => f[0] === "EVENT" && f[1] === "live");
    expect(live[2]).toEqual(note);
    const stored = await reader.req("stored", { authors: [a.pubkey] });
    expect(stored.events.map((e) => e.id)).toEqual([note.id]);
    reader.close();
  } finally {
    logs.mockRestore();
    await local.stop();
    source.proc.kill();
    await source.proc.exited;
  }
}, 60_000);

test("[mirror] is one table: relays and filter", () => {
  const { config } = loadConfigText('[mirror]\nrelays = ["wss://relay.example.com"]\nfilter = \'{"kinds":[1]}\'\n', "t.toml");
  expect(config.mirror).toEqual({ relays: ["wss://relay.example.com"], filter: '{"kinds":[1]}' });
  expect(() => loadConfigText('[mirror]\nrelays = ["https://x"]\n', "t.toml")).toThrow("ws:// or wss://");
  expect(() => loadConfigText('[[mirror]]\nurl = "wss://x"\n', "t.toml")).toThrow("must be a [mirror] table");
});

test("a remote sending faster than events are stored is cut off and resubscribed, never queued without bound", async () => {
  // A fake relay answering every REQ with 3,000 events at once; the store takes 100 ms a batch.
  const events = Array.from({ length: 3000 }, (_, i) => ({
    id: i.toString(16).padStart(64, "0"),
    pubkey: "a".repeat(64),
    created_at: 1_700_000_000 + i,
    kind: 1,
    tags: [],
    content: "",
    sig: "b".repeat(128),
  }));
  let reqs = 0;
  const fake = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (req, srv) => (srv.upgrade(req) ? undefined : new Response("no")),
    websocket: {
      message(ws, m) {
        const [verb, subId] = JSON.parse(String(m));
        if (verb !== "REQ") return;
        reqs++;
        ws.cork(() => {
          for (const e of events) ws.send(JSON.stringify(["EVENT", subId, e]));
          ws.send(JSON.stringify(["EOSE", subId]));
        });
      },
    },
  });
  const logs: string[] = [];
  const batches: number[] = [];
  const streamer = followRelay(
    {
      config: loadConfigText("", "test.toml").config,
      url: `ws://127.0.0.1:${fake.port}/`,
      filter: {},
      since: 0,
      maxQueued: 500,
      backoffFirstMs: 20,
      backoffCapMs: 50,
      log: (t) => logs.push(t),
    },
    async (batch) => {
      batches.push(batch.length);
      await Bun.sleep(100);
      return {
        lines: batch.length,
        accepted: batch.length,
        duplicate: 0,
        older: 0,
        deleted: 0,
        refused: 0,
        ephemeral: 0,
        badJson: 0,
        badEvent: 0,
        badId: 0,
        badSig: 0,
        problems: [],
      };
    },
  );
  try {
    const deadline = Date.now() + 10_000;
    while (reqs < 3 && Date.now() < deadline) await Bun.sleep(20);
  } finally {
    streamer.stop();
    await streamer.done;
    fake.stop(true);
  }
  expect(reqs).toBeGreaterThanOrEqual(3);
  expect(logs.some((l) => l.includes("sends faster than events are stored (500 waiting)"))).toBe(true);
  expect(Math.max(...batches)).toBeLessThanOrEqual(500);
});
