// Applying a re-read config to the running one. The running Config object is mutated in place,
// key by key, so every holder of it (the relay context, the Bun.serve handlers, the fanout
// closures) sees a reload at once; nothing may copy a config value at start and keep it.
import { schema, type Config, type KeySpec } from "./schema.ts";

interface Change {
  /** `section.key` */
  key: string;
  from: unknown;
  to: unknown;
}

interface ReloadOutcome {
  /** Reloadable keys that changed and now have their new value. */
  applied: Change[];
  /** Keys that changed but are read only at start: they keep their old value. */
  restartRequired: Change[];
}

const sections = schema as unknown as Record<string, Record<string, KeySpec>>;

const same = (a: unknown, b: unknown): boolean =>
  Array.isArray(a) && Array.isArray(b) ? a.length === b.length && a.every((x, i) => x === b[i]) : a === b;

/** Every key whose value differs between two configs, in schema order. Exported for tests (test/reload.test.ts). */
export function diffConfig(a: Config, b: Config): Change[] {
  const out: Change[] = [];
  const x = a as unknown as Record<string, Record<string, unknown>>;
  const y = b as unknown as Record<string, Record<string, unknown>>;
  for (const [section, keys] of Object.entries(sections))
    for (const name of Object.keys(keys)) {
      const from = x[section]![name];
      const to = y[section]![name];
      if (!same(from, to)) out.push({ key: `${section}.${name}`, from, to });
    }
  return out;
}

/**
 * Copies the reloadable keys that changed from `next` into `live` (in place; a changed list is a
 * new array, so sets built from the old one are rebuilt) and lists the others.
 */
export function applyReload(live: Config, next: Config): ReloadOutcome {
  const outcome: ReloadOutcome = { applied: [], restartRequired: [] };
  const target = live as unknown as Record<string, Record<string, unknown>>;
  for (const change of diffConfig(live, next)) {
    const [section, name] = change.key.split(".") as [string, string];
    if (!sections[section]![name]!.reloadable) {
      outcome.restartRequired.push(change);
      continue;
    }
    target[section]![name] = structuredClone(change.to);
    outcome.applied.push(change);
  }
  return outcome;
}

/** A value for a one-line log: lists by size once they get long, long strings cut. */
function show(v: unknown): string {
  if (Array.isArray(v)) return v.length <= 4 ? JSON.stringify(v) : `[${v.length} items]`;
  const s = JSON.stringify(v);
  return s.length <= 60 ? s : `${s.slice(0, 57)}…"`;
}

/** `limits.max_subscriptions 50 -> 10, info.name "a" -> "b"` */
export function describeChanges(changes: readonly Change[]): string {
  // A secret (info.relay_secret_key) is never written to the log.
  const shown = (c: Change, v: unknown) => (/secret/.test(c.key) ? "(hidden)" : show(v));
  return changes.map((c) => `${c.key} ${shown(c, c.from)} -> ${shown(c, c.to)}`).join(", ");
}
