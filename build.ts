// Builds the single executable: `bun build.ts [--target bun-linux-x64|bun-linux-arm64|bun-linux-x64-baseline|bun-darwin-arm64] [--outfile dist/bunstr]`.
// Worker scripts are extra entrypoints so they are embedded in the binary too.
import { parseArgs } from "node:util";
import pkg from "./package.json" with { type: "json" };

const { values } = parseArgs({
  args: Bun.argv.slice(2),
  options: { target: { type: "string" }, outfile: { type: "string" } },
});

const target = values.target as Bun.Build.CompileTarget | undefined;
const outfile = values.outfile ?? (target ? `dist/bunstr-${target.replace(/^bun-/, "")}` : "dist/bunstr");
const commit = Bun.spawnSync(["git", "rev-parse", "--short", "HEAD"], { stderr: "ignore" }).stdout.toString().trim();
const version = commit ? `${pkg.version}+${commit}` : pkg.version;

const result = await Bun.build({
  entrypoints: ["./src/main.ts", "./src/relay/verify-worker.ts", "./src/store/reader-worker.ts"],
  compile: target ? { target, outfile } : { outfile },
  define: { BUNSTR_VERSION: JSON.stringify(version) },
  // Keep names so stack traces in an operator's log stay readable without a source map.
  minify: { whitespace: true, syntax: true, identifiers: false },
});

if (!result.success) {
  for (const log of result.logs) console.error(log);
  process.exit(1);
}
console.log(`built ${outfile} (bunstr ${version}${target ? `, ${target}` : ""})`);
