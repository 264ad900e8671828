// The pages' scripts: the ES modules of pages/admin/ (one per view, main.js their entry), of
// pages/join/ (the /join page, with the QR encoder it imports from node_modules) and of
// pages/status/ (the status page), with what they share from pages/shared/ (charts, kind names),
// each bundled into one classic script, inlined in its page and allowed by its hash (admin-page.ts,
// join-page.ts, landing.ts).
// An IIFE: the modules' names stay in a function scope of their own, out of the page's globals (a
// global named like window.nostr would replace the extension's). build.ts bundles them once and
// bakes the text into the binary; from source the relay bundles them as it starts (a few ms).
import { join } from "node:path";

async function bundle(dir: string): Promise<string> {
  const entry = join(dir, "main.js");
  // Not minified: the page's source stays readable in the browser, its functions under their names.
  const result = await Bun.build({ entrypoints: [entry], target: "browser", format: "iife" });
  const [output] = result.outputs;
  if (!result.success || !output) throw new AggregateError(result.logs, `bundling ${entry} failed:\n${result.logs.join("\n")}`);
  // `bun --watch` (npm run dev) restarts when a file the relay imported changes; the bundler's
  // reads are not imports, so the modules are imported as text too, for the watcher to see.
  for (const d of [dir, join(import.meta.dir, "shared")])
    for (const file of new Bun.Glob("*.js").scanSync(d)) await import(join(d, file), { with: { type: "text" } });
  return output.text();
}

export const bundleAdminScript = (): Promise<string> => bundle(join(import.meta.dir, "admin"));
export const bundleJoinScript = (): Promise<string> => bundle(join(import.meta.dir, "join"));
export const bundleStatusScript = (): Promise<string> => bundle(join(import.meta.dir, "status"));
