// Durations written as nostr-rs-relay writes them ("1 week", "24 hours", "90s"): one number and one
// unit. Its [verified_users] keys take this form, so its config.toml loads as it is.

const UNITS = "s|secs?|seconds?|m|mins?|minutes?|h|hours?|d|days?|w|weeks?";

/** One number and a unit: "1 week", "24 hours", "90s". */
export const DURATION = new RegExp(`^(\\d+)\\s*(${UNITS})$`);

/** A duration of at least 60 s (the schema's pattern for [verified_users] verify_*): seconds 60 and up, or 1+ of a longer unit. */
export const DURATION_60S =
  /^0*(?:(?:[6-9]\d|[1-9]\d{2,})\s*(?:s|secs?|seconds?)|[1-9]\d*\s*(?:m|mins?|minutes?|h|hours?|d|days?|w|weeks?))$/;

const SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 };

/** Seconds in a duration ("1 week" -> 604800); throws on anything else. */
export function durationSeconds(text: string): number {
  const m = DURATION.exec(text.trim());
  if (!m) throw new Error(`not a duration: ${JSON.stringify(text)} (a number and a unit, e.g. "1 week", "24 hours", "90s")`);
  return Number(m[1]) * SECONDS[m[2]![0]!]!;
}
