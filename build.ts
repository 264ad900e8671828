// Builds the single executable:
//   bun build.ts [--target bun-linux-x64|bun-linux-arm64|bun-linux-x64-baseline|bun-darwin-arm64]
//                [--outfile dist/bunstr] [--secp256k1 PATH | --no-secp256k1]
// Worker scripts are extra entrypoints so they are embedded in the binary too. So is the host's
// libsecp256k1 (native Schnorr verification, ~3x the ingest rate of the pure JS verifier) when
// the target runs on this machine's OS and CPU; `--secp256k1 PATH` embeds a given build (for
// another target), `--no-secp256k1` none. At run time the system's library is preferred, then
// the embedded one, then @noble/curves (see src/relay/secp256k1-native.ts).
import { copyFileSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { join, relative } from "node:path";
import { parseArgs } from "node:util";
import pkg from "./package.json" with { type: "json" };

const { values } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    target: { type: "string" },
    outfile: { type: "string" },
    secp256k1: { type: "string" },
    "no-secp256k1": { type: "boolean" },
  },
});

const target = values.target as Bun.Build.CompileTarget | undefined;
const outfile = values.outfile ?? (target ? `dist/bunstr-${target.replace(/^bun-/, "")}` : "dist/bunstr");
const commit = Bun.spawnSync(["git", "rev-parse", "--short", "HEAD"], { stderr: "ignore" }).stdout.toString().trim();
const version = commit ? `${pkg.version}+${commit}` : pkg.version;

/** The host's libsecp256k1, when the binary will run on this OS and CPU. */
function hostLibrary(): string | undefined {
  const host = `bun-${process.platform}-${process.arch}`;
  if (target && !target.startsWith(host)) return undefined;
  const dirs =
    process.platform === "darwin"
      ? ["/opt/homebrew/lib", "/usr/local/lib"]
      : [`/usr/lib/${process.arch === "arm64" ? "aarch64" : "x86_64"}-linux-gnu`, "/usr/lib64", "/usr/lib", "/usr/local/lib"];
  const names = process.platform === "darwin" ? ["libsecp256k1.dylib"] : ["libsecp256k1.so.2", "libsecp256k1.so.1", "libsecp256k1.so"];
  for (const dir of dirs) for (const name of names) if (existsSync(join(dir, name))) return join(dir, name);
  return undefined;
}

const library = values["no-secp256k1"] ? undefined : (values.secp256k1 ?? hostLibrary());
const entrypoints = ["./src/main.ts", "./src/relay/verify-worker.ts", "./src/store/reader-worker.ts"];
// Staged inside src/ (gitignored): entrypoints outside it would move the binary's module root
// and with it the paths the workers are found under.
const staging = mkdtempSync(join("src", "embed-"));
if (library) {
  // Named libsecp256k1.<ext> inside the binary: that prefix is how the relay finds it.
  const embedded = join(staging, library.endsWith(".dylib") ? "libsecp256k1.dylib" : "libsecp256k1.so");
  copyFileSync(library, embedded);
  // Relative like the others: an absolute entrypoint here moves the worker scripts' paths.
  entrypoints.push(`./${relative(process.cwd(), embedded)}`);
}

const result = await Bun.build({
  entrypoints,
  compile: target ? { target, outfile } : { outfile },
  define: { BUNSTR_VERSION: JSON.stringify(version) },
  // Keep names so stack traces in an operator's log stay readable without a source map.
  minify: { whitespace: true, syntax: true, identifiers: false },
});
rmSync(staging, { recursive: true, force: true });

if (!result.success) {
  for (const log of result.logs) console.error(log);
  process.exit(1);
}
const embeddedNote = library ? `libsecp256k1 from ${library} embedded` : "no libsecp256k1 embedded (system library or noble at run time)";
console.log(`built ${outfile} (bunstr ${version}${target ? `, ${target}` : ""}; ${embeddedNote})`);
