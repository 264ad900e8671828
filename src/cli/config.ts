// `bunstr config init|check`.
import { loadConfigFile } from "../config/load.ts";
import { renderDefaultConfig } from "../config/render.ts";
import { configWarnings } from "../config/warnings.ts";

export async function configCommand(argv: string[]): Promise<number> {
  const [sub, file] = argv;
  if (sub === "init") {
    process.stdout.write(renderDefaultConfig());
    return 0;
  }
  if (sub === "check" && file) {
    const { config, ignored } = await loadConfigFile(file);
    if (ignored.length > 0) console.warn(`warning: ${file}: not used by bunstr: ${ignored.join(", ")}`);
    // The same warnings `serve` prints at start.
    for (const line of configWarnings(config)) console.warn(line.replace(/^warning: /, `warning: ${file}: `));
    console.log(`${file}: ok`);
    return 0;
  }
  console.error("usage: bunstr config init | bunstr config check FILE");
  return 2;
}
