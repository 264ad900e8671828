// `bunstr config init|check`.
import { loadConfigFile } from "../config/load.ts";
import { renderDefaultConfig } from "../config/render.ts";

export async function configCommand(argv: string[]): Promise<number> {
  const [sub, file] = argv;
  if (sub === "init") {
    process.stdout.write(renderDefaultConfig());
    return 0;
  }
  if (sub === "check" && file) {
    const { ignored } = await loadConfigFile(file);
    if (ignored.length > 0) console.warn(`warning: ${file}: not used by bunstr: ${ignored.join(", ")}`);
    console.log(`${file}: ok`);
    return 0;
  }
  console.error("usage: bunstr config init | bunstr config check FILE");
  return 2;
}
