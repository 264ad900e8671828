// Loads a TOML config against the schema: CLI > file > default.
import { parse, TomlError } from "smol-toml";
import { aliases, defaults, schema, type Config, type KeySpec } from "./schema.ts";

export class ConfigError extends Error {}

export interface Loaded {
  config: Config;
  /** Keys the file set that bunstr does not use (e.g. nostr-rs-relay features we lack). */
  ignored: string[];
}

const sections = schema as unknown as Record<string, Record<string, KeySpec>>;

/** 1-based line of `key = ` inside `[section]`, if it can be found in the text. */
function lineOf(text: string, section: string, key: string): number | undefined {
  const lines = text.split("\n");
  let current = "";
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i]!.trim();
    const header = /^\[\s*([^\]]+?)\s*\]/.exec(l);
    if (header) current = header[1]!;
    else if (current === section && new RegExp(`^"?${key}"?\\s*=`).test(l)) return i + 1;
  }
  return undefined;
}

function describe(spec: KeySpec): string {
  if (spec.oneOf) return `one of ${spec.oneOf.map((v) => JSON.stringify(v)).join(", ")}`;
  const range = spec.min !== undefined || spec.max !== undefined ? ` (${spec.min ?? "…"}..${spec.max ?? "…"})` : "";
  const pattern = spec.patternDoc ? ` of ${spec.patternDoc}` : "";
  const empty = spec.pattern && spec.type === "string" ? " (or empty)" : "";
  return (
    { string: "a string", int: "an integer", bool: "true or false", "string[]": "an array of strings", "int[]": "an array of integers" }[
      spec.type
    ] +
    pattern +
    range +
    empty
  );
}

const inRange = (spec: KeySpec, n: number) => (spec.min === undefined || n >= spec.min) && (spec.max === undefined || n <= spec.max);
const matches = (spec: KeySpec, v: string) => !spec.pattern || spec.pattern.test(v);

/** Checks one value against its spec; returns the value to store, or an error text. */
export function checkValue(spec: KeySpec, v: unknown): { ok: true; value: unknown } | { ok: false } {
  switch (spec.type) {
    case "string":
      if (typeof v !== "string" || (spec.oneOf && !spec.oneOf.includes(v)) || (v !== "" && !matches(spec, v))) return { ok: false };
      return { ok: true, value: v };
    case "int": {
      const n = typeof v === "bigint" ? Number(v) : v;
      if (typeof n !== "number" || !Number.isSafeInteger(n) || !inRange(spec, n)) return { ok: false };
      return { ok: true, value: n };
    }
    case "bool":
      return typeof v === "boolean" ? { ok: true, value: v } : { ok: false };
    case "string[]":
      return Array.isArray(v) && v.every((x) => typeof x === "string" && matches(spec, x)) ? { ok: true, value: [...v] } : { ok: false };
    case "int[]": {
      if (!Array.isArray(v)) return { ok: false };
      const out = v.map((x) => (typeof x === "bigint" ? Number(x) : x));
      return out.every((x) => Number.isSafeInteger(x) && inRange(spec, x)) ? { ok: true, value: out } : { ok: false };
    }
  }
}

/** Parses and validates TOML text. `file` names the source in error messages. */
export function loadConfigText(text: string, file: string): Loaded {
  let doc: Record<string, unknown>;
  try {
    doc = parse(text) as Record<string, unknown>;
  } catch (e) {
    if (e instanceof TomlError) throw new ConfigError(`${file}:${e.line}:${e.column}: ${e.message.split("\n")[0]}`);
    throw e;
  }
  const config = defaults() as unknown as Record<string, Record<string, unknown>>;
  const ignored: string[] = [];
  for (const [section, body] of Object.entries(doc)) {
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      if (section in sections) throw new ConfigError(`${file}: ${section} must be a [${section}] table`);
      ignored.push(section);
      continue;
    }
    for (const [name, value] of Object.entries(body)) {
      const path = aliases[`${section}.${name}`] ?? `${section}.${name}`;
      const [s, k] = path.split(".") as [string, string];
      const spec = sections[s]?.[k];
      if (!spec) {
        ignored.push(`${section}.${name}`);
        continue;
      }
      const checked = checkValue(spec, value);
      if (!checked.ok) {
        const line = lineOf(text, section, name);
        throw new ConfigError(
          `${file}${line ? `:${line}` : ""}: [${section}] ${name} = ${JSON.stringify(value, (_, x) => (typeof x === "bigint" ? Number(x) : x))}: expected ${describe(spec)}`,
        );
      }
      config[s]![k] = checked.value;
    }
  }
  return { config: config as unknown as Config, ignored };
}

export async function loadConfigFile(file: string): Promise<Loaded> {
  const f = Bun.file(file);
  if (!(await f.exists())) throw new ConfigError(`${file}: no such file`);
  return loadConfigText(await f.text(), file);
}

/** Sets `section.key` from a command-line flag value, validated like the file. */
export function override(config: Config, path: string, value: unknown): void {
  const [s, k] = path.split(".") as [string, string];
  const spec = sections[s]?.[k];
  if (!spec) throw new ConfigError(`unknown setting ${path}`);
  const checked = checkValue(spec, value);
  if (!checked.ok) throw new ConfigError(`${path} = ${JSON.stringify(value)}: expected ${describe(spec)}`);
  (config as unknown as Record<string, Record<string, unknown>>)[s]![k] = checked.value;
}
