// The admin page's script: the ES modules of pages/admin/ (one per view, main.js their entry)
// bundled into one classic script, inlined in the page and allowed by its hash (admin-page.ts).
// An IIFE: the modules' names stay in a function scope of their own, out of the page's globals (a
// global named like window.nostr would replace the extension's). build.ts bundles it once and bakes
// the text into the binary; from source the relay bundles it as it starts (a few ms).
import { join } from "node:path";

const DIR = join(import.meta.dir, "admin");
const ENTRY = join(DIR, "main.js");

export async function bundleAdminScript(): Promise<string> {
  // Not minified: the page's source stays readable in the browser, its functions under their names.
  const result = await Bun.build({ entrypoints: [ENTRY], target: "browser", format: "iife" });
  const [output] = result.outputs;
  if (!result.success || !output) throw new AggregateError(result.logs, `bundling ${ENTRY} failed:\n${result.logs.join("\n")}`);
  // `bun --watch` (npm run dev) restarts when a file the relay imported changes; the bundler's
  // reads are not imports, so the modules are imported as text too, for the watcher to see.
  for (const file of new Bun.Glob("*.js").scanSync(DIR)) await import(join(DIR, file), { with: { type: "text" } });
  return output.text();
}
