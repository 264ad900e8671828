// A line scanner of TOML text, beside smol-toml's parser: where each table header and key is (so
// every problem gets its file:line), and the slips people make most often, each in plain words:
// an unterminated string, a string value without quotes, a key or a [section] written twice.
// smol-toml stops at the first syntax error; the scanner finds them all, and the text with those
// lines blanked (`cleaned`, same line numbers) lets the rest of the file be parsed and checked.

export interface Slip {
  /** 1-based line. */
  line: number;
  text: string;
  /** The line as meant, for `cleaned` (else it is blanked). */
  fix?: string;
  /** A value without quotes: where, and as written (the schema may want a number there). */
  bare?: { section: string; name: string; value: string };
}

interface Scan {
  /** 1-based line of the first header or key of each dotted path ("info", "info.name"). */
  lines: Map<string, number>;
  slips: Slip[];
  /** The text with every slipped line mended or blank (a duplicated [section], its whole block). */
  cleaned: string;
}

const BARE = /^[A-Za-z0-9_-]+/;
const UNTERMINATED =
  'unterminated string: the closing quote is missing (a "…" string must end on its line; use """…""" for text over several lines)';

/** The dotted key at the start of `s` (bare or quoted parts): its parts and where it ends, or undefined. */
function readKey(s: string): { parts: string[]; end: number } | undefined {
  const parts: string[] = [];
  let i = 0;
  for (;;) {
    while (s[i] === " " || s[i] === "\t") i++;
    const q = s[i];
    if (q === '"' || q === "'") {
      const end = s.indexOf(q, i + 1);
      if (end < 0) return undefined;
      parts.push(s.slice(i + 1, end));
      i = end + 1;
    } else {
      const m = BARE.exec(s.slice(i));
      if (!m) return undefined;
      parts.push(m[0]);
      i += m[0].length;
    }
    while (s[i] === " " || s[i] === "\t") i++;
    if (s[i] !== ".") return { parts, end: i };
    i++;
  }
}

interface State {
  /** Open brackets of a value that goes on to the next lines. */
  depth: number;
  /** The delimiter of an open multi-line string. */
  multi?: string;
}

/** Scans value text from `i` to the end of the line or a comment; true when a one-line string has no end. */
function scanValue(line: string, i: number, st: State): boolean {
  while (i < line.length) {
    if (st.multi) {
      const end = line.indexOf(st.multi, i);
      if (end < 0) return false;
      i = end + 3;
      while (line[i] === st.multi[0]) i++;
      st.multi = undefined;
      continue;
    }
    const c = line[i]!;
    if (c === "#") return false;
    if (line.startsWith('"""', i) || line.startsWith("'''", i)) {
      st.multi = line.slice(i, i + 3);
      i += 3;
    } else if (c === '"') {
      let j = i + 1;
      while (j < line.length && line[j] !== '"') j += line[j] === "\\" ? 2 : 1;
      if (j >= line.length) return true;
      i = j + 1;
    } else if (c === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) return true;
      i = end + 1;
    } else {
      if (c === "[" || c === "{") st.depth++;
      else if (c === "]" || c === "}") st.depth--;
      i++;
    }
  }
  return false;
}

/** TOML's values that need no quotes or brackets: booleans, numbers, dates and times. */
const SCALARS = [
  /^(true|false|[+-]?(inf|nan))$/,
  /^[+-]?\d[\d_]*(\.\d[\d_]*)?([eE][+-]?\d[\d_]*)?$/,
  /^0(x[\da-fA-F_]+|o[0-7_]+|b[01_]+)$/,
  /^\d{4}-\d{2}-\d{2}([Tt ][\d:.+\-Zz]+)?$/,
  /^\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/,
];

/** The value of `key = value` as written, without its comment. */
const valueText = (rest: string): string => rest.replace(/\s+#.*$/, "").trim();

function scanLines(lines: string[]): { slips: Slip[]; keyLines: Map<string, number>; dupBlocks: number[] } {
  const slips: Slip[] = [];
  const keyLines = new Map<string, number>();
  const dupBlocks: number[] = [];
  const st: State = { depth: 0 };
  let section: string[] = [];
  let shown = "";
  for (let n = 0; n < lines.length; n++) {
    const line = lines[n]!;
    if (st.multi || st.depth > 0) {
      if (scanValue(line, 0, st)) slips.push({ line: n + 1, text: UNTERMINATED });
      continue;
    }
    const t = line.trim();
    if (t === "" || t.startsWith("#")) continue;
    if (t.startsWith("[")) {
      const many = t.startsWith("[[");
      const k = readKey(t.slice(many ? 2 : 1));
      if (!k) continue; // smol-toml says what is wrong
      const close = many ? "]]" : "]";
      section = k.parts;
      if (!t.slice((many ? 2 : 1) + k.end).startsWith(close)) {
        const fix = `${many ? "[[" : "["}${section.map((p) => (/^[A-Za-z0-9_-]+$/.test(p) ? p : JSON.stringify(p))).join(".")}${close}`;
        slips.push({ line: n + 1, text: `${valueText(t)}: a section header needs its closing ${close}`, fix });
      }
      const path = section.join(".");
      shown = `[${path}] `;
      if (many) section = [...section, `[${n}]`]; // each [[x]] is a table of its own
      const first = keyLines.get(path);
      if (!many && first !== undefined && lines[first - 1]!.trim().startsWith("[")) {
        slips.push({ line: n + 1, text: `[${path}] appears twice (first on line ${first}); put its keys under one [${path}]` });
        dupBlocks.push(n);
      } else if (first === undefined) keyLines.set(path, n + 1);
      continue;
    }
    const k = readKey(t);
    if (!k || t[k.end] !== "=") continue;
    const full = [...section, ...k.parts];
    for (let i = 1; i < full.length; i++) if (!keyLines.has(full.slice(0, i).join("."))) keyLines.set(full.slice(0, i).join("."), n + 1);
    const path = full.join(".");
    const name = k.parts.join(".");
    const first = keyLines.get(path);
    if (first !== undefined) slips.push({ line: n + 1, text: `${shown}${name} is set twice (first on line ${first}); keep one` });
    else keyLines.set(path, n + 1);
    const rest = t.slice(k.end + 1).trim();
    const value = valueText(rest);
    if (value === "" || value.startsWith("#")) slips.push({ line: n + 1, text: `${shown}${name} = has no value` });
    else if (/^[\w.:/~-]/.test(value) && !SCALARS.some((re) => re.test(value)))
      slips.push({
        line: n + 1,
        text: `${shown}${name} = ${value}: a string needs quotes: ${name} = ${JSON.stringify(value)}`,
        fix: `${name} = ${JSON.stringify(value)}`,
        bare: { section: section.join("."), name, value },
      });
    else if (scanValue(rest, 0, st)) slips.push({ line: n + 1, text: `${shown}${name}: ${UNTERMINATED}` });
  }
  return { slips, keyLines, dupBlocks };
}

export function scanToml(text: string): Scan {
  const lines = text.split("\n");
  const { slips, keyLines, dupBlocks } = scanLines(lines);
  const mended = new Map(slips.map((s) => [s.line - 1, s.fix ?? ""]));
  for (const start of dupBlocks)
    for (let i = start; i < lines.length && (i === start || !lines[i]!.trim().startsWith("[")); i++) mended.set(i, "");
  const cleaned = lines.map((l, i) => mended.get(i) ?? l).join("\n");
  return { lines: keyLines, slips, cleaned };
}
