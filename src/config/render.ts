// Renders the fully commented default config from the schema.
import { stringify } from "smol-toml";
import { schema, type KeySpec } from "./schema.ts";

export function renderDefaultConfig(): string {
  const out = [
    "# bunstr configuration. Every key is shown with its default; uncomment to change.",
    "# Keys marked (reloadable) take effect on SIGHUP (or with watch_config) without a restart; the others are read once at start.",
    "",
  ];
  for (const [section, keys] of Object.entries(schema)) {
    out.push(`[${section}]`);
    for (const [name, spec] of Object.entries(keys as Record<string, KeySpec>)) {
      out.push(`# ${spec.doc}${spec.reloadable ? " (reloadable)" : ""}`);
      out.push(`#${stringify({ [name]: spec.default }).trim()}`);
    }
    out.push("");
  }
  return out.join("\n");
}
