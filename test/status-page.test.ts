// The status page's charts and layout in a real headless Chromium (test/cdp.ts), on a relay of its
// own whose numbers the test knows: time and value axes with labels, the read-out on hover and on
// the arrow keys, the day view's full 24 h with the span before the relay started shown empty, the
// summary and policies in the first screen, the refusals folded, kind names as /admin shows them,
// and /favicon.ico. Skipped (with a message) when Chromium is missing outside CI.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { Browser, CHROMIUM, type Page } from "./cdp.ts";
import { needInCI } from "./ci.ts";
import { shotOf, signingPage } from "./pages-helpers.ts";
import { Client, failOnRelayErrors, now, signer, startTestRelay, type TestRelay } from "./helpers.ts";

const haveChromium = needInCI(
  "status-page.test: Chromium",
  existsSync(CHROMIUM) ? undefined : `${CHROMIUM} is missing (apt-get install chromium)`,
);

/** Accepted kind-1 notes and refused kind-4s (denied by config) the test sends at once. */
const NOTES = 30;
const DENIED = 12;

describe.skipIf(!haveChromium)("the status page's charts in Chromium", () => {
  failOnRelayErrors();
  let relay: TestRelay;
  let browser: Browser | undefined;
  let page: Page;
  let base: string;
  let client: Client;
  /** The sample (status.json, the hour's ring) that counted the notes: its time and per-minute rate. */
  let bucket: { t: number; rate: number };

  beforeAll(async () => {
    relay = await startTestRelay({ info: { name: "Charts relay" }, authorization: { kind_denylist: [4] } });
    base = relay.url.replace(/^ws/, "http").replace(/\/$/, "");
    client = await Client.connect(relay.url);
    const author = signer();
    const t = now();
    const sent = await Promise.all([
      ...Array.from({ length: NOTES }, (_, i) => client.publish(author.sign({ kind: 1, content: `note ${i}`, created_at: t - i }))),
      ...Array.from({ length: DENIED }, (_, i) => client.publish(author.sign({ kind: 4, content: `dm ${i}`, created_at: t - i }))),
    ]);
    expect(sent.filter((ok) => ok[2]).length).toBe(NOTES);
    // The relay samples every 10 s: wait until the notes are in a sample of the ring, not only in
    // the interval so far.
    for (;;) {
      const s: any = await (await fetch(`${base}/status.json`)).json();
      const { t: times, values } = s.series["10s"];
      // Each stored sample's rate times its interval is the notes it counted (the last point is the interval so far).
      const counted = times.slice(1, -1).map((at: number, k: number) => (values.accepted[k + 1] * (at - times[k])) / 60_000);
      if (counted.reduce((a: number, b: number) => a + b, 0) >= NOTES - 0.5) {
        // The notes went out in a few ms: one sample has them all (or, when a sample fell between, most).
        const k = counted.indexOf(Math.max(...counted)) + 1;
        bucket = { t: times[k], rate: values.accepted[k] };
        expect(counted.reduce((a: number, b: number) => a + b, 0)).toBeCloseTo(NOTES, 0);
        break;
      }
      await Bun.sleep(500);
    }
    browser = await Browser.launch();
    page = await signingPage(browser, () => signer());
    await page.send("Emulation.setDeviceMetricsOverride", { width: 1280, height: 800, deviceScaleFactor: 1, mobile: false });
    await page.goto(`${base}/`);
    await page.waitFor(`document.getElementById("charts").dataset.updated`);
  }, 60_000);

  afterAll(async () => {
    client?.close();
    await browser?.close();
    await relay?.stop();
  });

  /** The tick labels of a chart: text, and the time or value each stands for. */
  const ticks = (id: string) =>
    page.evaluate<{ x: { text: string; t: number }[]; y: { text: string; v: number }[]; from: number; to: number; unit: string }>(`(() => {
      const svg = document.getElementById(${JSON.stringify(id)});
      return {
        x: [...svg.querySelectorAll("text.tick-x")].map((e) => ({ text: e.textContent, t: Number(e.dataset.t) })),
        y: [...svg.querySelectorAll("text.tick-y")].map((e) => ({ text: e.textContent, v: Number(e.dataset.v) })),
        from: Number(svg.dataset.from), to: Number(svg.dataset.to),
        unit: svg.querySelector("text.unit")?.textContent ?? "",
      };
    })()`);

  test("the last hour: a time axis of local times every 10 minutes across 60 minutes, a value axis of round numbers with its unit", async () => {
    const a = await ticks("chart-accepted");
    expect(a.to - a.from).toBe(3_600_000);
    expect(a.x.length).toBeGreaterThanOrEqual(5);
    expect(a.x.length).toBeLessThanOrEqual(7);
    const offset = await page.evaluate<number>(`new Date().getTimezoneOffset()`);
    for (const { text, t } of a.x) {
      expect(t).toBeGreaterThanOrEqual(a.from);
      expect(t).toBeLessThanOrEqual(a.to);
      // On the local clock's tens of minutes, labelled as that clock reads.
      expect((t - offset * 60_000) % 600_000).toBe(0);
      const local = new Date(t - offset * 60_000);
      expect(text).toBe(`${String(local.getUTCHours()).padStart(2, "0")}:${String(local.getUTCMinutes()).padStart(2, "0")}`);
    }
    // 0 up to a round number at or above the largest rate (the notes' bucket), 1/2/5 apart.
    expect(a.y[0]).toEqual({ text: "0", v: 0 });
    expect(a.y.length).toBeGreaterThanOrEqual(3);
    expect(a.y.at(-1)!.v).toBeGreaterThanOrEqual(bucket.rate);
    expect(a.y.at(-2)!.v).toBeLessThan(bucket.rate);
    expect(a.unit).toBe("events/min");
    // Counts of things (one or two connections here) have whole ticks: no "0.5" connections.
    const conns = await ticks("chart-connections");
    expect(conns.y.length).toBeGreaterThanOrEqual(2);
    expect(conns.y.every((y) => Number.isInteger(y.v))).toBe(true);
    // The database chart's ticks read as sizes.
    expect((await ticks("chart-db")).y.at(-1)!.text).toMatch(/^\d+(\.\d)? (B|kB|MB|GB)$/);
    // Each chart has a legend in its series' colours.
    const legend = await page.evaluate<string[]>(
      `[...document.querySelectorAll("#chart-refused ~ .legend span")].map((s) => s.textContent)`,
    );
    expect(legend).toEqual(["blocked"]);
  });

  test("hovering shows the time and the value of the sample under the pointer; the arrow keys move it; the pixels change", async () => {
    const box = await page.evaluate<any>(`(() => {
      const svg = document.getElementById("chart-accepted");
      svg.scrollIntoView({ block: "center" });
      const r = svg.getBoundingClientRect();
      const [left, right] = svg.dataset.plot.split(",").map(Number);
      return { x: r.x, y: r.y, width: r.width, height: r.height, left, right, from: Number(svg.dataset.from), to: Number(svg.dataset.to) };
    })()`);
    const before = await shotOf(page, "chart-accepted");
    const x = box.x + box.left + ((bucket.t - box.from) / (box.to - box.from)) * (box.right - box.left);
    await page.send("Input.dispatchMouseEvent", { type: "mouseMoved", x, y: box.y + box.height / 2 });
    const tip = () =>
      page.waitFor<{ t: number; time: string; rows: string[] }>(`(() => {
        const tip = document.querySelector("#chart-accepted ~ .tip");
        return tip && !tip.hidden && { t: Number(tip.dataset.t), time: tip.querySelector("b").textContent, rows: [...tip.querySelectorAll(".row")].map((r) => r.textContent) };
      })()`);
    // An hour of 10 s samples over ~350 px: about one a pixel; the pointer finds the one under it or its neighbour.
    const json: any = await (await fetch(`${base}/status.json`)).json();
    const valueAt = (t: number) => json.series["10s"].values.accepted[json.series["10s"].t.indexOf(t)];
    const shown = await tip();
    expect(Math.abs(shown.t - bucket.t)).toBeLessThanOrEqual(10_500);
    expect(shown.time).toBe(
      await page.evaluate(
        `new Date(${shown.t}).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" })`,
      ),
    );
    // A stored sample reads as the relay stored it; the interval so far (the page's own last point) as a rate.
    const stored = valueAt(shown.t);
    if (stored === undefined) expect(shown.rows).toEqual([expect.stringMatching(/^accepted: \d+(\.\d)? events\/min$/)]);
    else expect(shown.rows).toEqual([`accepted: ${Math.round(stored * 10) / 10} events/min`]);
    expect(await page.evaluate(`document.querySelector("#chart-accepted .readout").getAttribute("visibility")`)).toBe("visible");
    const hovered = await shotOf(page, "chart-accepted");
    expect(hovered).not.toBe(before);

    // Keyboard: focused, ← → step one sample, to the notes' own; End goes to the newest.
    await page.evaluate(`document.getElementById("chart-accepted").focus()`);
    const key = (key: string, code: number) =>
      Promise.all(
        (["keyDown", "keyUp"] as const).map((type) =>
          page.send("Input.dispatchKeyEvent", { type, key, code: key, windowsVirtualKeyCode: code }),
        ),
      );
    let at = shown.t;
    for (let n = 0; n < 3 && at !== bucket.t; n++) {
      await key(at > bucket.t ? "ArrowLeft" : "ArrowRight", at > bucket.t ? 37 : 39);
      at = await page.waitFor<number>(
        `(() => { const t = Number(document.querySelector("#chart-accepted ~ .tip").dataset.t); return t !== ${at} && t; })()`,
      );
    }
    expect(at).toBe(bucket.t);
    // NOTES events in a ~10 s sample: about NOTES × 6 per minute (half that at least, had a sample fallen between), as the relay computed it.
    const rate = Math.round(bucket.rate * 10) / 10;
    expect((await tip()).rows).toEqual([`accepted: ${rate} events/min`]);
    expect(rate).toBeGreaterThan(NOTES * 6 * 0.4);
    await key("End", 35);
    expect((await tip()).t).toBeGreaterThan(bucket.t);
    await page.send("Input.dispatchMouseEvent", { type: "mouseMoved", x: 5, y: 5 });
    await page.evaluate(`document.activeElement.blur()`);
    expect(await page.evaluate(`document.querySelector("#chart-accepted ~ .tip").hidden`)).toBe(true);
  });

  test("the last day spans 24 hours, every 3 hours labelled; the time before the relay started is an empty span, not a stretched line", async () => {
    await page.evaluate(`document.querySelector('button[data-range="1m"]').click()`);
    await page.waitFor(
      `document.getElementById("chart-accepted").dataset.to - document.getElementById("chart-accepted").dataset.from === 86400000`,
    );
    const a = await ticks("chart-accepted");
    expect(a.x.length).toBeGreaterThanOrEqual(6);
    expect(a.x[1]!.t - a.x[0]!.t).toBe(3 * 3_600_000);
    const shown = await page.evaluate<any>(`(() => {
      const svg = document.getElementById("chart-accepted");
      const [left, right] = svg.dataset.plot.split(",").map(Number);
      const gap = svg.querySelector("rect.nodata");
      const xs = [...svg.querySelector("path").getAttribute("d").matchAll(/[ML]([\\d.]+),/g)].map((m) => Number(m[1]));
      return { left, right, gapX: Number(gap.getAttribute("x")), gapWidth: Number(gap.getAttribute("width")),
        label: svg.querySelector("text.nodata-label")?.textContent, firstX: Math.min(...xs) };
    })()`);
    // The relay has been up for seconds of the day: the empty span covers almost all the plot,
    // and the line starts at its right edge.
    expect(shown.gapX).toBe(shown.left);
    expect(shown.gapWidth).toBeGreaterThan((shown.right - shown.left) * 0.98);
    expect(shown.firstX).toBeGreaterThan(shown.right - (shown.right - shown.left) * 0.02);
    expect(shown.label).toStartWith("no data: relay started ");
    await page.evaluate(`document.querySelector('button[data-range="10s"]').click()`);
  });

  test("the summary and the policies in force are in the first screen at 1280×800, with links to every section", async () => {
    await page.evaluate(`scrollTo(0, 0)`);
    const tops = await page.evaluate<Record<string, number>>(
      `Object.fromEntries(["summary", "policies-in-force", "activity"].map((id) => [id, document.getElementById(id).getBoundingClientRect().top]))`,
    );
    for (const top of Object.values(tops)) expect(top).toBeLessThan(800);
    const links = await page.evaluate<string[]>(`[...document.querySelectorAll("nav a")].map((a) => a.getAttribute("href"))`);
    expect(links.length).toBeGreaterThanOrEqual(5);
    for (const href of links) expect(await page.evaluate(`!!document.querySelector(${JSON.stringify(href)})`)).toBe(true);
    // The refusals: the newest ten, the rest one click away.
    expect(await page.evaluate(`document.querySelectorAll("#refusals tbody tr").length`)).toBe(10);
    await page.evaluate(`document.getElementById("refusals-all").click()`);
    expect(await page.evaluate(`document.querySelectorAll("#refusals tbody tr").length`)).toBe(DENIED);
    expect(await page.evaluate(`window.__csp`)).toEqual([]);
  });

  test("kinds read the same on the status page and in /admin", async () => {
    const onStatus = await page.evaluate<string[]>(
      `[...document.querySelectorAll("#top-kinds tbody tr")].map((r) => r.cells[0].textContent)`,
    );
    expect(onStatus).toEqual(["1 · note"]);
    expect(await page.evaluate(`document.querySelector("#refusals tbody tr").cells[1].textContent`)).toBe("4 · DM");
    await page.goto(`${base}/admin`);
    const inAdmin = await page.waitFor<string>(`document.querySelector("#events tbody td.kind")?.textContent`);
    expect(inAdmin).toBe(onStatus[0]!);
  });

  test("a relay that stopped sampling for an hour (asleep, stopped) shows that hour empty in the day view, the line broken around it", async () => {
    // The page's status.json answered by the browser itself: six hours up, the hour 3 h ago missing.
    const t0 = Date.now();
    const json = syntheticStatus(t0, 6 * 3_600_000, [t0 - 3 * 3_600_000, t0 - 2 * 3_600_000]);
    const other = await browser!.newPage();
    try {
      await other.send("Emulation.setDeviceMetricsOverride", { width: 1280, height: 800, deviceScaleFactor: 1, mobile: false });
      await other.send("Fetch.enable", { patterns: [{ urlPattern: "*status.json*" }] });
      other.on("Fetch.requestPaused", (p) => {
        void other.send("Fetch.fulfillRequest", {
          requestId: p.requestId,
          responseCode: 200,
          responseHeaders: [{ name: "Content-Type", value: "application/json" }],
          body: Buffer.from(JSON.stringify(json)).toString("base64"),
        });
      });
      await other.goto(`${base}/`);
      await other.waitFor(`document.getElementById("charts").dataset.updated === "${t0}"`);
      await other.evaluate(`document.querySelector('button[data-range="1m"]').click()`);
      const shown = await other.evaluate<any>(`(() => {
        const svg = document.getElementById("chart-accepted");
        return { gaps: [...svg.querySelectorAll("rect.nodata")].map((r) => [Number(r.dataset.from), Number(r.dataset.to)]),
          labels: [...svg.querySelectorAll("text.nodata-label")].map((t) => t.textContent),
          moves: (svg.querySelector("path").getAttribute("d").match(/M/g) ?? []).length, span: svg.dataset.to - svg.dataset.from };
      })()`);
      expect(shown.span).toBe(86_400_000);
      // Before the start (18 h), and the missing hour between the samples on either side of it.
      expect(shown.gaps).toHaveLength(2);
      expect(shown.gaps[0]).toEqual([t0 - 86_400_000, json.series["1m"].t[0]]);
      expect(shown.gaps[1][0]).toBeLessThanOrEqual(t0 - 3 * 3_600_000);
      expect(shown.gaps[1][1]).toBeGreaterThanOrEqual(t0 - 2 * 3_600_000);
      expect(shown.gaps[1][1] - shown.gaps[1][0]).toBeLessThanOrEqual(3_600_000 + 2 * 60_000);
      // The long span says why; the hour, ~15 px wide, is too narrow for words.
      expect(shown.labels).toEqual([expect.stringMatching(/^no data: relay started \d\d:\d\d$/)]);
      // Two runs of line, not one drawn across the hour.
      expect(shown.moves).toBe(2);
    } finally {
      await other.send("Page.close").catch(() => {});
    }
  });

  test("at 640 px (1280 at 200 % zoom) and 390 px each chart is drawn to its own width from the first update; labels and the read-out stay inside", async () => {
    for (const width of [640, 390]) {
      const narrow = await browser!.newPage();
      try {
        await narrow.send("Emulation.setDeviceMetricsOverride", { width, height: 900, deviceScaleFactor: 1, mobile: width < 500 });
        await narrow.goto(`${base}/`);
        await narrow.waitFor(`document.getElementById("charts").dataset.updated`);
        // Within a moment, not at the next update 5 s later (before: drawn 499 px wide into 595 at 640, letterboxed).
        const fit = await narrow.waitFor<any[]>(
          `(() => { const all = [...document.querySelectorAll(".charts svg")].map((svg) => ({ id: svg.id,
            drawn: Number(svg.getAttribute("viewBox").split(" ")[2]), box: Math.round(svg.getBoundingClientRect().width) }));
            return all.every((c) => Math.abs(c.drawn - c.box) <= 1) && all; })()`,
          2000,
        );
        expect(fit).toHaveLength(6);
        // Nothing scrolls the page sideways.
        expect(await narrow.evaluate(`document.scrollingElement.scrollWidth - document.scrollingElement.clientWidth`)).toBe(0);
        // Every label inside its chart's box; the read-out at the right edge inside the figure.
        const outside = await narrow.evaluate<string[]>(`[...document.querySelectorAll(".charts svg")].flatMap((svg) => {
          const b = svg.getBoundingClientRect();
          return [...svg.querySelectorAll("text")].filter((t) => { const r = t.getBoundingClientRect(); return r.left < b.left || r.right > b.right; })
            .map((t) => svg.id + ": " + t.textContent); })`);
        expect(outside).toEqual([]);
        const box = await narrow.evaluate<any>(`(() => { const svg = document.getElementById("chart-accepted"); svg.scrollIntoView();
          const r = svg.getBoundingClientRect(); return { x: r.right - 3, y: r.top + r.height / 2 }; })()`);
        await narrow.send("Input.dispatchMouseEvent", { type: "mouseMoved", x: box.x, y: box.y });
        const tip =
          await narrow.waitFor<any>(`(() => { const t = document.querySelector("#chart-accepted").closest("figure").querySelector(".tip");
          if (t.hidden) return false; const r = t.getBoundingClientRect(), f = t.parentElement.getBoundingClientRect();
          return { left: r.left >= f.left, right: r.right <= f.right }; })()`);
        expect(tip).toEqual({ left: true, right: true });
      } finally {
        await narrow.send("Page.close").catch(() => {});
      }
    }
  });

  test("/favicon.ico: an image, cached, linked from the pages", async () => {
    const res = await fetch(`${base}/favicon.ico`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toStartWith("image/");
    expect(res.headers.get("cache-control")).toMatch(/max-age=\d{4,}/);
    expect(await res.text()).toStartWith("<svg");
    expect((await fetch(`${base}/favicon.ico`, { method: "POST" })).status).toBe(405);
    for (const path of ["/", "/admin"]) {
      await page.goto(`${base}${path}`);
      expect(await page.evaluate(`document.querySelector('link[rel="icon"]').href`)).toBe(`${base}/favicon.ico`);
    }
    // The browser draws it: an <img> of it loads (the status page's CSP allows images from itself).
    await page.goto(`${base}/`);
    expect(
      await page.evaluate(
        `new Promise((ok) => { const i = new Image(); i.onload = () => ok(i.naturalWidth); i.onerror = () => ok(0); i.src = "/favicon.ico"; })`,
      ),
    ).toBeGreaterThan(0);
    expect(await page.evaluate(`window.__csp`)).toEqual([]);
  });
});

/**
 * A status.json as the relay would serve it, up for `upMs` until `now`, with no sample in `gap`:
 * a rate that rises and falls, a few refusals, the gauges growing.
 */
function syntheticStatus(now: number, upMs: number, gap: [number, number]) {
  const series = (intervalMs: number, windowMs: number) => {
    const t: number[] = [];
    for (let at = Math.max(now - upMs, now - windowMs); at < now; at += intervalMs) if (at < gap[0] || at > gap[1]) t.push(at);
    t.push(now);
    const wave = (k: number, scale: number) => Math.round((1 + Math.sin(k / 40)) * scale * 100) / 100;
    return {
      interval_s: intervalMs / 1000,
      t,
      values: {
        accepted: t.map((_, k) => wave(k, 120)),
        duplicate: t.map(() => 0),
        reqs: t.map((_, k) => wave(k + 20, 30)),
        "refused:invalid": t.map((_, k) => (k % 7 === 0 ? 3 : 0)),
        "refused:blocked": t.map((_, k) => wave(k + 50, 8)),
        connections: t.map((_, k) => 3 + (k % 5)),
        events_stored: t.map((_, k) => 1000 + k * 90),
        database_bytes: t.map((_, k) => 400_000 + k * 40_000),
      },
    };
  };
  return {
    now,
    started_at: now - upMs,
    history_bytes: 0,
    series: { "10s": series(10_000, 3_600_000), "1m": series(60_000, 86_400_000) },
    top_kinds: [
      { kind: 1, accepted: 5000 },
      { kind: 7, accepted: 1200 },
      { kind: 12345, accepted: 7 },
    ],
    recent_refusals: [{ at: now - 5000, kind: 4, reason: "blocked", message: "blocked: kind 4 is not accepted here" }],
  };
}
