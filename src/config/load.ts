// Loads a TOML config against the schema: CLI > file > default.
import { parse, TomlError } from "smol-toml";
import { nostrRsRelayAlwaysOn, nostrRsRelayConversions, nostrRsRelayKeys } from "./nostr-rs-relay.ts";
import { scanToml, type Slip } from "./scan.ts";
import { aliases, defaults, schema, type Config, type KeySpec } from "./schema.ts";
import { closest } from "./suggest.ts";

/** A config that cannot be used: every problem found, one line each (`file:line: what`). */
export class ConfigError extends Error {
  readonly problems: string[];
  /**
   * What the same file had that is only a warning (with --lenient, its unknown keys): said
   * beside the errors, or an operator who mends the errors meets them only on the next try.
   */
  readonly warnings: string[];
  constructor(problems: string | string[], warnings: string[] = []) {
    const list = typeof problems === "string" ? [problems] : problems;
    super(list.join("\n"));
    this.problems = list;
    this.warnings = warnings;
  }
}

interface Loaded {
  config: Config;
  /** Keys the file set that bunstr does not use (nostr-rs-relay features we lack). */
  ignored: string[];
  /** With `lenient`: the unknown keys and sections, as warnings (`file:line: …`). */
  unknown: string[];
}

export interface LoadOptions {
  /** Unknown keys and sections are warnings instead of errors. */
  lenient?: boolean;
}

const sections = schema as unknown as Record<string, Record<string, KeySpec>>;

function describe(spec: KeySpec): string {
  if (spec.oneOf) return `one of ${spec.oneOf.map((v) => JSON.stringify(v)).join(", ")}`;
  const range = spec.min !== undefined || spec.max !== undefined ? ` (${spec.min ?? "…"}..${spec.max ?? "…"})` : "";
  const pattern = spec.patternDoc ? ` of ${spec.patternDoc}` : "";
  const empty = spec.pattern && spec.type === "string" ? " (or empty)" : "";
  return (
    {
      string: "a string",
      int: "an integer",
      bool: "true or false",
      "string[]": spec.scalarOk ? "a string or an array of strings" : "an array of strings",
      "int[]": "an array of integers",
    }[spec.type] +
    pattern +
    range +
    empty
  );
}

const inRange = (spec: KeySpec, n: number) => (spec.min === undefined || n >= spec.min) && (spec.max === undefined || n <= spec.max);
const matches = (spec: KeySpec, v: string) => !spec.pattern || spec.pattern.test(v);

/** Checks one value against its spec; returns the value to store, or an error text. */
function checkValue(spec: KeySpec, v: unknown): { ok: true; value: unknown } | { ok: false } {
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
      if (spec.scalarOk && typeof v === "string") return matches(spec, v) ? { ok: true, value: [v] } : { ok: false };
      return Array.isArray(v) && v.every((x) => typeof x === "string" && matches(spec, x)) ? { ok: true, value: [...v] } : { ok: false };
    case "int[]": {
      if (!Array.isArray(v)) return { ok: false };
      const out = v.map((x) => (typeof x === "bigint" ? Number(x) : x));
      return out.every((x) => Number.isSafeInteger(x) && inRange(spec, x)) ? { ok: true, value: out } : { ok: false };
    }
  }
}

interface Problem {
  line?: number;
  column?: number;
  text: string;
  /** An unknown key or section: an error, or with `lenient` a warning. */
  unknown?: boolean;
}

const json = (v: unknown): string => JSON.stringify(v, (_, x) => (typeof x === "bigint" ? Number(x) : x));
const isTable = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const ourKeys = Object.entries(sections).flatMap(([s, keys]) => Object.keys(keys).map((k) => [s, k] as const));
/** The key names a file may use in `section`: ours and nostr-rs-relay's aliases of them. */
const namesIn = (section: string): string[] => [
  ...Object.keys(sections[section] ?? {}),
  ...[...Object.keys(aliases), ...Object.keys(nostrRsRelayConversions), ...nostrRsRelayAlwaysOn]
    .filter((a) => a.startsWith(`${section}.`))
    .map((a) => a.slice(section.length + 1)),
];

/** "; did you mean …?" for an unknown key `name` in `section` (undefined: outside any section). */
function keyHint(section: string | undefined, name: string): string {
  if (section !== undefined) {
    const near = closest(name, namesIn(section)) ?? closest(name, nostrRsRelayKeys[section] ?? []);
    if (near) return `; did you mean "${near}"?`;
  }
  const home = ourKeys.find(([s, k]) => k === name && s !== section);
  if (home) return `; did you mean [${home[0]}] ${name}?`;
  const near = closest(
    name,
    ourKeys.map(([, k]) => k),
  );
  const at = near && ourKeys.find(([, k]) => k === near);
  return at ? `; did you mean [${at[0]}] ${near}?` : " (`bunstr config init` lists every key)";
}

/** "; did you mean "debug"?" for a slip in a value that is one of a few words. */
function valueHint(spec: KeySpec, value: unknown): string {
  if (!spec.oneOf || typeof value !== "string") return "";
  // "warning" for "warn", "err" for "error": a word cut or drawn out is a slip too.
  const v = value.toLowerCase();
  const near =
    closest(value, spec.oneOf) ?? spec.oneOf.find((o) => v.length >= 3 && (v.startsWith(o.toLowerCase()) || o.toLowerCase().startsWith(v)));
  return near ? `; did you mean "${near}"?` : "";
}

function sectionHint(section: string): string {
  const near = closest(section, Object.keys(sections)) ?? closest(section, Object.keys(nostrRsRelayKeys));
  return near ? `; did you mean [${near}]?` : ` (bunstr's sections: ${Object.keys(sections).join(", ")})`;
}

/** Checks each key of the parsed file against the schema into `config`; what is wrong goes to `problems`. */
function checkDoc(
  doc: Record<string, unknown>,
  lines: Map<string, number>,
  config: Record<string, Record<string, unknown>>,
  problems: Problem[],
  ignored: string[],
): void {
  const later: { section: string; name: string; value: unknown; at: number | undefined }[] = [];
  for (const [section, body] of Object.entries(doc)) {
    const line = lines.get(section);
    if (Array.isArray(body) && body.length > 0 && body.every(isTable) && !(section in sections)) {
      problems.push({ line, text: `unknown section [[${section}]]${sectionHint(section)}`, unknown: true });
      continue;
    }
    if (!isTable(body)) {
      if (section in sections) problems.push({ line, text: `${section} must be a [${section}] table` });
      else problems.push({ line, text: `unknown key "${section}" outside any section${keyHint(undefined, section)}`, unknown: true });
      continue;
    }
    if (!(section in sections) && !(section in nostrRsRelayKeys)) {
      problems.push({ line, text: `unknown section [${section}]${sectionHint(section)}`, unknown: true });
      continue;
    }
    for (const [name, value] of Object.entries(body)) {
      const path = aliases[`${section}.${name}`] ?? `${section}.${name}`;
      const [s, k] = path.split(".") as [string, string];
      const spec = sections[s]?.[k];
      const at = lines.get(`${section}.${name}`) ?? line; // in an inline table: the table's line
      if (!spec && nostrRsRelayConversions[path]) {
        later.push({ section, name, value, at });
        continue;
      }
      if (!spec && nostrRsRelayAlwaysOn.includes(path)) {
        if (value === true) continue;
        if (typeof value !== "boolean") problems.push({ line: at, text: `[${section}] ${name} = ${json(value)}: expected true or false` });
        else ignored.push(path);
        continue;
      }
      if (!spec) {
        if (nostrRsRelayKeys[section]?.includes(name)) ignored.push(`${section}.${name}`);
        else problems.push({ line: at, text: `[${section}] unknown key "${name}"${keyHint(section, name)}`, unknown: true });
        continue;
      }
      const checked = checkValue(spec, value);
      if (checked.ok) config[s]![k] = checked.value;
      else problems.push({ line: at, text: `[${section}] ${name} = ${json(value)}: expected ${describe(spec)}${valueHint(spec, value)}` });
    }
  }
  for (const c of later) convertKey(c, config, problems);
}

/** A nostr-rs-relay key with a meaning here in another unit or rule (nostr-rs-relay.ts), applied once the rest of the file is. */
function convertKey(
  c: { section: string; name: string; value: unknown; at: number | undefined },
  config: Record<string, Record<string, unknown>>,
  problems: Problem[],
): void {
  const conv = nostrRsRelayConversions[`${c.section}.${c.name}`]!;
  const [s, k] = conv.to.split(".") as [string, string];
  const spec = sections[s]![k]!;
  const n = typeof c.value === "bigint" ? Number(c.value) : c.value;
  const checked = typeof n === "number" && Number.isFinite(n) && n >= 0 ? checkValue(spec, conv.convert(n, config[s]![k])) : undefined;
  if (checked?.ok) config[s]![k] = checked.value;
  else
    problems.push({
      line: c.at,
      text: `[${c.section}] ${c.name} = ${json(c.value)}: expected a number that gives [${s}] ${k} ${describe(spec)}`,
    });
}

/** A slip in plain words; a value without quotes where a number or list is expected says so instead. */
function explainSlip(slip: Slip): Problem {
  if (!slip.bare) return slip;
  const { section, name, value } = slip.bare;
  const path = aliases[`${section}.${name}`] ?? `${section}.${name}`;
  const [s, k] = path.split(".") as [string, string];
  const spec = sections[s]?.[k];
  if (!spec || spec.type === "string") return slip;
  return { line: slip.line, text: `[${section}] ${name} = ${value}: expected ${describe(spec)}` };
}

/** The parsed file; what cannot be parsed goes to `problems` (every common slip, then what smol-toml says). */
function parseDoc(text: string, problems: Problem[]): { doc?: Record<string, unknown>; lines: Map<string, number> } {
  const scan = scanToml(text);
  const tomlProblem = (e: TomlError): Problem => ({ line: e.line, column: e.column, text: e.message.split("\n")[0]! });
  try {
    return { doc: parse(text) as Record<string, unknown>, lines: scan.lines };
  } catch (e) {
    if (!(e instanceof TomlError)) throw e;
    // The slips are believed only when smol-toml agrees the file is broken.
    if (scan.slips.length === 0) return (problems.push(tomlProblem(e)), { lines: scan.lines });
    problems.push(...scan.slips.map(explainSlip));
  }
  try {
    return { doc: parse(scan.cleaned) as Record<string, unknown>, lines: scan.lines };
  } catch (e) {
    if (!(e instanceof TomlError)) throw e;
    if (!scan.slips.some((s) => s.line === e.line)) problems.push(tomlProblem(e));
    return { lines: scan.lines };
  }
}

const where = (file: string, p: Problem): string =>
  `${file}${p.line ? `:${p.line}` : ""}${p.line && p.column ? `:${p.column}` : ""}: ${p.text}`;

/**
 * Parses and validates TOML text. `file` names the source in messages. Every problem is found in
 * one go: a ConfigError lists them all, in line order. An unknown key or section is an error
 * unless `lenient` (then it is listed in `unknown`). Exported for tests: they build configs from TOML text.
 */
export function loadConfigText(text: string, file: string, opts: LoadOptions = {}): Loaded {
  const problems: Problem[] = [];
  const ignored: string[] = [];
  const config = defaults() as unknown as Record<string, Record<string, unknown>>;
  const { doc, lines } = parseDoc(text, problems);
  if (doc) {
    // A line already reported as a slip is not reported again for its mended value.
    const slipped = new Set(problems.map((p) => p.line));
    const checked: Problem[] = [];
    checkDoc(doc, lines, config, checked, ignored);
    problems.push(...checked.filter((p) => !slipped.has(p.line)));
  }
  problems.sort((a, b) => (a.line ?? Infinity) - (b.line ?? Infinity));
  const errors = problems.filter((p) => !p.unknown || !opts.lenient);
  const unknown = problems.filter((p) => !errors.includes(p)).map((p) => `${where(file, p)} (ignored: --lenient)`);
  if (errors.length > 0) {
    const out = errors.map((p) => where(file, p));
    if (errors.some((p) => p.unknown)) out.push(`${file}: unknown keys are refused; correct them, or pass --lenient to ignore them`);
    throw new ConfigError(out, unknown);
  }
  return { config: config as unknown as Config, ignored, unknown };
}

export async function loadConfigFile(file: string, opts: LoadOptions = {}): Promise<Loaded> {
  const f = Bun.file(file);
  if (!(await f.exists())) throw new ConfigError(`${file}: no such file`);
  return loadConfigText(await f.text(), file, opts);
}

/** Sets `section.key` from a command-line flag value, validated like the file. */
export function override(config: Config, path: string, value: unknown): void {
  const [s, k] = path.split(".") as [string, string];
  const spec = sections[s]?.[k];
  if (!spec) throw new ConfigError(`unknown setting ${path}`);
  const checked = checkValue(spec, value);
  if (!checked.ok) throw new ConfigError(`${path} = ${JSON.stringify(value)}: expected ${describe(spec)}${valueHint(spec, value)}`);
  (config as unknown as Record<string, Record<string, unknown>>)[s]![k] = checked.value;
}
