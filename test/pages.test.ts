// The relay's web pages in a real headless Chromium, driven over the DevTools protocol
// (test/cdp.ts): the status page's numbers, and the /admin page calling NIP-86 through its UI
// with a stubbed NIP-07 signer whose signatures come from this process.
// Skipped (with a message) when Chromium is missing outside CI; in CI a missing Chromium fails (test/ci.ts).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { npubEncode } from "nostr-tools/nip19";
import { Browser, CHROMIUM, type Page } from "./cdp.ts";
import { needInCI } from "./ci.ts";
import { pngDataUrl, signingPage } from "./pages-helpers.ts";
import { freePort, selfSignedCert } from "./process-helpers.ts";
import { Client, failOnRelayErrors, now, relayInfo, signer, startTestRelay, type Signer, type TestRelay } from "./helpers.ts";
import { createGroup, join as joinGroup, mod } from "./groups-helpers.ts";

const haveChromium = needInCI(
  "pages.test: Chromium",
  existsSync(CHROMIUM) ? undefined : `${CHROMIUM} is missing (apt-get install chromium)`,
);

const NGINX = ["/usr/sbin/nginx", "/usr/bin/nginx"].find((p) => existsSync(p));
const OPENSSL = ["/usr/bin/openssl", "/usr/local/bin/openssl"].find((p) => existsSync(p));
const haveNginx =
  haveChromium &&
  needInCI("pages.test: nginx and openssl (the admin console over https)", NGINX && OPENSSL ? undefined : "nginx or openssl is missing");

const ADMIN = signer();
const RELAY_NAME = "Pages <test> relay";
const INSECURE_HOST = "relay.example";
/** The name the TLS proxy answers to (a self-signed certificate, accepted by this browser only). */
const TLS_HOST = "relay.example.com";

describe.skipIf(!haveChromium)("web pages in Chromium", () => {
  failOnRelayErrors();
  let relay: TestRelay;
  let browser: Browser | undefined;
  let page: Page;
  let httpBase: string;
  /** Who the stubbed extension signs as. */
  let signingAs: Signer = ADMIN;
  /** Every event the page had signed, in order. */
  const signed: any[] = [];
  const clients: Client[] = [];

  beforeAll(async () => {
    relay = await startTestRelay({
      info: { name: RELAY_NAME, description: "Seen in a real browser." },
      admin: { pubkeys: [ADMIN.pubkey] },
      // The groups view (harmless to the other views).
      groups: { enabled: true, creators: ["anyone"] },
    });
    httpBase = relay.url.replace(/^ws/, "http").replace(/\/$/, "");
    // A name that is not localhost: plain http to it is not a secure context (no crypto.subtle).
    browser = await Browser.launch([
      `--host-resolver-rules=MAP ${INSECURE_HOST} 127.0.0.1, MAP ${TLS_HOST} 127.0.0.1`,
      "--ignore-certificate-errors",
    ]);
    page = await signingPage(browser, () => signingAs, signed);
  }, 60_000);

  afterAll(async () => {
    for (const c of clients) c.close();
    await browser?.close();
    await relay?.stop();
  });

  async function connect(): Promise<Client> {
    const c = await Client.connect(relay.url);
    clients.push(c);
    return c;
  }

  /** Clicks a button of the admin page and resolves with the call's outcome as the page shows it. */
  const click = (id: string) => clickWhere(`document.getElementById(${JSON.stringify(id)})`);

  /**
   * Clicks the button an expression finds; resolves with the call's outcome as #result shows it. A
   * ban's confirmation (admin/confirm.js; its own test: pages-ban.test.ts) is answered Ban.
   */
  async function clickWhere(button: string): Promise<{ state: string; text: string }> {
    const before = await page.evaluate<string>(`document.getElementById("result").dataset.seq`);
    await page.evaluate(`(${button}).click()`);
    return page.waitFor(
      `(() => { const r = document.getElementById("result");
        if (document.getElementById("confirm-ban")?.open) document.getElementById("confirm-ban-ok").click();
        return r.dataset.seq !== ${JSON.stringify(before)} && r.dataset.state !== "pending" && { state: r.dataset.state, text: r.textContent }; })()`,
    );
  }

  const fill = (id: string, value: string) =>
    page.evaluate(`document.getElementById(${JSON.stringify(id)}).value = ${JSON.stringify(value)}`);

  test("the status page shows name, NIPs, connections and the events stored", async () => {
    const c = await connect();
    const author = signer();
    for (let i = 0; i < 3; i++)
      expect((await c.publish(author.sign({ kind: 1, content: `status ${i}`, created_at: now() - i })))[2]).toBe(true);

    await page.goto(`${httpBase}/`);
    const shown = await page.evaluate<any>(`({
      title: document.title,
      name: document.getElementById("name").textContent,
      nips: [...document.querySelectorAll("#nips li")].map((li) => li.textContent),
      connections: Number(document.getElementById("connections").textContent),
      stored: document.getElementById("events-stored").textContent,
      url: document.getElementById("url").textContent,
      policies: document.getElementById("policies").textContent,
    })`);
    expect(shown.title).toBe(RELAY_NAME);
    expect(shown.name).toBe(RELAY_NAME);
    expect(shown.nips).toContain("NIP-01");
    expect(shown.nips).toContain("NIP-11");
    expect(shown.connections).toBeGreaterThanOrEqual(1);
    expect(shown.stored).toBe("3");
    expect(shown.url).toBe(relay.url);
    expect(shown.policies).toContain("Authentication (NIP-42)");
  });

  test("the status page draws live charts from /status.json, with top kinds, recent refusals and plain-word labels", async () => {
    const c = await connect();
    const author = signer();
    // One clock reading: now() - i across a second boundary signs the same event twice (a duplicate, also OK true).
    const t = now();
    for (let i = 0; i < 4; i++) expect((await c.publish(author.sign({ kind: 7, content: "+", created_at: t - i })))[2]).toBe(true);
    // A refusal with a reason: created_at far in the future.
    const [, , ok, msg] = await c.publish(author.sign({ kind: 1, content: "later", created_at: now() + 86400 * 365 }));
    expect(ok).toBe(false);

    // The JSON: same origin, under the relay path; NIP-11 and the page stay on the relay path.
    const res = await fetch(`${httpBase}/status.json`);
    expect(res.headers.get("content-type")).toBe("application/json");
    const json: any = await res.json();
    expect(Object.keys(json).sort()).toEqual(["history_bytes", "now", "recent_refusals", "series", "started_at", "top_kinds"]);
    for (const range of ["10s", "1m"]) {
      const s = json.series[range];
      expect(s.t.length).toBeGreaterThanOrEqual(2);
      for (const name of ["accepted", "duplicate", "reqs", "connections", "events_stored", "database_bytes", "refused:invalid"])
        expect(s.values[name]).toHaveLength(s.t.length);
    }
    expect(json.series["10s"].values.accepted.at(-1)).toBeGreaterThan(0);
    expect(json.top_kinds).toContainEqual({ kind: 7, accepted: 4 });
    expect(json.recent_refusals.at(-1)).toMatchObject({ kind: 1, reason: msg.split(":")[0], message: msg });
    expect((await relayInfo(relay.url)).name).toBeString();

    await page.goto(`${httpBase}/`);
    await page.waitFor(`document.getElementById("charts").dataset.updated`);
    const shown = await page.evaluate<any>(`({
      points: Object.fromEntries([...document.querySelectorAll("#charts svg")].map((s) => [s.id, Number(s.dataset.points)])),
      accepted: document.querySelector("#chart-accepted path")?.getAttribute("d") ?? "",
      refusedLines: [...document.querySelectorAll("#chart-refused path")].map((p) => p.dataset.name),
      topKinds: document.getElementById("top-kinds").textContent,
      refusals: document.getElementById("refusals").textContent,
      policies: [...document.querySelectorAll("#policies th")].map((th) => th.textContent),
    })`);
    expect(shown.points["chart-accepted"]).toBeGreaterThanOrEqual(2);
    // A path of at least two points: "M x,y L x,y".
    expect(shown.accepted).toMatch(/^M[\d.]+,[\d.]+ L[\d.]+,[\d.]+/);
    expect(shown.refusedLines).toContain(msg.split(":")[0]);
    expect(shown.topKinds).toContain("7 · reaction");
    expect(shown.refusals).toContain(msg);
    expect(shown.policies).toContain("EVENTs per minute from one IP");
    expect(shown.policies.join("|")).not.toMatch(/rate limits:|rate_limits/);

    // The chart is pixels, not only markup: its screenshot changes when its lines are removed.
    const box = await page.evaluate<any>(`(() => { const r = document.getElementById("chart-accepted").getBoundingClientRect();
      return { x: r.x + scrollX, y: r.y + scrollY, width: r.width, height: r.height, scale: 1 }; })()`);
    expect(box.width).toBeGreaterThan(50);
    const shot = async () =>
      (await page.send("Page.captureScreenshot", { format: "png", clip: box, captureBeyondViewport: true })).data as string;
    const drawn = await shot();
    await page.evaluate(`document.querySelectorAll("#chart-accepted path").forEach((p) => p.remove())`);
    const blank = await shot();
    expect(drawn.length).toBeGreaterThan(100);
    expect(drawn).not.toBe(blank);

    // Live: new events show without a reload (the page asks every 5 s).
    const before = await page.evaluate<string>(`document.getElementById("charts").dataset.updated`);
    for (let i = 0; i < 3; i++) expect((await c.publish(author.sign({ kind: 30, content: "x", created_at: t - i })))[2]).toBe(true);
    await page.waitFor(
      `document.getElementById("charts").dataset.updated !== ${JSON.stringify(before)} && [...document.querySelectorAll("#top-kinds td")].some((td) => td.textContent === "30")`,
      15_000,
    );
  }, 30_000);

  test("the admin page bans a pubkey (given as npub) through its UI; the relay then refuses its events", async () => {
    signingAs = ADMIN;
    await page.goto(`${httpBase}/admin`);
    const x = signer();
    await fill("pubkey-input", npubEncode(x.pubkey));
    await fill("pubkey-reason", "spam");
    const outcome = await click("ban-pubkey");
    expect(outcome).toEqual({ state: "ok", text: "banpubkey: ok" });
    expect(await page.evaluate(`document.getElementById("signer-pubkey").textContent`)).toBe(ADMIN.pubkey);

    // The NIP-98 token the page had signed: u = origin + relay path, payload = sha256 of the body
    // (the page also signs the calls that load its tables once the signer is connected).
    const body = JSON.stringify({ method: "banpubkey", params: [x.pubkey, "spam"] });
    const payload = new Bun.CryptoHasher("sha256").update(body).digest("hex");
    const token = signed.findLast((t) => t.tags.some((tag: string[]) => tag[0] === "payload" && tag[1] === payload));
    expect(token.kind).toBe(27235);
    expect(token.tags).toContainEqual(["u", `${httpBase}/`]);
    expect(token.tags).toContainEqual(["method", "POST"]);

    const listed = await click("list-banned-pubkeys");
    expect(listed.state).toBe("ok");
    expect(await page.evaluate(`document.querySelector('#banned-pubkeys tr[data-key="${x.pubkey}"]')?.textContent`)).toContain("spam");

    const c = await connect();
    const [, , ok, msg] = await c.publish(x.sign({ kind: 1, content: "after the ban" }));
    expect(ok).toBe(false);
    expect(msg).toStartWith("blocked:");

    // The status page counts the admin's bans among the policies in force.
    await page.goto(`${httpBase}/`);
    const row = await page.evaluate<string>(
      `[...document.querySelectorAll("#policies tr")].find((tr) => tr.textContent.startsWith("Pubkeys banned by an admin"))?.textContent ?? ""`,
    );
    expect(row).toBe("Pubkeys banned by an admin1 pubkey");
  });

  test("a signer who is not an admin is told so at the top, before any list loads; the actions are off and nothing is sent", async () => {
    signingAs = signer();
    try {
      await page.goto(`${httpBase}/admin`);
      const before = signed.length;
      // The banner says it, once: the result line under it does not repeat it.
      expect(await click("connect")).toEqual({ state: "idle", text: "Results of your calls show here." });
      expect(await page.evaluate(`document.getElementById("who").dataset.state`)).toBe("not-admin");
      expect(await page.evaluate(`document.getElementById("who-title").textContent`)).toBe(
        `This key is not an admin of this relay: ${npubEncode(signingAs.pubkey)} is not in [admin] pubkeys. The actions are off.`,
      );
      // The relay has admins: the line to add goes into their list.
      expect(await page.evaluate(`document.getElementById("who-toml").textContent`)).toBe(`"${signingAs.pubkey}",`);
      expect(await page.evaluate(`document.getElementById("signer-pubkey").textContent`)).toBe(signingAs.pubkey);
      // One signed check (supportedmethods), no list call after it.
      const asked = signed.slice(before).filter((e) => e.kind === 27235);
      expect(asked).toHaveLength(1);
      expect(await page.evaluate(`document.getElementById("list-banned-pubkeys").disabled`)).toBe(true);
      expect(await page.evaluate(`document.getElementById("banned-pubkeys").dataset.state`)).toBe("locked");
    } finally {
      signingAs = ADMIN;
    }
  });

  test("changerelayname from the page shows in NIP-11 at once", async () => {
    await page.goto(`${httpBase}/admin`);
    // The page fills the field with the current name (from NIP-11) when it loads.
    expect(await page.waitFor<string>(`document.getElementById("name-input").value`)).toBe(RELAY_NAME);
    await fill("name-input", "Renamed from the page");
    expect(await click("change-name")).toEqual({ state: "ok", text: "changerelayname: ok" });
    expect((await relayInfo(relay.url)).name).toBe("Renamed from the page");
  });

  test("kinds from the page: Allow makes the relay allow-only, Reset takes it back", async () => {
    const c = await connect();
    const x = signer();
    await page.goto(`${httpBase}/admin`);
    await fill("kind-input", "1");
    expect(await click("allow-kind")).toEqual({ state: "ok", text: "allowkind: ok" });
    expect((await c.publish(x.sign({ kind: 7, content: "+" })))[3]).toStartWith("blocked:");
    expect(await click("reset-kind")).toEqual({ state: "ok", text: "resetkind: ok" });
    expect((await c.publish(x.sign({ kind: 7, content: "+" })))[2]).toBe(true);
    expect(await click("list-disallowed-kinds")).toEqual({ state: "ok", text: expect.stringMatching(/^listdisallowedkinds: /) });
  });

  test("over plain http to a non-local name the admin page says it needs https", async () => {
    const c = await connect();
    expect((await c.publish(signer().sign({ kind: 1, content: "seen over plain http" })))[2]).toBe(true);
    await page.goto(`${httpBase.replace("127.0.0.1", INSECURE_HOST)}/admin`);
    expect(await page.evaluate(`window.isSecureContext`)).toBe(false);
    const shown = await page.evaluate<any>(`({
      state: document.getElementById("result").dataset.state,
      text: document.getElementById("result").textContent,
      enabled: [...document.querySelectorAll("button:not([data-local])")].filter((b) => !b.disabled).length,
      local: [...document.querySelectorAll("#live button[data-local]")].filter((b) => !b.disabled).length,
      tabs: [...document.querySelectorAll('[role="tab"]')].every((b) => !b.disabled),
    })`);
    expect(shown.state).toBe("error");
    expect(shown.text).toContain("needs https");
    // Every button that signs is disabled, the live view's own (filter) are not; its rows' ban
    // buttons are disabled too.
    expect(shown.enabled).toBe(0);
    expect(shown.local).toBe(2);
    expect(shown.tabs).toBe(true);
    await page.waitFor(`document.querySelectorAll("#events button.ban-author").length > 0`);
    expect(await page.evaluate(`[...document.querySelectorAll("#events button")].filter((b) => !b.disabled).length`)).toBe(0);
  });

  test("input errors show in the page without a call", async () => {
    await page.goto(`${httpBase}/admin`);
    const before = signed.length;
    const good = npubEncode(signer().pubkey);
    await fill("pubkey-input", good.slice(0, -1) + (good.endsWith("q") ? "p" : "q"));
    expect(await click("ban-pubkey")).toEqual({ state: "error", text: "banpubkey: not a valid npub: bad checksum" });
    await fill("event-input", "xyz");
    expect((await click("ban-event")).text).toBe("banevent: enter 64 hex characters or note1…");
    expect(signed.length).toBe(before);
  });

  // ---- the moderation console: live events, tables with profiles, one-click bans, the log ------

  /** A new author with a profile (kind 0) and notes, published; the notes oldest first, all in the past. */
  async function author(c: Client, profile: Record<string, unknown>, notes: string[]) {
    const s = signer();
    const t = now() - 60;
    const kind0 = s.sign({ kind: 0, content: JSON.stringify(profile), created_at: t - 10 });
    expect((await c.publish(kind0))[2]).toBe(true);
    const published = [];
    for (const [i, content] of notes.entries()) {
      const e = s.sign({ kind: 1, content, created_at: t + i });
      expect((await c.publish(e))[2]).toBe(true);
      published.push(e);
    }
    return { s, kind0, notes: published };
  }

  /** The live view's row of an event (an expression for the page). */
  const row = (id: string) => `document.querySelector('#events tr[data-id="${id}"]')`;

  /** Applies the live view's filter; resolves with the rows once the relay's stored events are in. */
  async function filterLive(kinds: string, authorValue: string, words: string) {
    await fill("filter-kinds", kinds);
    await fill("filter-author", authorValue);
    await fill("filter-text", words);
    const before = await page.evaluate<string>(`document.getElementById("events").dataset.eose`);
    await page.evaluate(`document.getElementById("filter-apply").click()`);
    await page.waitFor(
      `(() => { const e = document.getElementById("events").dataset.eose; return e !== ${JSON.stringify(before)} && e !== ""; })()`,
    );
    return page.evaluate<{ id: string; kind: number; pubkey: string }[]>(
      `[...document.querySelectorAll("#events tbody tr[data-id]")].map((r) => ({ id: r.dataset.id, kind: Number(r.dataset.kind), pubkey: r.dataset.pubkey }))`,
    );
  }

  test("the console's live view: recent events with each author's name and picture, new ones without a reload, filters by kind, author and text", async () => {
    const c = await connect();
    const alice = await author(c, { name: "Alice Moderated", picture: pngDataUrl([200, 30, 30]) }, [
      "hello zebrafish",
      "second note",
      "third note",
    ]);
    const bob = signer();
    const reaction = bob.sign({ kind: 7, content: "+", tags: [["e", alice.notes[0]!.id]], created_at: now() - 30 });
    expect((await c.publish(reaction))[2]).toBe(true);

    signingAs = ADMIN;
    await page.goto(`${httpBase}/admin`);
    for (const n of alice.notes) await page.waitFor(`!!${row(n.id)}`);
    const shown = await page.waitFor<any>(`(() => { const r = ${row(alice.notes[2]!.id)};
      const img = r.querySelector(".author img.avatar");
      return img && img.complete && img.naturalWidth > 0 && {
        name: r.querySelector(".author .name")?.textContent, npub: r.querySelector(".author .npub").textContent,
        width: img.naturalWidth, referrer: img.referrerPolicy, kind: r.querySelector(".kind").textContent,
        excerpt: r.querySelector(".excerpt").textContent, buttons: [...r.querySelectorAll("button")].map((b) => b.textContent) }; })()`);
    expect(shown).toEqual({
      name: "Alice Moderated",
      npub: expect.stringMatching(/^npub1\w{7}…\w{6}$/),
      width: 8,
      referrer: "no-referrer",
      kind: "1 · note",
      excerpt: "third note",
      buttons: ["Ban event", "Ban author"],
    });
    const full = npubEncode(alice.s.pubkey);
    expect(shown.npub).toBe(`${full.slice(0, 12)}…${full.slice(-6)}`);
    // Newest first; the signer was not asked for anything just to read.
    const order = await page.evaluate<string[]>(`[...document.querySelectorAll("#events tbody tr")].map((r) => r.dataset.id)`);
    expect(order.indexOf(reaction.id)).toBeLessThan(order.indexOf(alice.notes[2]!.id));
    expect(order.indexOf(alice.notes[2]!.id)).toBeLessThan(order.indexOf(alice.notes[0]!.id));
    expect(await page.evaluate(`document.getElementById("signer-pubkey").textContent`)).toBe("not connected");

    // The table is pixels, not only markup: its screenshot changes when its rows are hidden.
    const box = await page.evaluate<any>(`(() => { const r = document.getElementById("events").getBoundingClientRect();
      return { x: r.x + scrollX, y: r.y + scrollY, width: r.width, height: r.height, scale: 1 }; })()`);
    expect(box.height).toBeGreaterThan(100);
    const shot = async () =>
      (await page.send("Page.captureScreenshot", { format: "png", clip: box, captureBeyondViewport: true })).data as string;
    const drawn = await shot();
    await page.evaluate(`document.querySelector("#events tbody").style.visibility = "hidden"`);
    const blank = await shot();
    await page.evaluate(`document.querySelector("#events tbody").style.visibility = ""`);
    expect(drawn).not.toBe(blank);
    // Rows of text and pictures weigh more than the same area left blank.
    expect(drawn.length).toBeGreaterThan(blank.length + 2000);

    // Live: a note published now shows at the top, in the same document.
    await page.evaluate(`window.__sameDocument = true`);
    const live = alice.s.sign({ kind: 1, content: "published after the page loaded" });
    expect((await c.publish(live))[2]).toBe(true);
    await page.waitFor(`document.querySelector("#events tbody tr")?.dataset.id === ${JSON.stringify(live.id)}`);
    expect(await page.evaluate(`window.__sameDocument`)).toBe(true);

    // By kind: only kind 7, also live; a kind 1 published meanwhile stays out.
    const byKind = await filterLive("7", "", "");
    expect(byKind.map((r) => r.id)).toContain(reaction.id);
    expect(byKind.every((r) => r.kind === 7)).toBe(true);
    const other = bob.sign({ kind: 1, content: "not a reaction" });
    const later = bob.sign({ kind: 7, content: "-", tags: [["e", live.id]] });
    expect((await c.publish(other))[2]).toBe(true);
    expect((await c.publish(later))[2]).toBe(true);
    await page.waitFor(`!!${row(later.id)}`);
    expect(await page.evaluate(`!!${row(other.id)}`)).toBe(false);

    // By author (npub): her profile and notes, nobody else's.
    const byAuthor = await filterLive("", full, "");
    expect(byAuthor.every((r) => r.pubkey === alice.s.pubkey)).toBe(true);
    expect(byAuthor.map((r) => r.id).sort()).toEqual([alice.kind0.id, ...alice.notes.map((n) => n.id), live.id].sort());
    expect((await filterLive("1", alice.s.pubkey, "")).length).toBe(4);

    // By text: the relay's NIP-50 search...
    const bySearch = await filterLive("", "", "zebrafish");
    expect(bySearch.map((r) => r.id)).toEqual([alice.notes[0]!.id]);
    expect(await page.evaluate<string>(`document.getElementById("filter-note").textContent`)).toContain("NIP-50");
    // ...or, on a relay without it, matched in the page.
    relay.ctx.config.nips.nip50 = false;
    try {
      await page.goto(`${httpBase}/admin`);
      const inPage = await filterLive("", "", "ZEBRAFISH");
      expect(inPage.map((r) => r.id)).toEqual([alice.notes[0]!.id]);
      expect(await page.evaluate<string>(`document.getElementById("filter-note").textContent`)).toContain("matched in this page");
    } finally {
      relay.ctx.config.nips.nip50 = true;
    }
    // Nothing the page did was blocked by its Content-Security-Policy (websocket, data: pictures).
    expect(await page.evaluate(`window.__csp`)).toEqual([]);
  }, 40_000);

  test("one click on Ban author: the relay refuses the author, the banned table shows name, picture and reason, the log says what happened; Unban undoes it", async () => {
    const c = await connect();
    const mallory = await author(c, { display_name: "Mallory Spam", picture: pngDataUrl([30, 120, 200]) }, ["buy now", "buy again"]);
    const pk = mallory.s.pubkey;
    signingAs = ADMIN;
    await page.goto(`${httpBase}/admin`);
    await page.waitFor(`${row(mallory.notes[1]!.id)}?.querySelector(".author img")?.naturalWidth > 0`);
    await fill("ban-reason", "spam wave");
    const outcome = await clickWhere(`${row(mallory.notes[1]!.id)}.querySelector("button.ban-author")`);
    expect(outcome).toEqual({ state: "ok", text: "banpubkey: ok" });
    // Each of her rows says what happened.
    for (const n of mallory.notes)
      expect(await page.evaluate(`${row(n.id)}.querySelector(".outcome").textContent`)).toBe(
        "author banned: their events hidden, new ones refused",
      );

    const [, , ok, msg] = await c.publish(mallory.s.sign({ kind: 1, content: "after the ban" }));
    expect(ok).toBe(false);
    expect(msg).toStartWith("blocked:");

    // The tables loaded when the click connected the signer, and again after the ban.
    const banned = await page.waitFor<any>(`(() => { const r = document.querySelector('#banned-pubkeys tr[data-key="${pk}"]');
      const img = r?.querySelector("img.avatar");
      return img && img.naturalWidth > 0 && { name: r.querySelector(".name")?.textContent, cells: [...r.cells].map((td) => td.textContent),
        undo: r.querySelector("button")?.dataset.method }; })()`);
    expect(banned.name).toBe("Mallory Spam");
    // The reason, and when what the ban hid is deleted ([admin] ban_retention).
    expect(banned.cells[1]).toStartWith("spam wavehidden; deleted ");
    expect(banned.undo).toBe("unbanpubkey");
    expect(await page.evaluate(`document.getElementById("banned-pubkeys-count").textContent`)).toMatch(/^\(\d+\)$/);
    const logged = await page.evaluate<any>(`(() => { const r = document.querySelector("#log tbody tr");
      return { method: r.dataset.method, state: r.dataset.state, name: r.querySelector(".name")?.textContent, outcome: r.querySelector(".outcome").textContent }; })()`);
    expect(logged).toEqual({ method: "banpubkey", state: "ok", name: "Mallory Spam", outcome: "ok" });

    // A console worth looking at: saved for a person to see when asked (ADMIN_CONSOLE_PNG=path).
    const png = process.env.ADMIN_CONSOLE_PNG;
    if (png) {
      await page.waitFor(`[...document.querySelectorAll("table.grid[id]:not(#log):not(#events)")].every((t) => t.dataset.state === "ok")`);
      await page.send("Emulation.setDeviceMetricsOverride", { width: 1280, height: 900, deviceScaleFactor: 1, mobile: false });
      const size = await page.evaluate<any>(
        `({ width: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight })`,
      );
      const shot = await page.send("Page.captureScreenshot", {
        format: "png",
        clip: { x: 0, y: 0, width: size.width, height: Math.min(size.height, 4000), scale: 1 },
        captureBeyondViewport: true,
      });
      mkdirSync(dirname(png), { recursive: true });
      await Bun.write(png, Buffer.from(shot.data, "base64"));
      await page.send("Emulation.clearDeviceMetricsOverride");
    }

    // Unban from the table's row: the row goes, the relay takes her events again.
    expect(await clickWhere(`document.querySelector('#banned-pubkeys tr[data-key="${pk}"] button')`)).toEqual({
      state: "ok",
      text: "unbanpubkey: ok",
    });
    await page.waitFor(`!document.querySelector('#banned-pubkeys tr[data-key="${pk}"]')`);
    expect((await c.publish(mallory.s.sign({ kind: 1, content: "after the unban" })))[2]).toBe(true);
    expect(await page.evaluate(`document.querySelector("#log tbody tr").dataset.method`)).toBe("unbanpubkey");
  }, 30_000);

  test("Ban event hides the stored event and keeps it out; the moderation queue shows a reported event with its author, and bans from its row", async () => {
    const c = await connect();
    const spammer = await author(c, { name: "Reported Person", picture: pngDataUrl([20, 160, 60]) }, ["reported note", "other note"]);
    const [reported, other] = spammer.notes as [any, any];
    const report = signer().sign({
      kind: 1984,
      content: "",
      tags: [
        ["e", reported.id, "spam"],
        ["p", spammer.s.pubkey],
      ],
    });
    expect((await c.publish(report))[2]).toBe(true);

    signingAs = ADMIN;
    await page.goto(`${httpBase}/admin`);
    await page.evaluate(`document.getElementById("connect").click()`);
    const queued = await page.waitFor<any>(`(() => { const r = document.querySelector('#moderation-events tr[data-key="${reported.id}"]');
      return r?.querySelector(".name") && { name: r.querySelector(".name").textContent, cells: [...r.cells].map((td) => td.textContent),
        buttons: [...r.querySelectorAll("button")].map((b) => b.textContent) }; })()`);
    expect(queued.name).toBe("Reported Person");
    expect(queued.cells[0]).toContain("reported note");
    expect(queued.cells[1]).toBe("reported: spam");
    expect(queued.buttons).toEqual(["Allow", "Ban"]);

    // One click in the live view.
    await page.waitFor(`!!${row(other.id)}`);
    await fill("ban-reason", "");
    expect(await clickWhere(`${row(other.id)}.querySelector("button.ban-event")`)).toEqual({ state: "ok", text: "banevent: ok" });
    expect(
      await page.evaluate(
        `(() => { const r = ${row(other.id)}; return [r.classList.contains("banned"), r.querySelector(".outcome").textContent]; })()`,
      ),
    ).toEqual([true, "event banned: hidden from the relay and kept out"]);
    // NIP-86 banevent here: the stored copy is hidden, and the event is refused if sent again.
    expect((await c.req("gone", { ids: [other.id] })).events).toEqual([]);
    const [, , ok, msg] = await c.publish(other);
    expect(ok).toBe(false);
    expect(msg).toStartWith("blocked:");
    await page.waitFor(`!!document.querySelector('#banned-events tr[data-key="${other.id}"]')`);

    // Ban from the queue's row: it leaves the queue and joins the banned events.
    expect(
      await clickWhere(`document.querySelector('#moderation-events tr[data-key="${reported.id}"] button[data-method="banevent"]')`),
    ).toEqual({
      state: "ok",
      text: "banevent: ok",
    });
    await page.waitFor(
      `!document.querySelector('#moderation-events tr[data-key="${reported.id}"]') && !!document.querySelector('#banned-events tr[data-key="${reported.id}"]')`,
    );
    expect((await c.req("gone2", { ids: [reported.id] })).events).toEqual([]);
    const log = await page.evaluate<any[]>(
      `[...document.querySelectorAll("#log tbody tr")].slice(0, 2).map((r) => [r.dataset.method, r.dataset.state, r.cells[2].textContent])`,
    );
    expect(log.map(([m, st]) => [m, st])).toEqual([
      ["banevent", "ok"],
      ["banevent", "ok"],
    ]);
    expect(log[1][2]).toContain(npubEncode(spammer.s.pubkey).slice(0, 12));
  }, 30_000);

  test("what events say is shown as text: a kind 0 name of HTML runs nothing, a javascript: picture is not loaded, a broken one becomes an initial", async () => {
    const c = await connect();
    const evilName = `<img src=x onerror="window.__xss=1">`;
    const evil = await author(c, { name: evilName, picture: "javascript:window.__xss=2" }, [
      `<script>window.__xss=3</script><img src=y onerror="window.__xss=4"><b>bold</b>`,
    ]);
    const broken = await author(c, { name: "Broken Picture", picture: "http://127.0.0.1:9/missing.png" }, ["hi"]);
    signingAs = ADMIN;
    await page.goto(`${httpBase}/admin`);
    await page.waitFor(`${row(evil.notes[0]!.id)}?.querySelector(".name")`);
    await page.waitFor(`${row(broken.notes[0]!.id)}?.querySelector(".author .initial")?.textContent === "B"`);
    await Bun.sleep(300);
    const shown = await page.evaluate<any>(`(() => { const r = ${row(evil.notes[0]!.id)}; return {
      name: r.querySelector(".name").textContent,
      excerpt: r.querySelector(".excerpt").textContent,
      injected: [...document.querySelectorAll("img")].map((i) => i.getAttribute("src")).filter((s) => s === "x" || s === "y" || /^javascript:/.test(s)),
      bold: document.querySelectorAll("#events b").length,
      scripts: document.scripts.length,
      xss: window.__xss ?? null,
      initial: r.querySelector(".author .initial")?.textContent,
      picture: !!r.querySelector(".author img"),
      brokenImg: !!${row(broken.notes[0]!.id)}.querySelector(".author img"),
      csp: window.__csp }; })()`);
    expect(shown).toEqual({
      name: evilName,
      excerpt: `<script>window.__xss=3</script><img src=y onerror="window.__xss=4"><b>bold</b>`,
      injected: [],
      bold: 0,
      scripts: 1,
      xss: null,
      initial: "<",
      picture: false,
      brokenImg: false,
      csp: [],
    });
  });

  test("a picture at a URL its author chose is not loaded (the server would see the moderator's address) until the moderator asks; the choice is remembered", async () => {
    const png = Buffer.from(pngDataUrl([90, 90, 200]).split(",")[1]!, "base64");
    const fetched: string[] = [];
    const pictures = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: (req) => (fetched.push(new URL(req.url).pathname), new Response(png, { headers: { "Content-Type": "image/png" } })),
    });
    try {
      const c = await connect();
      const far = await author(c, { name: "Remote Picture", picture: `http://127.0.0.1:${pictures.port}/me.png` }, ["a note"]);
      const r = row(far.notes[0]!.id);
      signingAs = ADMIN;
      await page.goto(`${httpBase}/admin`);
      await page.waitFor(
        `${r}?.querySelector(".name")?.textContent === "Remote Picture" && ${r}.querySelector(".author .initial")?.textContent === "R"`,
      );
      await Bun.sleep(500);
      expect({ img: await page.evaluate(`!!${r}.querySelector(".author img")`), fetched }).toEqual({ img: false, fetched: [] });
      expect(await page.evaluate(`document.getElementById("show-pictures").checked`)).toBe(false);

      await page.evaluate(`document.getElementById("show-pictures").click()`);
      await page.waitFor(`${r}?.querySelector(".author img")?.naturalWidth === 8`);
      expect(fetched).toContain("/me.png");
      // Remembered in this browser: after a reload it loads at once.
      await page.goto(`${httpBase}/admin`);
      await page.waitFor(`${r}?.querySelector(".author img")?.naturalWidth === 8`);
      expect(await page.evaluate(`document.getElementById("show-pictures").checked`)).toBe(true);
      // Unticked: back to the initial, nothing more fetched.
      await page.evaluate(`document.getElementById("show-pictures").click()`);
      await page.waitFor(`${r}?.querySelector(".author .initial")?.textContent === "R"`);
      const count = fetched.length;
      await page.goto(`${httpBase}/admin`);
      await page.waitFor(`${r}?.querySelector(".author .initial")?.textContent === "R"`);
      await Bun.sleep(300);
      expect(fetched.length).toBe(count);
      expect(await page.evaluate(`window.__csp`)).toEqual([]);
    } finally {
      pictures.stop(true);
    }
  }, 30_000);

  test("each table's row undoes its entry: Unallow a pubkey, Reset a kind, Unblock an address", async () => {
    const c = await connect();
    const friend = await author(c, { name: "Allowed Friend", picture: pngDataUrl([240, 200, 20]) }, ["a friend's note"]);
    signingAs = ADMIN;
    await page.goto(`${httpBase}/admin`);
    await page.waitFor(`${row(friend.notes[0]!.id)}?.querySelector(".name")`);
    const rowIn = (table: string, key: string) => `document.querySelector('#${table} tr[data-key="${key}"]')`;
    const steps: [string, string, string, string, string][] = [
      // [form field, value, form button, table, key of its row]
      ["pubkey-input", friend.s.pubkey, "allow-pubkey", "allowed-pubkeys", friend.s.pubkey],
      ["kind-input", "30023", "disallow-kind", "disallowed-kinds", "30023"],
      ["ip-input", "203.0.113.7", "block-ip", "blocked-ips", "203.0.113.7"],
    ];
    try {
      await addThenUndo(steps, friend, c, rowIn);
    } finally {
      // A failure above must not leave the relay allow-only for the tests after.
      await relay.ctx.admin.apply({ method: "unallowpubkey", pubkey: friend.s.pubkey, reason: "" });
      await relay.ctx.admin.apply({ method: "resetkind", kind: 30023 });
      await relay.ctx.admin.apply({ method: "unblockip", ip: "203.0.113.7" });
    }
  });

  test("writes restricted by an allow list alone (no admission model): the Admission view hides once the relay says no model is on", async () => {
    // The config's list (as a reload would set it) makes NIP-11 say restricted_writes.
    const auth = relay.ctx.config.authorization;
    const before = auth.pubkey_allowlist;
    auth.pubkey_allowlist = [ADMIN.pubkey];
    try {
      signingAs = ADMIN;
      await page.goto(`${httpBase}/admin`);
      await page.waitFor(`!document.getElementById("access-section").hidden`);
      await click("connect");
      expect(await page.evaluate(`document.getElementById("who").dataset.state`)).toBe("admin");
      await page.waitFor(`document.getElementById("admissions").dataset.state === "error"`);
      expect(await page.evaluate(`document.getElementById("access-section").hidden`)).toBe(true);
    } finally {
      auth.pubkey_allowlist = before;
    }
  });

  /** Adds each entry through its form, sees its row, then undoes it from the row (the relay obeying each). */
  async function addThenUndo(
    steps: [string, string, string, string, string][],
    friend: Awaited<ReturnType<typeof author>>,
    c: Client,
    rowIn: (table: string, key: string) => string,
  ) {
    for (const [field, value, button, table, key] of steps) {
      await fill(field, value);
      expect((await click(button)).state).toBe("ok");
      await page.waitFor(`!!${rowIn(table, key)}`);
    }
    expect(await page.evaluate(`${rowIn("allowed-pubkeys", friend.s.pubkey)}.querySelector(".name").textContent`)).toBe("Allowed Friend");
    expect(await page.evaluate(`${rowIn("disallowed-kinds", "30023")}.cells[0].textContent`)).toBe("30023 · article");
    // While one pubkey is allowed, the relay takes no one else's events; a disallowed kind is refused.
    expect((await c.publish(signer().sign({ kind: 1, content: "not allowed" })))[3]).toStartWith("restricted:");
    expect((await c.publish(friend.s.sign({ kind: 30023, content: "article", tags: [["d", "x"]] })))[3]).toStartWith("blocked:");

    const undo: [string, string, string][] = [
      ["allowed-pubkeys", friend.s.pubkey, "unallowpubkey"],
      ["disallowed-kinds", "30023", "resetkind"],
      ["blocked-ips", "203.0.113.7", "unblockip"],
    ];
    for (const [table, key, method] of undo) {
      expect(await clickWhere(`${rowIn(table, key)}.querySelector("button")`)).toEqual({ state: "ok", text: `${method}: ok` });
      await page.waitFor(`!${rowIn(table, key)}`);
      expect(await page.evaluate(`document.querySelector("#log tbody tr").dataset.method`)).toBe(method);
    }
    expect((await c.publish(signer().sign({ kind: 1, content: "anyone again" })))[2]).toBe(true);
    expect((await c.publish(friend.s.sign({ kind: 30023, content: "article", tags: [["d", "x"]] })))[2]).toBe(true);
    // Each table says when it is empty.
    expect(await page.evaluate(`document.querySelector("#blocked-ips tbody tr.empty")?.textContent`)).toBe("No blocked address.");
  }

  test("the console's groups view lists groups with member counts, shows members with names and pictures, removes a member and creates an invite; screenshot differs when rows are removed", async () => {
    const c = await connect();
    const owner = await author(c, { name: "Group Owner", picture: pngDataUrl([90, 40, 160]) }, []);
    const ann = await author(c, { name: "Ann Member", picture: pngDataUrl([230, 120, 10]) }, []);
    const ben = await author(c, { name: "Ben Member", picture: pngDataUrl([10, 170, 170]) }, []);
    await createGroup(c, relay, owner.s, "garden", [["name", "Garden club"], ["picture", pngDataUrl([40, 140, 40])], ["closed"]]);
    const c2 = await connect();
    await createGroup(c2, relay, signer(), "quiet");
    // A code admits one join: one each, and "seeds" left over for the invites table.
    for (const code of ["ann", "ben", "seeds"]) expect((await c.publish(mod(9009, owner.s, "garden", [["code", code]])))[2]).toBe(true);
    expect((await joinGroup(c, ann.s, "garden", "ann"))[2]).toBe(true);
    expect((await joinGroup(c, ben.s, "garden", "ben"))[2]).toBe(true);

    signingAs = ADMIN;
    await page.goto(`${httpBase}/admin`);
    await page.waitFor(`!document.getElementById("groups-section").hidden`);
    await click("connect");
    expect(await page.evaluate(`document.getElementById("who").dataset.state`)).toBe("admin");
    const groupRow = (id: string) => `document.querySelector('#groups tr[data-key="${id}"]')`;
    const listed = await page.waitFor<any>(`(() => { const r = ${groupRow("garden")}; const img = r?.querySelector("img.avatar");
      return img && img.naturalWidth > 0 && { cells: [...r.cells].map((td) => td.textContent), delete: r.querySelector("button[data-method]")?.dataset.method }; })()`);
    expect(listed).toEqual({ cells: ["Garden club", "garden", "closed", "3", "Delete group"], delete: "deletegroup" });
    expect(await page.evaluate(`${groupRow("quiet")}.cells[3].textContent`)).toBe("1");
    expect(await page.evaluate(`document.getElementById("groups-count").textContent`)).toBe("(2)");

    // The group's members: names and pictures from their kind 0, roles, a Remove each.
    await page.evaluate(`${groupRow("garden")}.querySelector("button.group-name").click()`);
    const memberRow = (pk: string) => `document.querySelector('#group-members tr[data-key="${pk}"]')`;
    const members = await page.waitFor<any>(`(() => { const rows = [...document.querySelectorAll("#group-members tbody tr[data-key]")];
      return rows.length === 3 && rows.every((r) => r.querySelector("img.avatar")?.naturalWidth > 0) &&
        rows.map((r) => [r.querySelector(".name")?.textContent, r.cells[1].textContent]).sort(); })()`);
    expect(members).toEqual([
      ["Ann Member", "member"],
      ["Ben Member", "member"],
      ["Group Owner", "admin"],
    ]);
    // Loaded after the members.
    expect(
      await page.waitFor(`(() => { const keys = [...document.querySelectorAll("#group-invites tbody tr[data-key]")].map((r) => r.dataset.key);
      return keys.length > 0 && keys; })()`),
    ).toEqual(["seeds"]);

    // Pixels, not only markup: the members table's screenshot changes when its rows go (its tab shows).
    await page.evaluate(`document.getElementById("tab-groups").click()`);
    const box = await page.evaluate<any>(`(() => { const r = document.getElementById("group-members").getBoundingClientRect();
      return { x: r.x + scrollX, y: r.y + scrollY, width: r.width, height: r.height, scale: 1 }; })()`);
    expect(box.height).toBeGreaterThan(60);
    const shot = async () =>
      (await page.send("Page.captureScreenshot", { format: "png", clip: box, captureBeyondViewport: true })).data as string;
    const drawn = await shot();
    await page.evaluate(`document.querySelector("#group-members tbody").replaceChildren()`);
    const blank = await shot();
    expect(drawn).not.toBe(blank);
    expect(drawn.length).toBeGreaterThan(blank.length + 1000);
    await page.evaluate(`${groupRow("garden")}.querySelector("button.group-name").click()`);
    await page.waitFor(`!!${memberRow(ben.s.pubkey)}`);

    // Remove: the relay publishes its 9001; Ben's row goes, the count drops, his posts are refused.
    expect(await clickWhere(`${memberRow(ben.s.pubkey)}.querySelector("button")`)).toEqual({ state: "ok", text: "removegroupmember: ok" });
    await page.waitFor(`!${memberRow(ben.s.pubkey)} && ${groupRow("garden")}?.cells[3].textContent === "2"`);
    expect((await c.publish(mod(9, ben.s, "garden")))[3]).toStartWith("blocked:");
    expect(await page.evaluate(`document.querySelector("#log tbody tr").dataset.method`)).toBe("removegroupmember");

    // Create invite: the relay makes a code up; it shows in the invites.
    const created = await click("create-invite");
    expect(created.state).toBe("ok");
    const code = JSON.parse(created.text.replace(/^creategroupinvite: /, "")).code as string;
    expect(code).toMatch(/^[a-z2-7]{16}$/);
    await page.waitFor(`!!document.querySelector('#group-invites tr[data-key="${code}"]')`);
    expect(relay.ctx.groups!.invites("garden")!.sort()).toEqual([code, "seeds"].sort());
  }, 40_000);

  test("the live view keeps at most 100 rows, newest first, as events keep coming", async () => {
    const c = await connect();
    const flood = signer();
    signingAs = ADMIN;
    await page.goto(`${httpBase}/admin`);
    await page.waitFor(`document.getElementById("events").dataset.eose`);
    // Only this author's: the relay holds other tests' events of the same seconds.
    expect(await filterLive("", flood.pubkey, "")).toEqual([]);
    // An hour back: the later tests look for their own events among the relay's newest 50.
    const t = now() - 3600;
    const sent = Array.from({ length: 120 }, (_, i) => flood.sign({ kind: 1, content: `flood ${i}`, created_at: t - 120 + i }));
    const oks = await Promise.all(sent.map((e) => c.publish(e)));
    expect(oks.every((ok) => ok[2] === true)).toBe(true);
    await page.waitFor(`document.querySelector("#events tbody tr")?.dataset.id === ${JSON.stringify(sent.at(-1)!.id)}`);
    await Bun.sleep(200);
    const ids = await page.evaluate<string[]>(`[...document.querySelectorAll("#events tbody tr")].map((r) => r.dataset.id)`);
    expect(ids).toEqual(
      sent
        .slice(-100)
        .map((e) => e.id)
        .reverse(),
    );
  });

  test("on a relay that requires AUTH to read (NIP-42), the live view signs the challenge with the extension and reads", async () => {
    const c = await connect();
    const reader = await author(c, { name: "Seen After AUTH" }, ["only for the authenticated"]);
    signingAs = ADMIN;
    relay.ctx.config.options.auth = "always";
    try {
      const before = signed.length;
      await page.goto(`${httpBase}/admin`);
      await page.waitFor(`${row(reader.notes[0]!.id)}?.querySelector(".name")?.textContent === "Seen After AUTH"`);
      const auth = signed.slice(before).find((e) => e.kind === 22242);
      expect(auth.tags).toContainEqual(["relay", `${relay.url}`]);
      expect(auth.tags.find((t: string[]) => t[0] === "challenge")?.[1]).toBeString();
      expect(await page.evaluate(`document.getElementById("live-state").textContent`)).toBe("live (authenticated)");
    } finally {
      relay.ctx.config.options.auth = "when-needed";
    }
  });

  /** nginx terminating TLS for TLS_HOST on a free port in front of the relay, as a site would. */
  async function startTlsProxy(dir: string): Promise<{ port: number; stop: () => Promise<void> }> {
    const port = freePort();
    const { cert, key } = selfSignedCert(OPENSSL!, dir, TLS_HOST);
    const temps = ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map((t) => `${t}_temp_path ${join(dir, t)};`).join(" ");
    writeFileSync(
      join(dir, "nginx.conf"),
      `daemon off; worker_processes 1; pid ${join(dir, "nginx.pid")}; error_log ${join(dir, "error.log")};
events { worker_connections 64; }
http { access_log off; ${temps}
  map $http_upgrade $conn { default upgrade; '' ''; }
  server { listen 127.0.0.1:${port} ssl; server_name ${TLS_HOST}; ssl_certificate ${cert}; ssl_certificate_key ${key};
    location / { proxy_pass http://127.0.0.1:${relay.server.port}; proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection $conn; proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-Proto $scheme; proxy_buffering off; } } }
`,
    );
    const args = ["-p", dir, "-e", join(dir, "error.log"), "-c", join(dir, "nginx.conf")];
    const proc = Bun.spawn([NGINX!, ...args], { stdout: "ignore", stderr: "ignore" });
    const stop = async () => {
      proc.kill("SIGQUIT");
      if ((await Promise.race([proc.exited, Bun.sleep(5000).then(() => "late")])) === "late") proc.kill("SIGKILL");
    };
    for (const deadline = Date.now() + 10_000; ; await Bun.sleep(50)) {
      const up = await fetch(`https://127.0.0.1:${port}/`, { tls: { rejectUnauthorized: false } } as RequestInit).then(
        () => true,
        () => false,
      );
      if (up) return { port, stop };
      if (proc.exitCode !== null || Date.now() > deadline) {
        await stop();
        const log = existsSync(join(dir, "error.log")) ? readFileSync(join(dir, "error.log"), "utf8") : "";
        throw new Error(`nginx did not start: ${log}`);
      }
    }
  }

  test.skipIf(!haveNginx)(
    "over https behind a TLS proxy: the console reads over wss, and its NIP-86 calls are signed for the https URL",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "bunstr-pages-tls-"));
      const proxy = await startTlsProxy(dir);
      try {
        const c = await connect();
        const eve = await author(c, { name: "Eve Over TLS", picture: pngDataUrl([120, 60, 160]) }, ["through the proxy"]);
        signingAs = ADMIN;
        const origin = `https://${TLS_HOST}:${proxy.port}`;
        await page.goto(`${origin}/admin`);
        expect(await page.evaluate(`window.isSecureContext`)).toBe(true);
        await page.waitFor(`${row(eve.notes[0]!.id)}?.querySelector(".author img")?.naturalWidth > 0`);
        expect(await page.evaluate(`document.getElementById("live-state").dataset.state`)).toBe("live");
        expect(await clickWhere(`${row(eve.notes[0]!.id)}.querySelector("button.ban-author")`)).toEqual({
          state: "ok",
          text: "banpubkey: ok",
        });
        const token = signed.findLast((t) => t.tags.some((tag: string[]) => tag[0] === "payload"));
        expect(token.tags).toContainEqual(["u", `${origin}/`]);
        expect((await c.publish(eve.s.sign({ kind: 1, content: "after the ban" })))[3]).toStartWith("blocked:");
        expect(await page.evaluate(`window.__csp`)).toEqual([]);
        // The policy names this host's websocket origins, as the browser asked for them.
        const res = await fetch(`https://127.0.0.1:${proxy.port}/admin`, {
          headers: { Host: `${TLS_HOST}:${proxy.port}` },
          tls: { rejectUnauthorized: false, serverName: TLS_HOST },
        } as RequestInit);
        expect(res.headers.get("content-security-policy")).toContain(`wss://${TLS_HOST}:${proxy.port}`);
      } finally {
        await proxy.stop();
        rmSync(dir, { recursive: true, force: true });
      }
    },
    30_000,
  );
});

test("the admin page's Content-Security-Policy: its own style and script by hash, the websocket of its host, pictures from profiles", async () => {
  const { adminCsp, adminPage } = await import("../src/http/admin-page.ts");
  const html = adminPage("/");
  const hash = (s: string) => `'sha256-${new Bun.CryptoHasher("sha256").update(s).digest("base64")}'`;
  const script = /<script>([\s\S]*)<\/script>/.exec(html)![1]!;
  const style = /<style>([\s\S]*?)<\/style>/.exec(html)![1]!;
  const csp = adminCsp("relay.example.com:8443");
  expect(csp).toContain(`script-src ${hash(script)}`);
  expect(csp).toContain(`style-src ${hash(style)}`);
  expect(csp).toContain("connect-src 'self' ws://relay.example.com:8443 wss://relay.example.com:8443");
  expect(csp).toContain("img-src https: http: data:");
  expect(csp).toContain("frame-ancestors 'none'");
  expect(adminCsp("[::1]:7447")).toContain("connect-src 'self' ws://[::1]:7447 wss://[::1]:7447");
  // A Host header is the client's: nothing but a host and port goes into the policy.
  for (const host of ["a b", "x; script-src *", "evil.example/'unsafe-inline'", null])
    expect(adminCsp(host)).toContain("connect-src 'self'; ");
});
