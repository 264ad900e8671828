// Smoke test of a cross-built Linux binary under qemu-user (not part of `npm test` or CI):
//   apt-get install qemu-user-static
//   npx bun test/smoke-qemu.ts [dist/release/bunstr-linux-arm64]
// Unpacks Debian's libc for the binary's architecture (packaging/fetch-secp256k1.sh with
// SYSROOT=1), starts the binary under qemu with that as its root for libraries, and checks that it
// verifies signatures with its embedded libsecp256k1 (good accepted, forged refused), serves a
// REQ, and exits 0 on SIGTERM. Prints a reason and exits 0 if qemu-user is not installed.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Client, signer } from "./helpers.ts";
import { spawnRelay } from "./process-helpers.ts";

const binary = resolve(process.argv[2] ?? "dist/release/bunstr-linux-arm64");
const fail = (msg: string) => {
  console.error(`smoke-qemu: FAIL: ${msg}`);
  process.exit(1);
};
const header = new Uint8Array(await Bun.file(binary).slice(0, 20).arrayBuffer());
const machine = header[18]! | (header[19]! << 8);
const arch = { 0xb7: { debian: "arm64", qemu: "aarch64" }, 0x3e: { debian: "amd64", qemu: "x86_64" } }[machine];
if (!arch) fail(`${binary}: not an ELF binary for arm64 or x86-64`);
const qemu = Bun.which(`qemu-${arch!.qemu}-static`) ?? Bun.which(`qemu-${arch!.qemu}`);
if (!qemu) {
  console.log(`smoke-qemu: skipped: qemu-${arch!.qemu}-static is not installed (apt-get install qemu-user-static)`);
  process.exit(0);
}

const root = resolve(import.meta.dir, "..");
const fetched = Bun.spawnSync(["sh", join(root, "packaging/fetch-secp256k1.sh"), arch!.debian, join(root, "dist/secp256k1")], {
  env: { ...process.env, SYSROOT: "1" },
  stderr: "pipe",
});
if (fetched.exitCode !== 0) fail(`fetching Debian's ${arch!.debian} libc: ${fetched.stderr}`);
const sysroot = join(root, "dist/secp256k1", arch!.debian, "sysroot");

const dir = mkdtempSync(join(tmpdir(), "bunstr-qemu-"));
const started = performance.now();
const relay = await spawnRelay([qemu, "-L", sysroot, binary], ["--data-dir", join(dir, "data")], dir);
console.log(`smoke-qemu: listening after ${(performance.now() - started).toFixed(0)} ms: ${relay.output().trim()}`);
// No libsecp256k1 in the sysroot: only the embedded copy can be native here.
if (!relay.output().includes("signatures: native libsecp256k1 (embedded)")) fail(`embedded libsecp256k1 not used: ${relay.output()}`);

const c = await Client.connect(relay.url);
const good = signer().sign({ kind: 1, content: `verified under qemu-${arch!.qemu}` });
const forged = { ...signer().sign({ kind: 1, content: "forged" }), sig: good.sig };
const [ok1, ok2] = [await c.publish(good), await c.publish(forged)];
if (ok1[2] !== true || ok2[2] !== false || !String(ok2[3]).startsWith("invalid:")) fail(`verifier: ${JSON.stringify([ok1, ok2])}`);
const { events } = await c.req("q", { ids: [good.id] });
if (events.length !== 1) fail(`read back: ${JSON.stringify(events)}`);
c.close();
relay.proc.kill("SIGTERM");
const code = await relay.proc.exited;
if (code !== 0) fail(`exit code ${code} after SIGTERM:\n${relay.output()}`);
rmSync(dir, { recursive: true, force: true });
console.log(`smoke-qemu: ok (${arch!.debian}: embedded libsecp256k1 verified, read back, SIGTERM -> exit 0)`);
