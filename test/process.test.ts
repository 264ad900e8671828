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
  const oks = events.map((e) => c.publish(e).catch(() => undefined));
  await Bun.sleep(5);
  relay.proc.kill("SIGTERM");
  const code = await relay.proc.exited;
  expect(code).toBe(0);
  expect(c.frames.some((f) => f[0] === "NOTICE" && String(f[1]).startsWith("closing:"))).toBe(true);
  const acked = (await Promise.all(oks)).filter((ok) => ok?.[2] === true).map((ok) => ok![1]);
  const again = await spawnRelay(source, ["--data-dir", data], dir);
  const c2 = await Client.connect(again.url);
  const { events: stored } = await c2.req("t", { authors: [s.pubkey], limit: 500 });
  const storedIds = new Set(stored.map((e) => e.id));
  expect(acked.every((id) => storedIds.has(id))).toBe(true);
  c2.close();
  again.proc.kill("SIGTERM");
  expect(await again.proc.exited).toBe(0);
});
