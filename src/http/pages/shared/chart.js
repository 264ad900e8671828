// @ts-check
// A time-series chart as inline SVG, drawn to the pixel width it has: a value axis (round ticks
// from 0, with the unit), a time axis of round local times across the whole window asked for,
// shaded spans where the relay has no sample (not started yet, or not sampling), a legend, and a
// read-out (vertical rule and tooltip: the time and each series' value at the nearest sample) on
// hover and, the chart focused, on the arrow keys. No library: the pages' CSP allows no other
// script, and this is ~250 lines.
import { nearest, niceTicks, runs, timeTicks, withUnit } from "./ticks.js";

const SVG = "http://www.w3.org/2000/svg";
const COLORS = ["#1f618d", "#c0392b", "#d35400", "#8e44ad", "#16a085", "#7f8c8d", "#b7950b", "#2c3e50", "#6e2c00", "#117a65"];
/** Room for the value labels (left), the time labels (bottom) and the unit (top), in px. */
const M = { left: 48, right: 18, top: 18, bottom: 22 };
const HEIGHT = 170;

/**
 * @typedef {{ name: string, values: (number | null)[] }} Line
 * @typedef {{
 *   t: number[], from: number, to: number, intervalMs: number, lines: Line[],
 *   unit: string, format: (n: number) => string, startedAt?: number, whole?: boolean,
 * }} ChartData
 * @typedef {{ data: ChartData, x: (t: number) => number, y: (v: number) => number, shown: number[], at: number | undefined }} State
 */

/** @type {WeakMap<SVGSVGElement, State>} */
const states = new WeakMap();

/** @param {string} name @param {Record<string, string | number>} attrs @param {string} [text] */
function el(name, attrs, text) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

/** A time as the axis labels it: 24-hour local time, or the date at local midnight. @param {number} t */
export function timeLabel(t) {
  const d = new Date(t);
  if (d.getHours() === 0 && d.getMinutes() === 0) return d.toLocaleDateString([], { month: "short", day: "numeric" });
  return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
}

/** A time as the read-out shows it, to the second. @param {number} t */
const readoutTime = (t) => new Date(t).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" });

/** The colour of the i-th of n lines. @param {number} i */
export const colorOf = (i) => COLORS[i % COLORS.length] ?? "#222";

/**
 * Draws `data` into the figure's <svg> (replacing what was there) and its legend; wires the
 * read-out once per chart.
 * @param {SVGSVGElement} svg @param {ChartData} data
 */
export function drawChart(svg, data) {
  const figure = svg.closest("figure");
  const W = Math.max(200, Math.round(svg.getBoundingClientRect().width || 320));
  const H = HEIGHT;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("height", String(H));
  svg.replaceChildren();
  const left = M.left;
  const right = W - M.right;
  const top = M.top;
  const bottom = H - M.bottom;
  const span = Math.max(1, data.to - data.from);
  const x = (/** @type {number} */ t) => left + ((t - data.from) / span) * (right - left);
  // The samples inside the window; the ring may hold one from just before it.
  const inWindow = (/** @type {number} */ i) => (data.t[i] ?? 0) >= data.from && (data.t[i] ?? 0) <= data.to;
  const shown = data.t.map((_, i) => i).filter(inWindow);
  let max = 0;
  for (const l of data.lines) for (const i of shown) max = Math.max(max, l.values[i] ?? 0);
  const yTicks = niceTicks(max, 4, data.whole);
  const yTop = yTicks.at(-1) ?? 1;
  const y = (/** @type {number} */ v) => bottom - (v / yTop) * (bottom - top);

  // Spans without a sample: before the first (the relay was not running, or the ring starts
  // there), and between two samples further apart than the interval allows.
  /** @type {[number, number, "before" | "gap"][]} */
  const gaps = [];
  const first = shown[0];
  const firstT = first === undefined ? data.to : (data.t[first] ?? data.to);
  if (firstT - data.from > data.intervalMs) gaps.push([data.from, firstT, "before"]);
  for (let k = 1; k < shown.length; k++) {
    const a = data.t[shown[k - 1] ?? 0] ?? 0;
    const b = data.t[shown[k] ?? 0] ?? 0;
    if (b - a > data.intervalMs * 1.5) gaps.push([a, b, "gap"]);
  }
  for (const [a, b, why] of gaps) {
    const x0 = x(a);
    const w = Math.max(1, x(b) - x0);
    svg.append(
      el("rect", { class: "nodata", x: x0, y: top, width: w, height: bottom - top, fill: "#f1f1f1", "data-from": a, "data-to": b }),
    );
    if (w > 90) {
      const started = why === "before" && data.startedAt !== undefined && data.startedAt > data.from;
      const label = started ? `no data: relay started ${timeLabel(data.startedAt ?? 0)}` : "no data";
      svg.append(
        el(
          "text",
          { class: "nodata-label", x: x0 + w / 2, y: (top + bottom) / 2, "text-anchor": "middle", fill: "#888", "font-size": 11 },
          label,
        ),
      );
    }
  }

  // The value axis: grid lines at round values, labelled on the left; the unit above.
  for (const v of yTicks) {
    svg.append(el("line", { x1: left, x2: right, y1: y(v), y2: y(v), stroke: v === 0 ? "#999" : "#e4e4e4", "stroke-width": 1 }));
    svg.append(
      el(
        "text",
        { class: "tick-y", x: left - 6, y: y(v) + 4, "text-anchor": "end", "font-size": 11, fill: "#555", "data-v": v },
        data.format(v),
      ),
    );
  }
  if (data.unit) svg.append(el("text", { class: "unit", x: left, y: 11, "font-size": 11, fill: "#555" }, data.unit));

  // The time axis: round local times across the whole window.
  const { ticks } = timeTicks(data.from, data.to, right - left);
  for (const t of ticks) {
    svg.append(el("line", { x1: x(t), x2: x(t), y1: top, y2: bottom + 4, stroke: "#e4e4e4", "stroke-width": 1 }));
    // A label that would run past the picture's right edge is left out (its line stays).
    if (x(t) + 16 > W) continue;
    svg.append(
      el("text", { class: "tick-x", x: x(t), y: H - 6, "text-anchor": "middle", "font-size": 11, fill: "#555", "data-t": t }, timeLabel(t)),
    );
  }

  // The lines: one path per series, broken where a sample is missing; a lone point as a dot.
  data.lines.forEach((line, n) => {
    const color = colorOf(n);
    let d = "";
    for (const run of runs(data.t, line.values, data.intervalMs)) {
      const inside = run.filter(inWindow);
      inside.forEach((i, k) => {
        d += `${k === 0 ? "M" : "L"}${x(data.t[i] ?? 0).toFixed(1)},${y(line.values[i] ?? 0).toFixed(1)} `;
      });
      const only = inside.length === 1 ? inside[0] : undefined;
      if (only !== undefined) svg.append(el("circle", { cx: x(data.t[only] ?? 0), cy: y(line.values[only] ?? 0), r: 2, fill: color }));
    }
    if (d) svg.append(el("path", { d: d.trim(), fill: "none", stroke: color, "stroke-width": 1.5, "data-name": line.name }));
  });

  // The read-out's rule and dots, hidden until asked for.
  const readout = el("g", { class: "readout", visibility: "hidden" });
  readout.append(el("line", { class: "rule", y1: top, y2: bottom, stroke: "#333", "stroke-width": 1, "stroke-dasharray": "3 2" }));
  data.lines.forEach((_, n) => readout.append(el("circle", { r: 3.5, fill: colorOf(n), stroke: "#fff", "stroke-width": 1 })));
  svg.append(readout);

  svg.dataset.from = String(data.from);
  svg.dataset.to = String(data.to);
  svg.dataset.plot = `${left},${right}`;
  svg.dataset.points = String(data.lines.reduce((s, l) => s + shown.filter((i) => l.values[i] != null).length, 0));
  if (figure) legend(figure, data.lines);
  const state = states.get(svg);
  states.set(svg, { data, x, y, shown, at: state?.at });
  if (!state) wire(svg);
  // A read-out showing stays on its time as new samples come.
  if (state?.at !== undefined) show(svg, nearestShown(svg, state.at));
}

/** @param {HTMLElement} figure @param {Line[]} lines */
function legend(figure, lines) {
  let box = figure.querySelector(".legend");
  if (!box) {
    box = document.createElement("div");
    box.className = "legend";
    figure.append(box);
  }
  box.replaceChildren(
    ...lines.map((l, n) => {
      const item = document.createElement("span");
      const swatch = document.createElement("i");
      swatch.style.background = colorOf(n);
      item.append(swatch, l.name);
      return item;
    }),
  );
}

/** The shown sample nearest a time. @param {SVGSVGElement} svg @param {number} t */
function nearestShown(svg, t) {
  const s = states.get(svg);
  if (!s || s.shown.length === 0) return undefined;
  const k = nearest(
    s.shown.map((i) => s.data.t[i] ?? 0),
    t,
  );
  return s.shown[k];
}

/** The read-out at sample `i` (undefined: hide it). @param {SVGSVGElement} svg @param {number | undefined} i */
function show(svg, i) {
  const s = states.get(svg);
  const figure = svg.closest("figure");
  const tip = figure?.querySelector(".tip");
  const readout = svg.querySelector(".readout");
  if (!s || !(tip instanceof HTMLElement) || !readout) return;
  if (i === undefined) {
    s.at = undefined;
    readout.setAttribute("visibility", "hidden");
    tip.hidden = true;
    return;
  }
  const t = s.data.t[i] ?? 0;
  s.at = t;
  const px = s.x(t);
  readout.setAttribute("visibility", "visible");
  const rule = readout.querySelector(".rule");
  rule?.setAttribute("x1", String(px));
  rule?.setAttribute("x2", String(px));
  [...readout.querySelectorAll("circle")].forEach((c, n) => {
    const v = s.data.lines[n]?.values[i];
    c.setAttribute("visibility", v == null ? "hidden" : "visible");
    c.setAttribute("cx", String(px));
    c.setAttribute("cy", String(s.y(v ?? 0)));
  });
  const head = document.createElement("b");
  head.textContent = readoutTime(t);
  tip.replaceChildren(
    head,
    ...s.data.lines.map((l, n) => {
      const row = document.createElement("div");
      row.className = "row";
      row.dataset.name = l.name;
      const swatch = document.createElement("i");
      swatch.style.background = colorOf(n);
      const v = l.values[i];
      row.append(swatch, `${l.name}: ${v == null ? "no data" : withUnit(s.data.format(v), s.data.unit)}`);
      return row;
    }),
  );
  tip.dataset.t = String(t);
  tip.hidden = false;
  // Beside the rule, on the side with room (the figure is the tip's positioned parent).
  const box = svg.getBoundingClientRect();
  const fig = figure?.getBoundingClientRect() ?? box;
  const scale = box.width / (s.x(s.data.to) + M.right);
  const at = box.left - fig.left + px * scale;
  const leftSide = px > (s.x(s.data.to) + M.left) / 2;
  tip.style.left = leftSide ? "" : `${at + 10}px`;
  tip.style.right = leftSide ? `${fig.width - at + 10}px` : "";
  tip.style.top = `${box.top - fig.top + M.top * scale}px`;
}

/** Hover and keyboard: the pointer's nearest sample; focused, ← → step, Home/End, Escape hides. @param {SVGSVGElement} svg */
function wire(svg) {
  const figure = svg.closest("figure");
  if (figure && !figure.querySelector(".tip")) {
    const tip = document.createElement("div");
    tip.className = "tip";
    tip.hidden = true;
    tip.setAttribute("role", "status");
    figure.append(tip);
  }
  svg.setAttribute("tabindex", "0");
  svg.addEventListener("pointermove", (e) => {
    const s = states.get(svg);
    if (!s) return;
    const box = svg.getBoundingClientRect();
    const px = ((e.clientX - box.left) / box.width) * (s.x(s.data.to) + M.right);
    const t = s.data.from + ((px - M.left) / (s.x(s.data.to) - M.left)) * (s.data.to - s.data.from);
    show(svg, nearestShown(svg, t));
  });
  svg.addEventListener("pointerleave", () => document.activeElement !== svg && show(svg, undefined));
  svg.addEventListener("blur", () => show(svg, undefined));
  svg.addEventListener("focus", () => {
    const s = states.get(svg);
    if (s && s.at === undefined) show(svg, s.shown.at(-1));
  });
  svg.addEventListener("keydown", (e) => {
    const s = states.get(svg);
    if (!s || s.shown.length === 0) return;
    const k = s.at === undefined ? s.shown.length - 1 : s.shown.indexOf(nearestShown(svg, s.at) ?? -1);
    const to = { ArrowLeft: k - 1, ArrowRight: k + 1, Home: 0, End: s.shown.length - 1 }[e.key];
    if (e.key === "Escape") return show(svg, undefined);
    if (to === undefined) return;
    e.preventDefault();
    show(svg, s.shown[Math.max(0, Math.min(s.shown.length - 1, to))]);
  });
}
