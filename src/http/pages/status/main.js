// @ts-check
// The status page's script (status.html), bundled by pages/bundle.ts: the Copy button, the live
// charts (shared/chart.js: axes, honest time spans, a read-out) from the relay's status JSON
// (observe/history.ts), fetched every 5 s, the top kinds and the recent refusals (the first ten,
// the rest behind "Show all"). No library: the page works offline and within its
// Content-Security-Policy (connect-src 'self').
import { drawChart } from "../shared/chart.js";
import { kindText } from "../shared/kinds.js";
import { bytes, short, withUnit } from "../shared/ticks.js";

document
  .getElementById("copy")
  ?.addEventListener("click", () => navigator.clipboard.writeText(document.getElementById("url")?.textContent ?? ""));

const charts = document.getElementById("charts");
const jsonPath = charts?.dataset.json;
/** Rows of the refusals table shown before "Show all". */
const FIRST_REFUSALS = 10;
/** The windows the two rings cover (observe/history.ts): an hour of 10 s samples, a day of minutes. */
const WINDOW_MS = { "10s": 3_600_000, "1m": 86_400_000 };
/** @type {"10s" | "1m"} */
let range = "10s";
let showAllRefusals = false;

/**
 * @typedef {{ interval_s: number, t: number[], values: Record<string, (number | null)[]> }} Series
 * @typedef {{ kind: number, accepted: number }} TopKind
 * @typedef {{ at: number, kind: number | null, reason: string, message: string }} Refusal
 * @typedef {{ now: number, started_at: number, series: Record<"10s" | "1m", Series>, top_kinds: TopKind[], recent_refusals: Refusal[] }} Status
 */

/** What each chart draws: its series (JSON name and legend label; "refused": one per reason seen), unit, number format, and whether it counts whole things. */
const CHARTS =
  /** @type {{ id: string, names: [string, string][] | "refused", unit: string, format: (n: number) => string, whole?: boolean }[]} */ ([
    { id: "chart-accepted", names: [["accepted", "accepted"]], unit: "events/min", format: short },
    { id: "chart-refused", names: "refused", unit: "events/min", format: short },
    { id: "chart-reqs", names: [["reqs", "REQs"]], unit: "REQs/min", format: short },
    { id: "chart-connections", names: [["connections", "open"]], unit: "connections", format: short, whole: true },
    { id: "chart-stored", names: [["events_stored", "stored"]], unit: "events", format: short, whole: true },
    { id: "chart-db", names: [["database_bytes", "database file"]], unit: "", format: bytes },
  ]);

/** Rows of text cells into a table's body. @param {string} id @param {string[][]} rows @param {string} empty */
function table(id, rows, empty) {
  const body = document.querySelector(`#${id} tbody`);
  if (!body) return;
  body.replaceChildren(
    ...(rows.length === 0 ? [[empty]] : rows).map((cells) => {
      const tr = document.createElement("tr");
      for (const c of cells) {
        const td = document.createElement("td");
        td.textContent = c;
        tr.append(td);
      }
      return tr;
    }),
  );
}

/** @param {Status} s */
function render(s) {
  const series = s.series[range];
  const v = series.values;
  const refused = Object.keys(v)
    .filter((k) => k.startsWith("refused:") && (v[k] ?? []).some((x) => x !== null && x > 0))
    .map((k) => ({ name: k.slice("refused:".length), values: v[k] ?? [] }));
  for (const c of CHARTS) {
    const svg = document.getElementById(c.id);
    if (!(svg instanceof SVGSVGElement)) continue;
    const lines =
      c.names === "refused"
        ? refused.length > 0
          ? refused
          : [{ name: "none", values: v["refused:invalid"] ?? [] }]
        : c.names.map(([key, name]) => ({ name, values: v[key] ?? [] }));
    drawChart(svg, {
      t: series.t,
      from: s.now - WINDOW_MS[range],
      to: s.now,
      intervalMs: series.interval_s * 1000,
      lines,
      unit: c.unit,
      format: c.format,
      startedAt: s.started_at,
      whole: c.whole,
    });
    // The caption's number: the value now, or for several lines their sum.
    const now = svg.closest("figure")?.querySelector(".now");
    const last = lines.map((l) => l.values.at(-1));
    if (now)
      now.textContent = last.some((x) => x === null || x === undefined)
        ? "unknown"
        : withUnit(c.format(last.reduce((a, b) => (a ?? 0) + (b ?? 0), 0) ?? 0), c.unit);
  }
  table(
    "top-kinds",
    s.top_kinds.map((k) => [kindText(k.kind), k.accepted.toLocaleString("en-US")]),
    "No event accepted yet.",
  );
  const refusals = [...s.recent_refusals].reverse();
  table(
    "refusals",
    (showAllRefusals ? refusals : refusals.slice(0, FIRST_REFUSALS)).map((r) => [
      new Date(r.at).toLocaleTimeString([], { hourCycle: "h23" }),
      r.kind === null ? "unreadable" : kindText(r.kind),
      r.message,
    ]),
    "No refusal yet.",
  );
  const more = document.getElementById("refusals-all");
  if (more) {
    more.hidden = refusals.length <= FIRST_REFUSALS;
    more.textContent = showAllRefusals ? "Show the first ten" : `Show all ${refusals.length}`;
    more.setAttribute("aria-expanded", String(showAllRefusals));
  }
  const stamp = document.getElementById("charts-updated");
  if (stamp) stamp.textContent = `updated ${new Date(s.now).toLocaleTimeString([], { hourCycle: "h23" })}`;
  if (charts) charts.dataset.updated = String(s.now);
}

/** @type {Status | undefined} */
let lastStatus;
async function refresh() {
  if (!jsonPath) return;
  try {
    const res = await fetch(jsonPath, { cache: "no-store" });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    lastStatus = /** @type {Status} */ (await res.json());
    render(lastStatus);
  } catch (err) {
    const stamp = document.getElementById("charts-updated");
    if (stamp) stamp.textContent = `could not update: ${err instanceof Error ? err.message : String(err)}`;
  }
}

for (const button of document.querySelectorAll("button[data-range]"))
  button.addEventListener("click", () => {
    range = /** @type {HTMLElement} */ (button).dataset.range === "1m" ? "1m" : "10s";
    for (const b of document.querySelectorAll("button[data-range]")) b.setAttribute("aria-pressed", String(b === button));
    if (lastStatus) render(lastStatus);
  });
document.getElementById("refusals-all")?.addEventListener("click", () => {
  showAllRefusals = !showAllRefusals;
  if (lastStatus) render(lastStatus);
});
// The charts are drawn to their width: again when a chart's box changes width. Not only the
// window's resize: the first drawing fills the tables beside the charts, and a scrollbar may come,
// both of which move the charts' width (at 640 px they stood letterboxed, 100 px narrow, until the
// next update 5 s later).
let resized = 0;
const drawnWidth = (/** @type {Element} */ svg) => Number(svg.getAttribute("viewBox")?.split(" ")[2] ?? 0);
const watch = new ResizeObserver((entries) => {
  if (!entries.some((e) => Math.abs(e.target.getBoundingClientRect().width - drawnWidth(e.target)) > 1)) return;
  clearTimeout(resized);
  resized = setTimeout(() => lastStatus && render(lastStatus), 50);
});
for (const c of CHARTS) {
  const svg = document.getElementById(c.id);
  if (svg) watch.observe(svg);
}
void refresh();
setInterval(() => void refresh(), 5000);
