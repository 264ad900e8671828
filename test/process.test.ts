// The relay as a real process: SIGTERM drains and exits 0. (kill -9 durability, at several kill
// points and mid-commit, is in durability.test.ts.)
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, signer } from "./helpers.ts";
import { spawnRelay } from "./process-helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "bunstr-proc-"));
const source = [process.execPath, join(import.meta.dir, "..", "src", "main.ts")];
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("SIGTERM: NOTICE closing:, in-flight events committed, exit 0", async () => {
  const data = join(dir, "term");
  const relay = await spawnRelay(source, ["--data-dir", data], dir);
  const c = await Client.connect(relay.url);
  const s = signer();
  const events = Array.from({ length: 200 }, (_, i) => s.sign({ kind: 1, content: `t${i}` }));
  // The first 20 are acknowledged before the signal, so the check below can never pass on an
  // empty list; the other 180 are sent right before it and are in flight when it lands.
  const first = await Promise.all(events.slice(0, 20).map((e) => c.publish(e)));
  expect(first.map((ok) => ok[2])).toEqual(Array(20).fill(true));
  const oks = events.slice(20).map((e) => c.publish(e).catch(() => undefined));
  await Bun.sleep(5);
  relay.proc.kill("SIGTERM");
  const code = await relay.proc.exited;
  expect(code).toBe(0);
  expect(c.frames.some((f) => f[0] === "NOTICE" && String(f[1]).startsWith("closing:"))).toBe(true);
  const acked = [...first, ...(await Promise.all(oks))].filter((ok) => ok?.[2] === true).map((ok) => ok![1]);
  expect(acked.length).toBeGreaterThanOrEqual(20);
  const again = await spawnRelay(source, ["--data-dir", data], dir);
  const c2 = await Client.connect(again.url);
  const { events: stored } = await c2.req("t", { authors: [s.pubkey], limit: 500 });
  const storedIds = new Set(stored.map((e) => e.id));
  // Every acknowledged event survived the restart (none missing), in-flight ones included.
  expect(acked.filter((id) => !storedIds.has(id))).toEqual([]);
  c2.close();
  again.proc.kill("SIGTERM");
  expect(await again.proc.exited).toBe(0);
});
