// Log lines that something outside the operator's control can repeat without end (a full disk
// failing every write, a client sending refused calls in a loop), held to one per kind per
// interval: what is held back is counted and told with the next line of its kind, so the log
// still says how much happened, in a few lines a minute rather than a line per request.

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
