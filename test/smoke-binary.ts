// CI smoke test of the compiled binary: run it from another directory on a free port with a
// temp data dir, publish and read back one event, fetch NIP-11 and the web pages, SIGTERM, expect
// exit code 0.
// Then, with the system's libsecp256k1 hidden (a private mount namespace), the binary must fall
// back to the copy build.ts embedded and still verify signatures natively.
// Usage: bun test/smoke-binary.ts [path/to/bunstr]
import { mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { inCI } from "./ci.ts";
import { Client, signer } from "./helpers.ts";
import { spawnRelay } from "./process-helpers.ts";

const binary = resolve(process.argv[2] ?? "dist/bunstr");
const dir = mkdtempSync(join(tmpdir(), "bunstr-smoke-"));
const fail = (msg: string) => {
  console.error(`smoke: FAIL: ${msg}`);
  process.exit(1);
};

const systemLibrary = Bun.spawnSync(["ldconfig", "-p"])
  .stdout.toString()
  .match(/=> (\S*libsecp256k1\.so\S*)/)?.[1];

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

// The web pages are files embedded as text (src/http/pages/): the binary must carry them whole,
// their style and script inline, every {{slot}} filled.
const page = async (path: string) => (await fetch(`http://127.0.0.1:${relay.port}${path}`, { headers: { Accept: "text/html" } })).text();
const [statusPage, adminPage] = [await page("/"), await page("/admin")];
for (const [name, html, marks] of [
  [
    "status page",
    statusPage,
    ['id="events-stored"', "ul.nips {", 'getElementById("copy")', 'id="chart-accepted"', "EVENTs per minute from one IP"],
  ],
  [
    "admin page",
    adminPage,
    [
      'id="ban-pubkey"',
      '#result[data-state="ok"]',
      'data-relay-path="/"',
      'id="events"',
      "function safePicture(",
      "function bech32Decode(",
      "listeventsneedingmoderation",
    ],
  ],
] as const) {
  const missing = marks.filter((m) => !html.includes(m));
  if (missing.length > 0 || /\{\{\w+\}\}/.test(html) || !html.trimEnd().endsWith("</html>"))
    fail(`${name}: missing ${JSON.stringify(missing)} in ${html.slice(0, 300)}`);
}
console.log(`smoke: status page ${statusPage.length} B, admin page ${adminPage.length} B`);

relay.proc.kill("SIGTERM");
const code = await relay.proc.exited;
if (code !== 0) fail(`exit code ${code} after SIGTERM:\n${relay.output()}`);
if (!(await Bun.file(join(dir, "data", "bunstr.sqlite")).exists())) fail("no database in the data dir");
if (systemLibrary && !relay.output().includes("signatures: native libsecp256k1 in"))
  fail(`libsecp256k1 is installed but not used: ${relay.output()}`);

// The embedded library: hide the system's under /dev/null in a mount namespace (needs root, as
// in CI; elsewhere the check is reported as not run, and CI=true makes that a failure).
const hidden = systemLibrary && Bun.spawnSync(["unshare", "-m", "true"]).exitCode === 0;
if (hidden) {
  const hide = `mount --bind /dev/null ${realpathSync(systemLibrary)} && exec "$0" "$@"`;
  const r2 = await spawnRelay(["unshare", "-m", "sh", "-c", hide, binary], ["--data-dir", join(dir, "data2")], dir);
  if (!r2.output().includes("signatures: native libsecp256k1 (embedded)")) fail(`embedded libsecp256k1 not used: ${r2.output()}`);
  const c2 = await Client.connect(r2.url);
  const good = signer().sign({ kind: 1, content: "verified by the embedded library" });
  const forged = { ...signer().sign({ kind: 1, content: "forged" }), sig: good.sig };
  const [ok1, ok2] = [await c2.publish(good), await c2.publish(forged)];
  if (ok1[2] !== true || ok2[2] !== false || !String(ok2[3]).startsWith("invalid:"))
    fail(`embedded verifier: ${JSON.stringify([ok1, ok2])}`);
  c2.close();
  r2.proc.kill("SIGTERM");
  if ((await r2.proc.exited) !== 0) fail(`embedded run: exit code after SIGTERM:\n${r2.output()}`);
  console.log("smoke: system libsecp256k1 hidden: the embedded copy verified (good accepted, forged refused)");
} else if (inCI) {
  fail(`cannot check the embedded libsecp256k1 (system library: ${systemLibrary ?? "none"}; unshare -m needs root)`);
} else {
  console.log("smoke: embedded libsecp256k1 not checked here (needs the system library installed and root for unshare -m)");
}
rmSync(dir, { recursive: true, force: true });
console.log("smoke: ok (published, read back, NIP-11, web pages, SIGTERM -> exit 0)");
