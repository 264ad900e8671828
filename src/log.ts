// The relay's log: every line goes through `log` (levels error, warn, info, debug; `[log] level`,
// `--log-level`), as text for a person (info lines as they always were, warnings and errors
// tagged) or as one JSON object a line for journald or Loki (`[log] format = "json"`). It writes
// through console.log / console.warn / console.error, chosen by the level, so stdout holds what
// is routine and stderr what went wrong, as before. Also here: LogLimiter, which holds lines that
// something outside the operator's control can repeat without end (a full disk failing every
// write, a client sending refused calls in a loop) to one per kind per interval: what is held
// back is counted and told with the next line of its kind, so the log still says how much
// happened, in a few lines a minute rather than a line per request.

/** Most severe first: a level shows its own lines and those before it. */
export const LOG_LEVELS = ["error", "warn", "info", "debug"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export const LOG_FORMATS = ["text", "json"] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

const rank: Record<LogLevel, number> = { error: 0, warn: 1, info: 2, debug: 3 };
/** A text line that already says what it is keeps its words; others at warn and error get a tag. */
const TAGGED = /^(warning|error|note):/i;
const TAG: Partial<Record<LogLevel, string>> = { warn: "warning: ", error: "error: " };

const isPlain = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v) && Object.getPrototypeOf(v) === Object.prototype;

/**
 * One JSON line: time, level, msg, then fields. An Error among `rest` becomes `error` (its
 * message) and `stack`; a plain object's members become fields (one named time, level or msg as
 * `_time`…: those three are the line's); anything else is added to msg.
 * Exported for tests.
 */
export function jsonLine(level: LogLevel, msg: string, rest: readonly unknown[], time = new Date()): string {
  const fields: Record<string, unknown> = {};
  let text = msg;
  for (const r of rest) {
    if (r instanceof Error) {
      fields.error = r.message;
      if (r.stack) fields.stack = r.stack;
    } else if (isPlain(r)) for (const [k, v] of Object.entries(r)) fields[k === "time" || k === "level" || k === "msg" ? `_${k}` : k] = v;
    else if (r !== undefined && r !== "") text += ` ${typeof r === "string" ? r : Bun.inspect(r)}`;
  }
  const line = { time: time.toISOString(), level, msg: text, ...fields };
  return JSON.stringify(line, (_, v: unknown) => (typeof v === "bigint" ? Number(v) : v));
}

export class Logger {
  level: LogLevel = "info";
  format: LogFormat = "text";

  /** Sets what a config asks for (at start, and on each reload). */
  configure(opts: { level?: string; format?: string }): void {
    if (opts.level && opts.level in rank) this.level = opts.level as LogLevel;
    if (opts.format === "text" || opts.format === "json") this.format = opts.format;
  }

  /** Whether a line of `level` is written: a caller can skip building a costly debug line. */
  enabled(level: LogLevel): boolean {
    return rank[level] <= rank[this.level];
  }

  /** Something failed and was not recovered (a handler, a write, a thread). */
  error(msg: string, ...rest: unknown[]): void {
    this.write("error", msg, rest);
  }
  /** Something an operator should look at: a setting that does not fit, a limit reached, a refusal. */
  warn(msg: string, ...rest: unknown[]): void {
    this.write("warn", msg, rest);
  }
  /** What a person wants to read: start, stop, reloads, changes of state. */
  info(msg: string, ...rest: unknown[]): void {
    this.write("info", msg, rest);
  }
  /** Routine detail: each admin call that succeeded, periodic figures that did not change. */
  debug(msg: string, ...rest: unknown[]): void {
    this.write("debug", msg, rest);
  }

  private write(level: LogLevel, msg: string, rest: unknown[]): void {
    if (rank[level] > rank[this.level]) return;
    // Looked up at each call: tests replace console's methods to read the lines.
    const out = level === "error" ? console.error : level === "warn" ? console.warn : console.log;
    if (this.format === "json") return out(jsonLine(level, msg, rest));
    const tag = TAG[level];
    out(tag && !TAGGED.test(msg) ? `${tag}${msg}` : msg, ...rest);
  }
}

/** The process's one logger; serve configures it from `[log]` and the flags. */
export const log = new Logger();

/** A kind of line is logged at most once per this interval by default. */
export const LOG_INTERVAL_MS = 60_000;

/** What was held back of one kind since its last line: how many, and the sum of their weights. */
interface Held {
  count: number;
  weight: number;
}

/**
 * Which lines may be logged now, per kind. The kinds must be few and chosen by the caller (an
 * error code, a fixed name), never taken from a client, as each is remembered.
 */
export class LogLimiter {
  private readonly kinds = new Map<string, Held & { loggedAt: number }>();

  constructor(readonly intervalMs = LOG_INTERVAL_MS) {}

  /**
   * A line of `kind` (standing for `weight` things, e.g. the events of a batch): undefined when it
   * is to be held back (it is counted), else what was held back since the last line of its kind,
   * for this line to tell.
   */
  take(kind: string, weight = 1, now = Date.now()): Held | undefined {
    const k = this.kinds.get(kind);
    if (k && now - k.loggedAt < this.intervalMs) {
      k.count++;
      k.weight += weight;
      return undefined;
    }
    this.kinds.set(kind, { loggedAt: now, count: 0, weight: 0 });
    return { count: k?.count ?? 0, weight: k?.weight ?? 0 };
  }

  /** What is held back of each kind (kinds with nothing held left out), now counted as told. */
  takeHeld(): [kind: string, held: Held][] {
    const out: [string, Held][] = [];
    for (const [kind, k] of this.kinds) {
      if (k.count > 0) out.push([kind, { count: k.count, weight: k.weight }]);
      k.count = 0;
      k.weight = 0;
    }
    return out;
  }
}
