// @ts-check
// The status page's script (status.html), served as it is: the Copy button, and the live charts
// drawn as inline SVG from the relay's status JSON (history.ts), fetched every 5 s. No library:
// the page works offline and within its Content-Security-Policy (connect-src 'self').
(() => {
  document
    .getElementById("copy")
    ?.addEventListener("click", () => navigator.clipboard.writeText(document.getElementById("url")?.textContent ?? ""));

  const SVG = "http://www.w3.org/2000/svg";
  const W = 320;
  const H = 110;
  const PAD = 4;
  const COLORS = ["#c0392b", "#d35400", "#8e44ad", "#2c3e50", "#16a085", "#7f8c8d", "#b7950b", "#1f618d", "#6e2c00", "#117a65"];
  const charts = document.getElementById("charts");
  const jsonPath = charts?.dataset.json;
  /** @type {"10s" | "1m"} */
  let range = "10s";

  /**
   * @typedef {{ interval_s: number, t: number[], values: Record<string, (number | null)[]> }} Series
   * @typedef {{ kind: number, accepted: number }} TopKind
   * @typedef {{ at: number, kind: number | null, reason: string, message: string }} Refusal
   * @typedef {{ now: number, series: Record<"10s" | "1m", Series>, top_kinds: TopKind[], recent_refusals: Refusal[] }} Status
   */

  /** A number in a few characters: 1234567 -> "1.2M". @param {number} n */
  const short = (n) => {
    const a = Math.abs(n);
    if (a >= 1e9) return `${(n / 1e9).toFixed(1)}G`;
    if (a >= 1e6) return `${(n / 1e6).toFixed(1)}M`;
    if (a >= 1e3) return `${(n / 1e3).toFixed(1)}k`;
    return `${Math.round(n * 10) / 10}`;
  };

  /** @param {string} name @param {Record<string, string | number>} attrs */
  const el = (name, attrs) => {
    const e = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    return e;
  };

  /**
   * Draws lines into the chart's SVG, scaled to the largest value; gaps (null) break a line.
   * @param {string} id
   * @param {number[]} t
   * @param {{ name: string, values: (number | null)[] }[]} lines
   */
  function draw(id, t, lines) {
    const svg = document.getElementById(id);
    const figure = svg?.closest("figure");
    if (!svg || !figure) return;
    svg.replaceChildren();
    const t0 = t[0] ?? 0;
    const span = Math.max(1, (t[t.length - 1] ?? 0) - t0);
    let max = 0;
    for (const l of lines) for (const v of l.values) if (v !== null && v > max) max = v;
    const top = max > 0 ? max : 1;
    svg.append(el("line", { x1: PAD, y1: H - PAD, x2: W - PAD, y2: H - PAD, stroke: "#ccc", "stroke-width": 1 }));
    const legend = figure.querySelector(".legend");
    legend?.replaceChildren();
    lines.forEach((line, i) => {
      let d = "";
      let pen = false;
      line.values.forEach((v, j) => {
        if (v === null) return void (pen = false);
        const x = PAD + (((t[j] ?? t0) - t0) / span) * (W - 2 * PAD);
        const y = H - PAD - (v / top) * (H - 2 * PAD);
        d += `${pen ? "L" : "M"}${x.toFixed(1)},${y.toFixed(1)} `;
        pen = true;
      });
      const color = COLORS[i % COLORS.length] ?? "#222";
      if (d)
        svg.append(
          el("path", {
            d: d.trim(),
            fill: "none",
            stroke: lines.length > 1 ? color : "#1f618d",
            "stroke-width": 1.5,
            "data-name": line.name,
          }),
        );
      if (legend && lines.length > 1) {
        const item = document.createElement("span");
        item.textContent = line.name;
        item.style.color = color;
        legend.append(item, " ");
      }
    });
    const last = lines.length === 1 ? lines[0]?.values.at(-1) : undefined;
    const label = figure.querySelector(".now");
    if (label)
      label.textContent = lines.length === 1 ? (last === null || last === undefined ? "unknown" : short(last)) : `max ${short(max)}`;
    svg.dataset.points = String(lines.reduce((n, l) => n + l.values.filter((v) => v !== null).length, 0));
  }

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
    const one = (/** @type {string} */ name) => [{ name, values: v[name] ?? [] }];
    draw("chart-accepted", series.t, one("accepted"));
    const refused = Object.keys(v)
      .filter((k) => k.startsWith("refused:") && (v[k] ?? []).some((x) => x !== null && x > 0))
      .map((k) => ({ name: k.slice("refused:".length), values: v[k] ?? [] }));
    draw("chart-refused", series.t, refused.length > 0 ? refused : one("refused:invalid"));
    draw("chart-reqs", series.t, one("reqs"));
    draw("chart-connections", series.t, one("connections"));
    draw("chart-stored", series.t, one("events_stored"));
    draw("chart-db", series.t, one("database_bytes"));
    table(
      "top-kinds",
      s.top_kinds.map((k) => [`kind ${k.kind}`, k.accepted.toLocaleString("en-US")]),
      "No event accepted yet.",
    );
    table(
      "refusals",
      [...s.recent_refusals]
        .reverse()
        .map((r) => [new Date(r.at).toLocaleTimeString(), r.kind === null ? "unreadable" : `kind ${r.kind}`, r.message]),
      "No refusal yet.",
    );
    const stamp = document.getElementById("charts-updated");
    if (stamp) stamp.textContent = `updated ${new Date(s.now).toLocaleTimeString()}`;
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
  void refresh();
  setInterval(() => void refresh(), 5000);
})();
