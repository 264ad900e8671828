// `bunstr config init|check`.
import { ConfigError, loadConfigFile } from "../config/load.ts";
import { parseFlags } from "./args.ts";
import { renderDefaultConfig } from "../config/render.ts";
import { configErrors, configWarnings } from "../config/warnings.ts";

/**
 * `config check [--lenient] FILE`: every problem of the file, one `error: file:line: …` line each,
 * exit 2 if there is any (an unknown key too, unless --lenient); else warnings and `FILE: ok`, exit 0.
 */
async function check(file: string, lenient: boolean): Promise<number> {
  try {
    const { config, ignored, unknown } = await loadConfigFile(file, { lenient });
    const errors = configErrors(config);
    if (errors.length > 0) throw new ConfigError(errors.map((e) => `${file}: ${e}`));
    for (const line of unknown) console.warn(`warning: ${line}`);
    if (ignored.length > 0) console.warn(`warning: ${file}: not used by bunstr: ${ignored.join(", ")}`);
    // The same warnings `serve` prints at start.
    for (const line of configWarnings(config)) console.warn(line.replace(/^warning: /, `warning: ${file}: `));
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    for (const line of err.warnings) console.warn(`warning: ${line}`);
    for (const line of err.problems) console.error(`error: ${line}`);
    return 2;
  }
  console.log(`${file}: ok`);
  return 0;
}

export async function configCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === "init" && rest.length === 0) {
    process.stdout.write(renderDefaultConfig());
    return 0;
  }
  const lenient = rest.includes("--lenient");
  const files = rest.filter((a) => a !== "--lenient");
  const flag = sub === "check" ? files.find((a) => a.startsWith("-")) : undefined;
  if (flag) parseFlags({ args: [flag], options: { lenient: { type: "boolean" } } });
  if (sub === "check" && files.length === 1 && !files[0]!.startsWith("-")) return check(files[0]!, lenient);
  console.error("usage: bunstr config init | bunstr config check [--lenient] FILE");
  return 2;
}
