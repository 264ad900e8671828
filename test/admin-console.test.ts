// The operator's first week with /admin (issue 34, items 2 and 6), in a real headless Chromium
// (test/cdp.ts) against a real relay process started from a fresh `bunstr config init` file:
// a key that is not an admin is told so at the top, with the fix, and its actions are off; `bunstr
// admin add` (a subprocess) edits the file and reloads the relay; the same page then works. The
// views are tabs: counts, keys, the URL's hash, a phone's width, and the screenshot's size and colour.
// Skipped (with a message) when Chromium is missing outside CI; in CI that fails (test/ci.ts).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { npubEncode } from "nostr-tools/nip19";
import { runningRelays } from "../src/cli/running.ts";
import { renderDefaultConfig } from "../src/config/render.ts";
import { Browser, CHROMIUM, type Page } from "./cdp.ts";
import { needInCI } from "./ci.ts";
import { Client, signer, type Signer } from "./helpers.ts";
import { pngPixel, signingPage } from "./pages-helpers.ts";
import { freePort } from "./process-helpers.ts";
import { SOURCE, spawnBunstr, type Bunstr } from "./relay-process.ts";

const haveChromium = needInCI(
  "admin-console.test: Chromium",
  existsSync(CHROMIUM) ? undefined : `${CHROMIUM} is missing (apt-get install chromium)`,
);

const OPERATOR = signer();
const js = (v: unknown) => JSON.stringify(v);

describe.skipIf(!haveChromium)("the /admin page for an operator's key", () => {
  let dir: string;
  let file: string;
  let relay: Bunstr;
  let http: string;
  let ws: string;
  let browser: Browser | undefined;
  let page: Page;
  let client: Client;
  let signingAs: Signer = OPERATOR;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "bunstr-admin-console-"));
    file = join(dir, "bunstr.toml");
    // A fresh config as an operator starts from: every key commented, [admin] pubkeys empty.
    writeFileSync(file, renderDefaultConfig());
    const port = freePort();
    relay = await spawnBunstr(
      ["serve", "--config", file, "--host", "127.0.0.1", "--port", String(port), "--data-dir", join(dir, "data")],
      dir,
    );
    http = `http://127.0.0.1:${port}`;
    ws = `ws://127.0.0.1:${port}/`;
    client = await Client.connect(ws);
    const author = signer();
    for (let i = 0; i < 60; i++)
      expect(
        (await client.publish(author.sign({ kind: 1, content: `note ${i}`, created_at: Math.floor(Date.now() / 1000) - 600 + i })))[2],
      ).toBe(true);
    browser = await Browser.launch();
    page = await signingPage(browser, () => signingAs);
    await page.send("Emulation.setDeviceMetricsOverride", { width: 1280, height: 900, deviceScaleFactor: 1, mobile: false });
  }, 60_000);

  afterAll(async () => {
    client?.close();
    await browser?.close();
    relay?.proc.kill("SIGTERM");
    await relay?.proc.exited;
    rmSync(dir, { recursive: true, force: true });
  });

  /** The banner at the top: its state and words. */
  const who = () =>
    page.evaluate<{ state: string; title: string; toml: string; command: string; fix: boolean }>(`({
      state: document.getElementById("who").dataset.state,
      title: document.getElementById("who-title").textContent,
      toml: document.getElementById("who-toml").textContent,
      command: document.getElementById("who-command").textContent,
      fix: !document.getElementById("who-fix").hidden })`);
  /** Buttons that sign a call, enabled and disabled. */
  const actionButtons = () =>
    page.evaluate<{ enabled: number; disabled: number }>(`(() => {
      const all = [...document.querySelectorAll("button:not([data-local]):not([data-signer])")];
      return { enabled: all.filter((b) => !b.disabled).length, disabled: all.filter((b) => b.disabled).length }; })()`);

  test("a key that is not an admin, on a fresh config: the top says so with the exact fix, the actions are off, the tables are not broken; `bunstr admin add` and the reload make it work", async () => {
    await page.goto(`${http}/admin`);
    await page.waitFor(`document.querySelectorAll("#events tbody tr[data-id]").length >= 50`);
    // Before the signer connects: NIP-11 already says the relay has no admin.
    expect(
      await page.waitFor<string>(
        `(() => { const t = document.getElementById("who-title").textContent; return t.includes("no admin") && t; })()`,
      ),
    ).toContain("[admin] pubkeys is empty");
    await page.evaluate(`document.getElementById("connect").click()`);
    await page.waitFor(`document.getElementById("who").dataset.state === "no-admins"`);
    // One statement of it: the result line under the banner does not say it again.
    expect(await page.evaluate(`document.getElementById("result").textContent`)).toBe("Results of your calls show here.");
    const npub = npubEncode(OPERATOR.pubkey);
    const banner = await who();
    expect(banner.title).toBe(
      `This relay has no admin yet: [admin] pubkeys is empty in its config. Your key ${npub} can be its first. The actions are off.`,
    );
    expect(banner.fix).toBe(true);
    expect(banner.toml).toBe(`[admin]\npubkeys = ["${OPERATOR.pubkey}"]`);
    expect(banner.command).toBe(`bunstr admin add ${npub} --config /etc/bunstr/config.toml`);
    // The key in full where it is needed only: the title and the command (npub), the bar and the
    // config line (hex); before, a box repeated both.
    const words = await page.evaluate<string>(`document.getElementById("who").innerText`);
    expect([words.split(npub).length - 1, words.split(OPERATOR.pubkey).length - 1]).toEqual([2, 2]);
    // Not green: the banner is amber, and so are its pixels (a screenshot of its top-left inside corner).
    expect(await page.evaluate(`getComputedStyle(document.getElementById("who")).backgroundColor`)).toBe("rgb(255, 244, 229)");
    const box = await page.evaluate<any>(
      `(() => { const r = document.getElementById("who").getBoundingClientRect(); return { x: r.x, y: r.y, w: r.width }; })()`,
    );
    const corner = await page.send("Page.captureScreenshot", {
      format: "png",
      clip: { x: box.x + 12, y: box.y + 3, width: 4, height: 4, scale: 1 },
    });
    expect(pngPixel(corner.data, 1, 1).rgb).toEqual([255, 244, 229]);
    const edge = await page.send("Page.captureScreenshot", {
      format: "png",
      clip: { x: box.x + 2, y: box.y + 20, width: 2, height: 2, scale: 1 },
    });
    expect(pngPixel(edge.data, 0, 0).rgb).toEqual([192, 86, 33]); // #c05621, the left border
    // Every action is off: forms, table rows, the live view's bans; Connect and Refresh stay.
    const buttons = await actionButtons();
    expect(buttons.enabled).toBe(0);
    expect(buttons.disabled).toBeGreaterThan(100);
    expect(await page.evaluate(`[...document.querySelectorAll("[data-signer]")].every((b) => !b.disabled)`)).toBe(true);
    // The tables say they are an admin's, not "Not loaded: HTTP 401".
    const tables = await page.evaluate<string[]>(
      `[...document.querySelectorAll("table.grid[id]:not(#events):not(#log) tbody")].map((b) => b.textContent)`,
    );
    expect(tables.length).toBeGreaterThan(5);
    for (const t of tables) expect(t).toBe("Shown to admins of this relay only (see the top of the page).");
    expect(await page.evaluate(`document.body.innerText.includes("Not loaded")`)).toBe(false);
    // A click that gets through anyway (a script) sends nothing.
    await page.evaluate(
      `document.getElementById("kind-input").value = "1"; document.getElementById("allow-kind").disabled = false; document.getElementById("allow-kind").click()`,
    );
    expect(
      await page.waitFor(`(() => { const r = document.getElementById("result"); return r.dataset.state === "error" && r.textContent; })()`),
    ).toBe(`allowkind: not sent: ${npub} is not an admin of this relay (see the top of the page)`);

    // The command as the page gives it names the systemd unit's file; a relay started by hand from
    // `config init` output has its own: the error says which file the running relay serves with.
    const wrong = Bun.spawnSync([...SOURCE, "admin", "add", npub, "--config", join(dir, "not-here.toml")], { cwd: dir, stderr: "pipe" });
    expect(wrong.exitCode).toBe(2);
    expect(wrong.stderr.toString()).toContain(`cannot read ${join(dir, "not-here.toml")}`);
    expect(wrong.stderr.toString()).toMatch(/running on this machine serves? with --config /);
    expect(runningRelays()).toContainEqual({ pid: relay.proc.pid, file: realpathSync(file) });
    // The operator runs the command the page gave (with this relay's file): the file keeps its
    // comments, and the running relay reloads it.
    const before = readFileSync(file, "utf8");
    const from = relay.output().length;
    const add = Bun.spawnSync([...SOURCE, "admin", "add", npub, "--config", file], { cwd: dir, stdout: "pipe", stderr: "pipe" });
    const said = add.stdout.toString();
    expect(add.exitCode).toBe(0);
    expect(said).toContain(`added ${npub} (${OPERATOR.pubkey}) to [admin] pubkeys in ${file} (1 admin now)`);
    expect(said).toContain(`sent SIGHUP to the relay (pid ${relay.proc.pid}) running with this file`);
    const after = readFileSync(file, "utf8");
    expect(after.replace(`pubkeys = ["${OPERATOR.pubkey}"]\n`, "")).toBe(before);
    await relay.waitFor(/SIGHUP: config reloaded from .*admin\.pubkeys/, 10_000, from);
    const list = Bun.spawnSync([...SOURCE, "admin", "list", "--config", file], { cwd: dir, stdout: "pipe" });
    expect(list.stdout.toString().trim()).toBe(`${npub} (${OPERATOR.pubkey})`);

    // Refresh lists on the page as it is asks the relay again: an admin now.
    await page.evaluate(`document.getElementById("refresh").click()`);
    await page.waitFor(
      `document.getElementById("who").dataset.state === "admin" && document.getElementById("banned-pubkeys").dataset.state === "ok"`,
    );
    expect(await page.evaluate(`document.getElementById("allow-kind").disabled || document.getElementById("ban-pubkey").disabled`)).toBe(
      false,
    );
    expect((await who()).fix).toBe(false);
    expect(await page.evaluate(`document.getElementById("result").textContent`)).toBe("Results of your calls show here.");

    // The same page, reloaded: an admin now; the actions work.
    await page.goto(`${http}/admin`);
    await page.evaluate(`document.getElementById("connect").click()`);
    await page.waitFor(`document.getElementById("who").dataset.state === "admin"`);
    expect((await who()).title).toBe(`${npub} is an admin of this relay.`);
    await page.waitFor(`document.getElementById("banned-pubkeys").dataset.state === "ok"`);
    expect((await actionButtons()).disabled).toBe(0);
    const spammer = signer();
    await page.evaluate(
      `document.getElementById("pubkey-input").value = ${js(npubEncode(spammer.pubkey))}; document.getElementById("ban-pubkey").click()`,
    );
    // A ban asks first (admin/confirm.js; tested in pages-ban.test.ts).
    await page.waitFor(`document.getElementById("confirm-ban")?.open`);
    await page.evaluate(`document.getElementById("confirm-ban-ok").click()`);
    expect(
      await page.waitFor(
        `(() => { const r = document.getElementById("result"); return r.dataset.state !== "pending" && r.textContent.startsWith("banpubkey") && r.textContent; })()`,
      ),
    ).toBe("banpubkey: ok");
    expect((await client.publish(spammer.sign({ kind: 1, content: "after the ban" })))[3]).toStartWith("blocked:");
  }, 60_000);

  test("the views are tabs with their counts; arrow keys, Home and End move between them; the hash keeps the view through back and reload", async () => {
    signingAs = OPERATOR;
    await page.goto(`${http}/admin`);
    await page.evaluate(`document.getElementById("connect").click()`);
    await page.waitFor(`document.getElementById("blocked-ips").dataset.state === "ok"`);
    const counts = await page.waitFor<Record<string, string | null>>(`(() => {
      const c = Object.fromEntries([...document.querySelectorAll('[role="tab"]:not([hidden])')].map((t) => [t.dataset.tab, t.querySelector(".tab-count")?.textContent ?? null]));
      return Object.values(c).every((n) => n !== "") && c; })()`);
    expect(counts).toEqual({ live: "50", reports: "0", pubkeys: "1", events: "0", kinds: "0", ips: "0", info: null, log: "0" });
    const current = () =>
      page.evaluate<{ tab: string; focused: string; hash: string; shown: string[] }>(`({
        tab: document.querySelector('[role="tab"][aria-selected="true"]').dataset.tab, focused: document.activeElement.id, hash: location.hash,
        shown: [...document.querySelectorAll('[role="tabpanel"]')].filter((p) => p.offsetHeight > 0).map((p) => p.id) })`);
    const key = async (k: string, code: number) => {
      await page.send("Input.dispatchKeyEvent", { type: "keyDown", key: k, code: k, windowsVirtualKeyCode: code });
      await page.send("Input.dispatchKeyEvent", { type: "keyUp", key: k, code: k, windowsVirtualKeyCode: code });
    };
    expect(await current()).toEqual({ tab: "live", focused: "", hash: "", shown: ["live"] });
    await page.evaluate(`document.getElementById("tab-live").focus()`);
    await key("ArrowRight", 39);
    expect(await current()).toEqual({ tab: "reports", focused: "tab-reports", hash: "#/reports", shown: ["panel-reports"] });
    await key("End", 35);
    expect(await current()).toEqual({ tab: "log", focused: "tab-log", hash: "#/log", shown: ["panel-log"] });
    await key("ArrowRight", 39); // wraps to the first
    expect((await current()).tab).toBe("live");
    await key("ArrowLeft", 37);
    expect((await current()).tab).toBe("log");
    await key("Home", 36);
    expect((await current()).tab).toBe("live");
    // The selected tab alone is in the tab order (roving tabindex); its panel follows it.
    expect(await page.evaluate(`[...document.querySelectorAll('[role="tab"]')].filter((t) => t.tabIndex === 0).map((t) => t.id)`)).toEqual([
      "tab-live",
    ]);
    await page.evaluate(`document.getElementById("tab-kinds").click()`);
    await page.evaluate(`document.getElementById("tab-pubkeys").click()`);
    expect((await current()).shown).toEqual(["panel-pubkeys"]);
    await page.evaluate(`history.back()`);
    await page.waitFor(`location.hash === "#/kinds" && document.getElementById("panel-kinds").offsetHeight > 0`);
    // A reload (a fresh load of the URL with its hash) opens the same view.
    const url = await page.evaluate<string>(`location.href`);
    await page.goto("about:blank");
    await page.goto(url);
    expect(await current()).toMatchObject({ tab: "kinds", hash: "#/kinds", shown: ["panel-kinds"] });
    await page.goto("about:blank");
    await page.goto(`${http}/admin#/ips`);
    expect(await current()).toMatchObject({ tab: "ips", hash: "#/ips", shown: ["panel-ips"] });
    // A view's hash names no element: each tab's, as a click puts it in the URL.
    const hashes = await page.evaluate<string[]>(
      `[...document.querySelectorAll('[role="tab"]:not([hidden])')].map((t) => (t.click(), location.hash))`,
    );
    expect(hashes).toEqual(["live", "reports", "pubkeys", "events", "kinds", "ips", "info", "log"].map((n) => "#/" + n));
    expect(await page.evaluate(`${js(hashes)}.filter((h) => document.getElementById(decodeURIComponent(h.slice(1))))`)).toEqual([]);
    // So the URL of a view opens at the top of the page, at a phone's height too (before: /admin#live
    // opened scrolled down to the section #live, #log to the table #log). A bare #name still works.
    await page.send("Emulation.setDeviceMetricsOverride", { width: 390, height: 844, deviceScaleFactor: 1, mobile: true });
    try {
      for (const hash of ["#/live", "#/log"]) {
        await page.goto("about:blank");
        await page.goto(`${http}/admin${hash}`);
        await page.waitFor(`document.querySelectorAll("#events tbody tr[data-id]").length >= 50`);
        // Two frames drawn after the rows came: a scroll to an anchor would have happened by then.
        await page.evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))");
        expect({ hash, tab: (await current()).tab, scrolled: await page.evaluate(`scrollY`) }).toEqual({
          hash,
          tab: hash.slice(2),
          scrolled: 0,
        });
      }
      // A bare #name (typed by hand) opens its view too, and the URL then says it as the page does.
      await page.goto("about:blank");
      await page.goto(`${http}/admin#kinds`);
      expect(await current()).toMatchObject({ tab: "kinds", hash: "#/kinds" });
    } finally {
      await page.send("Emulation.setDeviceMetricsOverride", { width: 1280, height: 900, deviceScaleFactor: 1, mobile: false });
    }
    await page.goto("about:blank");
    await page.goto(`${http}/admin#/ips`);
    // The relay info's fields come filled from NIP-11 (their placeholders hidden): each says what it is.
    expect(
      await page.evaluate(
        `["name-input", "description-input", "icon-input"].map((id) => document.getElementById(id).labels[0]?.textContent.trim())`,
      ),
    ).toEqual(["Name", "Description", "Icon URL"]);
    // A focus ring where the keyboard is.
    await page.evaluate(`document.getElementById("tab-ips").focus()`);
    await key("ArrowLeft", 37);
    expect(await page.evaluate(`getComputedStyle(document.activeElement).outlineStyle`)).toBe("solid");
  }, 30_000);

  test("at 1280 px the default view fits a screen and a half; at 390 px nothing scrolls the page sideways, in any view", async () => {
    await page.goto(`${http}/admin`);
    await page.evaluate(`document.getElementById("connect").click()`);
    await page.waitFor(
      `document.getElementById("who").dataset.state === "admin" && document.querySelectorAll("#events tbody tr[data-id]").length >= 50`,
    );
    const size = await page.evaluate<any>(
      `({ width: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight })`,
    );
    const full = await page.send("Page.captureScreenshot", {
      format: "png",
      clip: { x: 0, y: 0, width: size.width, height: size.height, scale: 1 },
      captureBeyondViewport: true,
    });
    const shot = pngPixel(full.data);
    expect(shot.width).toBe(size.width);
    expect(shot.height).toBeLessThan(1600); // the live view scrolls in its box; the lists are in their tabs (before: ~3,600)
    await page.send("Emulation.setDeviceMetricsOverride", { width: 390, height: 844, deviceScaleFactor: 1, mobile: true });
    try {
      const tabs = await page.evaluate<string[]>(`[...document.querySelectorAll('[role="tab"]:not([hidden])')].map((t) => t.dataset.tab)`);
      for (const tab of tabs) {
        await page.evaluate(`document.getElementById("tab-${tab}").click()`);
        expect({ tab, width: await page.evaluate(`document.scrollingElement.scrollWidth`) }).toEqual({ tab, width: 390 });
      }
      // The live table scrolls in its own box instead.
      await page.evaluate(`document.getElementById("tab-live").click()`);
      expect(
        await page.evaluate(`(() => { const s = document.querySelector("#live .scroll"); return s.scrollWidth > s.clientWidth; })()`),
      ).toBe(true);
    } finally {
      await page.send("Emulation.setDeviceMetricsOverride", { width: 1280, height: 900, deviceScaleFactor: 1, mobile: false });
    }
  }, 30_000);

  test("a browser without a NIP-07 extension is told how to get one", async () => {
    const bare = await browser!.newPage();
    try {
      await bare.goto(`${http}/admin`);
      expect(
        await bare.waitFor<string>(
          `document.getElementById("who").dataset.state === "no-signer" && document.getElementById("who-title").textContent`,
        ),
      ).toStartWith("No NIP-07 signer in this browser: install a Nostr signing extension (nos2x, Alby, \u2026)");
      expect(await bare.evaluate(`document.getElementById("ban-pubkey").disabled`)).toBe(true);
    } finally {
      await bare.send("Page.close").catch(() => {});
    }
  });
});
