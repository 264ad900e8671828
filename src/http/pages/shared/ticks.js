// @ts-check
// The charts' arithmetic, apart from the DOM (chart.js draws with it; ticks.test.ts checks it): value
// ticks in 1/2/5 steps, time ticks on round local times, and the runs of a series between gaps.

/** The steps a time axis may take, in minutes: a label every 1 min … 12 h. */
const TIME_STEPS_MIN = [1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720];

/**
 * 0 and 2 to 5 round values (1, 2 or 5 times a power of ten apart) from 0 to at least `max`; the
 * last is the axis' top. A series of zeros, or none, still gets an axis: 0 and 1. `whole`: a count
 * of things (connections, events), whose ticks are whole numbers (no "0.5 connections").
 * @param {number} max @param {number} [most] at most this many ticks above 0 @param {boolean} [whole]
 * @returns {number[]}
 */
export function niceTicks(max, most = 4, whole = false) {
  if (!(max > 0) || !Number.isFinite(max)) return [0, 1];
  const rough = max / most;
  const power = 10 ** Math.floor(Math.log10(rough));
  const nice = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= rough) ?? 10 * power;
  const step = whole ? Math.max(1, nice) : nice;
  const ticks = [];
  // Integer multiples of the step, rounded to its precision (0.1 + 0.2 is not 0.3).
  const digits = Math.max(0, -Math.floor(Math.log10(step)));
  for (let i = 0; ; i++) {
    const v = Number((i * step).toFixed(digits));
    ticks.push(v);
    if (v >= max) return ticks;
  }
}

/**
 * Ticks on round local times (every 10 min on the hour's tens, every 3 h from local midnight) from
 * `from` to `to` (ms since the epoch), the step the smallest that leaves `gapPx` between labels
 * drawn over `widthPx`. `offsetMin` is the viewer's zone (minutes east of UTC) at a time, by default
 * the browser's.
 * @param {number} from @param {number} to @param {number} widthPx @param {number} [gapPx]
 * @param {(t: number) => number} [offsetMin]
 * @returns {{ step: number, ticks: number[] }} step in ms
 */
export function timeTicks(from, to, widthPx, gapPx = 40, offsetMin = (t) => -new Date(t).getTimezoneOffset()) {
  const span = Math.max(1, to - from);
  const most = Math.max(1, Math.floor(widthPx / gapPx));
  const minutes = TIME_STEPS_MIN.find((m) => span / (m * 60_000) <= most) ?? TIME_STEPS_MIN.at(-1) ?? 720;
  const step = minutes * 60_000;
  const ticks = [];
  for (let local = Math.ceil((from + offsetMin(from) * 60_000) / step) * step; ; local += step) {
    const t = local - offsetMin(local) * 60_000;
    if (t > to) break;
    if (t >= from) ticks.push(t);
  }
  return { step, ticks };
}

/**
 * The runs of points a line joins: a point whose value is unknown (null), or one further than 1.5
 * intervals from the one before (the relay was not sampling: stopped, or the machine asleep),
 * starts a new run. Each run is a list of indexes into `t`.
 * @param {number[]} t @param {(number | null)[]} values @param {number} intervalMs
 * @returns {number[][]}
 */
export function runs(t, values, intervalMs) {
  /** @type {number[][]} */
  const out = [];
  /** @type {number[] | undefined} */
  let run;
  for (let i = 0; i < t.length; i++) {
    const v = values[i];
    if (v === null || v === undefined) {
      run = undefined;
      continue;
    }
    const prev = t[i - 1];
    if (run && prev !== undefined && (t[i] ?? 0) - prev > intervalMs * 1.5) run = undefined;
    if (!run) out.push((run = []));
    run.push(i);
  }
  return out;
}

/** The index of the time nearest `at` in the sorted `t` (-1 when empty). @param {number[]} t @param {number} at */
export function nearest(t, at) {
  let best = -1;
  let dist = Infinity;
  for (let i = 0; i < t.length; i++) {
    const d = Math.abs((t[i] ?? 0) - at);
    if (d < dist) (best = i), (dist = d);
  }
  return best;
}

/**
 * A number to one decimal over the largest power of 1000 it reaches, with that power's suffix.
 * @param {number} n @param {string[]} suffixes for 1, 1e3, 1e6, 1e9
 */
function scaled(n, suffixes) {
  let p = 0;
  while (p < suffixes.length - 1 && Math.abs(n) >= 1000 ** (p + 1)) p++;
  return `${Math.round((n / 1000 ** p) * 10) / 10}${suffixes[p]}`;
}

/** A number in a few characters: 1234567 -> "1.2M", 0.5 -> "0.5". @param {number} n */
export const short = (n) => scaled(n, ["", "k", "M", "G"]);

/** Bytes in kB, MB, GB (powers of 1000, as on the axis' round ticks). @param {number} n */
export const bytes = (n) => scaled(n, [" B", " kB", " MB", " GB"]);

/**
 * A value's text with its unit: "3 connections", "1 connection", "1 event/min" (the unit's first
 * word in the singular when the text reads 1).
 * @param {string} text the value formatted @param {string} unit
 */
export function withUnit(text, unit) {
  if (!unit) return text;
  return `${text} ${text === "1" ? unit.replace(/^(\w+?)s\b/, "$1") : unit}`;
}
