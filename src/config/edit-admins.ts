// `bunstr admin add|remove` (cli/admin.ts) edits [admin] pubkeys in the operator's own TOML file:
// a text edit of that one array (or a new line, or a new table at the end), so every comment,
// blank line and spelling of the rest stays as the operator wrote it. The result is parsed again
// and must differ from the original in that list alone, as intended; anything else (a list written
// as a dotted key or an inline table, a line the edit cannot follow) is refused with the reason, and
// the file is left alone.
import { parse } from "smol-toml";

/** The file cannot be edited safely: nothing was changed; the message says why and what to do. */
export class ConfigEditError extends Error {}

export interface AdminsEdit {
  /** The new text of the file (the same text when nothing changes). */
  text: string;
  /** [admin] pubkeys before and after. */
  before: string[];
  after: string[];
}

const HEADER = /^[ \t]*\[[ \t]*admin[ \t]*\][ \t]*(?:#.*)?$/m;
const ANY_HEADER = /^[ \t]*\[/m;
const PUBKEYS = /^([ \t]*)pubkeys[ \t]*=[ \t]*/m;

function parsed(text: string, what: string): Record<string, unknown> {
  try {
    return parse(text) as Record<string, unknown>;
  } catch (err) {
    throw new ConfigEditError(
      `${what} is not valid TOML (${(err as Error).message.split("\n")[0]}); correct it first (bunstr config check)`,
    );
  }
}

/** The [admin] pubkeys the parsed file lists ([] when none). */
function adminsOf(doc: Record<string, unknown>): string[] {
  const admin = doc.admin;
  if (admin === undefined) return [];
  const pubkeys = (admin as Record<string, unknown>)?.pubkeys;
  if (pubkeys === undefined) return [];
  if (!Array.isArray(pubkeys) || !pubkeys.every((p) => typeof p === "string"))
    throw new ConfigEditError("[admin] pubkeys is not a list of strings; correct it by hand");
  return pubkeys;
}

/**
 * Where a TOML array value starting at `at` (its `[`) ends: the index after its `]`. Strings (basic
 * and literal, one line) and comments are skipped, so a `]` in them does not count.
 */
function arrayEnd(text: string, at: number): number | undefined {
  let depth = 0;
  for (let i = at; i < text.length; i++) {
    const c = text[i]!;
    if (c === "#") {
      const nl = text.indexOf("\n", i);
      i = nl < 0 ? text.length : nl;
    } else if (c === '"' || c === "'") {
      if (text.startsWith(c.repeat(3), i)) return undefined; // multi-line strings: not followed here
      for (i++; i < text.length && text[i] !== c; i++) {
        if (text[i] === "\n") return undefined;
        if (c === '"' && text[i] === "\\") i++;
      }
    } else if (c === "[") depth++;
    else if (c === "]" && --depth === 0) return i + 1;
  }
  return undefined;
}

/** The array with `pk` added before its `]`, in the array's own layout (one line, or one item a line). */
function withAdded(array: string, pk: string): string {
  const inner = array.slice(1, -1);
  if (inner.trim() === "") return `["${pk}"]`;
  if (!inner.includes("\n")) return `[${inner.replace(/[ \t]*,?[ \t]*$/, "")}, "${pk}"]`;
  // One item a line: a new line like the last item's, after it (its comma added if it has none).
  const lines = array.split("\n");
  const closing = lines.length - 1;
  let last = closing - 1;
  while (last > 0 && /^[ \t]*(#.*)?$/.test(lines[last]!)) last--;
  const item = lines[last]!;
  const indent = /^[ \t]*/.exec(item)![0] || "  ";
  if (last === 0) return `${lines[0]!.replace(/[ \t]*$/, "")}\n${indent}"${pk}",\n${lines.slice(1).join("\n")}`;
  const m = /^(.*?)([ \t]*#.*)?$/.exec(item)!;
  const body = m[1]!.replace(/[ \t]*$/, "");
  lines[last] = `${body.endsWith(",") ? body : `${body},`}${m[2] ?? ""}`;
  lines.splice(last + 1, 0, `${indent}"${pk}",`);
  return lines.join("\n");
}

/** The array without `pk`: its line when it stands alone on one, else the item and its comma. */
function withRemoved(array: string, pk: string): string {
  const quoted = new RegExp(`^[ \\t]*["']${pk}["'][ \\t]*,?[ \\t]*(#.*)?\\n`, "m");
  if (quoted.test(array)) return array.replace(quoted, "");
  return array
    .replace(new RegExp(`["']${pk}["'][ \\t]*,[ \\t]*`), "")
    .replace(new RegExp(`,?[ \\t]*["']${pk}["']`), "")
    .replace(/^\[[ \t]+\]$/, "[]");
}

/** The text with [admin] pubkeys changed by `change`, checked by parsing it again. */
function edited(text: string, change: (array: string) => string, wanted: string[]): string {
  const header = HEADER.exec(text);
  if (!header) {
    if (wanted.length === 0) return text;
    // No [admin] table: one at the end (unless the file sets admin another way: refused below).
    const sep = text === "" || text.endsWith("\n\n") ? "" : text.endsWith("\n") ? "\n" : "\n\n";
    return `${text}${sep}[admin]\npubkeys = ${change("[]")}\n`;
  }
  const bodyStart = header.index + header[0].length;
  const next = ANY_HEADER.exec(text.slice(bodyStart));
  const bodyEnd = next ? bodyStart + next.index : text.length;
  const body = text.slice(bodyStart, bodyEnd);
  const key = PUBKEYS.exec(body);
  if (!key) {
    if (wanted.length === 0) return text;
    // After the commented default (`bunstr config init` writes `#pubkeys = []`), else after the header.
    const commented = /^[ \t]*#[ \t]*pubkeys[ \t]*=.*$/m.exec(body);
    const at = commented ? bodyStart + commented.index + commented[0].length : bodyStart;
    return `${text.slice(0, at)}\npubkeys = ${change("[]")}${text.slice(at)}`;
  }
  const valueAt = bodyStart + key.index + key[0].length;
  if (text[valueAt] !== "[") throw new ConfigEditError("[admin] pubkeys is not written as a list ([...]); correct it by hand");
  const end = arrayEnd(text, valueAt);
  if (end === undefined) throw new ConfigEditError("the [admin] pubkeys list could not be followed to its end; edit it by hand");
  return text.slice(0, valueAt) + change(text.slice(valueAt, end)) + text.slice(end);
}

/** [admin] pubkeys as a config file's text lists them. */
export const listAdmins = (text: string, what = "the config file"): string[] => adminsOf(parsed(text, what));

/**
 * Adds (`add`) or removes (`remove`) one hex pubkey in [admin] pubkeys of a config file's text.
 * Throws ConfigEditError when the file cannot be edited safely; `what` names it in messages.
 */
export function editAdmins(text: string, op: "add" | "remove", pk: string, what = "the config file"): AdminsEdit {
  const doc = parsed(text, what);
  const before = adminsOf(doc);
  if (doc.admin !== undefined && !HEADER.test(text))
    throw new ConfigEditError(
      `${what} sets [admin] without an [admin] table (a dotted key or an inline table); edit pubkeys there by hand`,
    );
  const has = before.includes(pk);
  if ((op === "add" && has) || (op === "remove" && !has)) return { text, before, after: before };
  const after = op === "add" ? [...before, pk] : before.filter((p) => p !== pk);
  const next = edited(text, (array) => (op === "add" ? withAdded(array, pk) : withRemoved(array, pk)), after);
  // The check: the edited file says the same as the old one but for this list, which is as wanted.
  const redone = parsed(next, `${what} after the edit`);
  const expected = { ...doc, admin: { ...(doc.admin as object), pubkeys: after } };
  if (!Bun.deepEquals(redone, expected, true))
    throw new ConfigEditError(
      `${what} sets [admin] in a way this command does not edit (a dotted key or an inline table?); edit pubkeys there by hand`,
    );
  return { text: next, before, after };
}
