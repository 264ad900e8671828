// Builds the single executable:
//   bun build.ts [--target bun-linux-x64|bun-linux-arm64|bun-linux-x64-baseline|bun-darwin-arm64|bun-linux-x64-musl|…]
//                [--outfile dist/bunstr] [--secp256k1 PATH | --no-secp256k1]
// or every release target into dist/release/ (bunstr-<target> and SHA256SUMS for `sha256sum -c`):
//   bun build.ts --release [--outdir dist/release] [--only linux-x64,linux-arm64]
//                [--secp256k1-linux-arm64 PATH] [--secp256k1-darwin-arm64 PATH] [--no-secp256k1]
// Worker scripts are extra entrypoints so they are embedded in the binary too. So is the host's
// libsecp256k1 (native Schnorr verification, ~3x the ingest rate of the pure JS verifier) when
// the target runs on this machine's OS and CPU; `--secp256k1 PATH` embeds a given build (for
// another target), `--no-secp256k1` none. At run time the system's library is preferred, then
// the embedded one, then @noble/curves (see src/verify/native.ts).
// A release build takes the library for a Linux target of another CPU from Debian's package for
// that architecture (packaging/fetch-secp256k1.sh, needs apt-get) unless given a PATH; there is
// no such source for macOS, so darwin-arm64 is built without one unless given a PATH.
// Cross-compiling makes Bun download the runtime for the target (@oven/bun-<target> from the npm
// registry, cached in ~/.bun/install/cache).
// The admin page's script (src/http/pages/admin/, bundled by src/http/pages/bundle.ts) and the
// /join page's (src/http/pages/join/) are bundled first and baked in as BUNSTR_ADMIN_SCRIPT and
// BUNSTR_JOIN_SCRIPT: the binary serves them without bundling as it starts.
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { basename, join, relative } from "node:path";
import { parseArgs } from "node:util";
import pkg from "./package.json" with { type: "json" };
import { bundleAdminScript, bundleJoinScript } from "./src/http/pages/bundle.ts";

/** Release targets: file suffix -> Bun compile target, and the Debian architecture of its library. */
const RELEASE_TARGETS = {
  "linux-x64": { target: "bun-linux-x64", debianArch: "amd64" },
  "linux-x64-baseline": { target: "bun-linux-x64-baseline", debianArch: "amd64" },
  "linux-arm64": { target: "bun-linux-arm64", debianArch: "arm64" },
  "darwin-arm64": { target: "bun-darwin-arm64", debianArch: undefined },
} as const satisfies Record<string, { target: Bun.Build.CompileTarget; debianArch: string | undefined }>;
type ReleaseName = keyof typeof RELEASE_TARGETS;

const { values } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    target: { type: "string" },
    outfile: { type: "string" },
    secp256k1: { type: "string" },
    "no-secp256k1": { type: "boolean" },
    release: { type: "boolean" },
    outdir: { type: "string" },
    only: { type: "string" },
    ...Object.fromEntries(Object.keys(RELEASE_TARGETS).map((name) => [`secp256k1-${name}`, { type: "string" as const }])),
  },
});

// The commit from git, else from BUNSTR_COMMIT (a build without .git, e.g. the Dockerfile's).
const gitCommit = Bun.which("git")
  ? Bun.spawnSync(["git", "rev-parse", "--short", "HEAD"], { stderr: "ignore" }).stdout.toString().trim()
  : "";
const commit = gitCommit || (process.env.BUNSTR_COMMIT ?? "").trim();
const version = commit ? `${pkg.version}+${commit}` : pkg.version;
/** The admin and join pages' scripts, the same for every target. */
const adminScript = await bundleAdminScript();
const joinScript = await bundleJoinScript();

/** Linux with musl (Alpine) rather than glibc: Bun reports glibc's version on glibc only. */
const hostIsMusl =
  process.platform === "linux" &&
  !(process.report?.getReport?.() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header?.glibcVersionRuntime;

/**
 * Does `target` (undefined = this machine) run on this machine's OS, CPU and C library? A
 * bun-linux-*-musl target (Alpine) cannot load a glibc host's libsecp256k1, nor the reverse.
 */
function runsHere(target: string | undefined): boolean {
  return !target || (target.startsWith(`bun-${process.platform}-${process.arch}`) && target.endsWith("-musl") === hostIsMusl);
}

/** The host's libsecp256k1, when the binary will run on this OS, CPU and C library. */
function hostLibrary(target: string | undefined): string | undefined {
  if (!runsHere(target)) return undefined;
  const dirs =
    process.platform === "darwin"
      ? ["/opt/homebrew/lib", "/usr/local/lib"]
      : [`/usr/lib/${process.arch === "arm64" ? "aarch64" : "x86_64"}-linux-gnu`, "/usr/lib64", "/usr/lib", "/usr/local/lib"];
  const names = process.platform === "darwin" ? ["libsecp256k1.dylib"] : ["libsecp256k1.so.2", "libsecp256k1.so.1", "libsecp256k1.so"];
  for (const dir of dirs) for (const name of names) if (existsSync(join(dir, name))) return join(dir, name);
  return undefined;
}

/** "linux-x64" / "linux-arm64" / "darwin-arm64" / … for a library file, from its ELF or Mach-O header. */
function libraryPlatform(path: string): string {
  const b = readFileSync(path).subarray(0, 20);
  if (b[0] === 0x7f && b[1] === 0x45 && b[2] === 0x4c && b[3] === 0x46) {
    const machine = b.readUInt16LE(18);
    return `linux-${machine === 0x3e ? "x64" : machine === 0xb7 ? "arm64" : `elf-machine-${machine}`}`;
  }
  if (b.readUInt32LE(0) === 0xfeedfacf) {
    const cpu = b.readUInt32LE(4);
    return `darwin-${cpu === 0x0100000c ? "arm64" : cpu === 0x01000007 ? "x64" : `cpu-${cpu}`}`;
  }
  return "unknown";
}

/** The platform a target string is for ("bun-linux-x64-baseline" -> "linux-x64"). */
function targetPlatform(target: string | undefined): string {
  if (!target) return `${process.platform}-${process.arch}`;
  const [, os, arch] = /^bun-(\w+)-(\w+)/.exec(target) ?? [];
  return `${os}-${arch === "aarch64" ? "arm64" : arch}`;
}

interface Built {
  outfile: string;
  library: string | undefined;
}

async function buildOne(target: Bun.Build.CompileTarget | undefined, outfile: string, library: string | undefined): Promise<Built> {
  if (library) {
    const lib = libraryPlatform(library);
    if (lib !== targetPlatform(target)) throw new Error(`${library} is a ${lib} library, but the target is ${targetPlatform(target)}`);
  }
  const entrypoints = [
    "./src/main.ts",
    "./src/verify/worker.ts",
    "./src/store/sqlite/reader-worker.ts",
    "./src/store/sqlite/writer-worker.ts",
    "./src/store/sqlite/checkpoint-worker.ts",
  ];
  // Staged inside src/ (gitignored): entrypoints outside it would move the binary's module root
  // and with it the paths the workers are found under.
  const staging = mkdtempSync(join("src", "embed-"));
  try {
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
      define: {
        BUNSTR_VERSION: JSON.stringify(version),
        BUNSTR_ADMIN_SCRIPT: JSON.stringify(adminScript),
        BUNSTR_JOIN_SCRIPT: JSON.stringify(joinScript),
      },
      // Keep names so stack traces in an operator's log stay readable without a source map.
      minify: { whitespace: true, syntax: true, identifiers: false },
    });
    if (!result.success) throw new AggregateError(result.logs, `building ${outfile} failed:\n${result.logs.join("\n")}`);
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  const embeddedNote = library ? `libsecp256k1 from ${library} embedded` : "no libsecp256k1 embedded (system library or noble at run time)";
  console.log(`built ${outfile} (bunstr ${version}${target ? `, ${target}` : ""}; ${embeddedNote})`);
  return { outfile, library };
}

/** Debian's libsecp256k1 for `arch`, via packaging/fetch-secp256k1.sh; undefined (with a warning) if that fails. */
function debianLibrary(arch: string): string | undefined {
  if (!Bun.which("apt-get") || !Bun.which("dpkg-deb")) {
    console.warn(`warning: no apt-get/dpkg-deb here to fetch Debian's libsecp256k1 for ${arch}`);
    return undefined;
  }
  const r = Bun.spawnSync(["sh", "packaging/fetch-secp256k1.sh", arch, "dist/secp256k1"], { stderr: "pipe" });
  const path = r.stdout.toString().trim().split("\n").at(-1);
  if (r.exitCode !== 0 || !path || !existsSync(path)) {
    console.warn(`warning: fetching Debian's libsecp256k1 for ${arch} failed:\n${r.stderr.toString().trim()}`);
    return undefined;
  }
  return path;
}

async function release(): Promise<void> {
  const outdir = values.outdir ?? "dist/release";
  const names = (values.only?.split(",").map((s) => s.trim()) ?? Object.keys(RELEASE_TARGETS)) as ReleaseName[];
  for (const name of names)
    if (!(name in RELEASE_TARGETS)) throw new Error(`unknown release target ${name} (${Object.keys(RELEASE_TARGETS).join(", ")})`);
  mkdirSync(outdir, { recursive: true });
  const built: Built[] = [];
  const failed: string[] = [];
  for (const name of names) {
    const { target, debianArch } = RELEASE_TARGETS[name];
    const given = (values as Record<string, string | boolean | undefined>)[`secp256k1-${name}`] as string | undefined;
    let library: string | undefined;
    if (!values["no-secp256k1"]) {
      library = given ?? hostLibrary(target);
      if (!library && debianArch && process.platform === "linux") library = debianLibrary(debianArch);
      if (!library) console.warn(`warning: ${name}: no libsecp256k1 to embed (the binary uses a system library or noble)`);
    }
    try {
      built.push(await buildOne(target, join(outdir, `bunstr-${name}`), library));
    } catch (err) {
      console.error(`error: ${name}: ${err instanceof Error ? err.message : err}`);
      failed.push(name);
    }
  }
  // The format `sha256sum -c SHA256SUMS` reads: "<hex>  <file>", names relative to outdir.
  const sums = built.map(
    ({ outfile }) => `${new Bun.CryptoHasher("sha256").update(readFileSync(outfile)).digest("hex")}  ${basename(outfile)}\n`,
  );
  writeFileSync(join(outdir, "SHA256SUMS"), sums.join(""));
  console.log(`\n${outdir}/SHA256SUMS:`);
  for (const [i, { outfile, library }] of built.entries())
    console.log(
      `  ${sums[i]!.trim()}  ${(statSync(outfile).size / 2 ** 20).toFixed(1)} MiB  ${library ? "libsecp256k1 embedded" : "no libsecp256k1"}`,
    );
  if (failed.length > 0) {
    console.error(`not built: ${failed.join(", ")}`);
    process.exit(1);
  }
}

try {
  if (values.release) await release();
  else {
    const target = values.target as Bun.Build.CompileTarget | undefined;
    const outfile = values.outfile ?? (target ? `dist/bunstr-${target.replace(/^bun-/, "")}` : "dist/bunstr");
    await buildOne(target, outfile, values["no-secp256k1"] ? undefined : (values.secp256k1 ?? hostLibrary(target)));
  }
} catch (err) {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
}
