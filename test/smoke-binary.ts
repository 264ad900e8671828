// CI smoke test of the compiled binary: run it from another directory on a free port with a
// temp data dir, publish and read back one event, fetch NIP-11, SIGTERM, expect exit code 0.
// Usage: bun test/smoke-binary.ts [path/to/bunstr]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Client, signer } from "./helpers.ts";
import { spawnRelay } from "./process-helpers.ts";

const binary = resolve(process.argv[2] ?? "dist/bunstr");
const dir = mkdtempSync(join(tmpdir(), "bunstr-smoke-"));
const fail = (msg: string) => {
  console.error(`smoke: FAIL: ${msg}`);
  process.exit(1);
};

const started = performance.now();
const relay = await spawnRelay([binary], ["--data-dir", join(dir, "data")], dir);
console.log(`smoke: listening after ${(performance.now() - started).toFixed(0)} ms: ${relay.output().trim()}`);

const c = await Client.connect(relay.url);
const e = signer().sign({ kind: 1, content: "smoke test" });
const ok = await c.publish(e);
if (ok[2] !== true) fail(`publish: ${JSON.stringify(ok)}`);
const { events } = await c.req("smoke", { ids: [e.id] });
if (events.length !== 1 || events[0]!.id !== e.id) fail(`read back: ${JSON.stringify(events)}`);
c.close();

const info = await fetch(`http://127.0.0.1:${relay.port}/`, { headers: { Accept: "application/nostr+json" } });
const doc = (await info.json()) as { supported_nips?: number[]; version?: string };
if (!doc.supported_nips?.includes(1) || info.headers.get("access-control-allow-origin") !== "*") fail(`NIP-11: ${JSON.stringify(doc)}`);
console.log(`smoke: NIP-11 version ${doc.version}, NIPs ${doc.supported_nips!.join(",")}`);

relay.proc.kill("SIGTERM");
const code = await relay.proc.exited;
if (code !== 0) fail(`exit code ${code} after SIGTERM:\n${relay.output()}`);
if (!(await Bun.file(join(dir, "data", "bunstr.sqlite")).exists())) fail("no database in the data dir");
rmSync(dir, { recursive: true, force: true });
console.log("smoke: ok (published, read back, NIP-11, SIGTERM -> exit 0)");
