// Issue 33's pages in a real headless Chromium (test/cdp.ts), against one relay with every
// admission model on: paid (the fake LNbits), NIP-05 verified (the fake nostr.json), the web of
// trust and NIP-43 membership. The /join page: a pubkey typed or given by a NIP-07 extension, the
// invoice as a QR code (decoded from the screenshot with zbarimg) and as text, paid without a
// reload. The console's admission view: every basis with its evidence, Admit and Revoke, checked
// over a websocket by what the relay then accepts.
// Skipped (with a message) when Chromium or zbarimg is missing outside CI; in CI that fails (test/ci.ts).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { npubEncode } from "nostr-tools/nip19";
import { BASIS_BIT, type Basis } from "../src/policy/admission.ts";
import { Browser, CHROMIUM, type Page } from "./cdp.ts";
import { needInCI } from "./ci.ts";
import { startFakeLnbits } from "./fakes/lnbits.ts";
import { startFakeNostrJson } from "./fakes/nostr-json.ts";
import { Client, failOnRelayErrors, signer, startTestRelay, waitUntil, type Signer, type TestRelay } from "./helpers.ts";
import { pngDataUrl, shotOf, signingPage } from "./pages-helpers.ts";
import { freePort } from "./process-helpers.ts";

const ZBARIMG = "/usr/bin/zbarimg";
const haveChromium = needInCI(
  "pages.test: Chromium",
  existsSync(CHROMIUM) ? undefined : `${CHROMIUM} is missing (apt-get install chromium)`,
);
const haveZbar =
  haveChromium &&
  needInCI("pages-access.test: zbarimg", existsSync(ZBARIMG) ? undefined : `${ZBARIMG} is missing (apt-get install zbar-tools)`);

const KEY = "pages-invoice-key";
const RELAY_NAME = "Paid <pages> relay";
const TERMS = "Be kind.\n<b>No spam</b>, or the admin revokes you.";
const ADMIN = signer();
const SEED = signer();
const BANNED = signer();

describe.skipIf(!haveZbar)("issue 33 pages in Chromium", () => {
  failOnRelayErrors();
  const lnbits = startFakeLnbits({ apiKey: KEY });
  const nostrJson = startFakeNostrJson();
  const dir = mkdtempSync(join(tmpdir(), "bunstr-pages-access-"));
  let relay: TestRelay;
  let browser: Browser | undefined;
  let page: Page;
  let http: string;
  let client: Client;
  /** Who the stubbed extension is. */
  let signingAs: Signer = ADMIN;
  /** Paid through the join page; listed and revoked in the console. */
  const paid = signer();

  beforeAll(async () => {
    const port = freePort();
    relay = await startTestRelay({
      network: { port },
      info: { name: RELAY_NAME, relay_url: `ws://127.0.0.1:${port}/`, icon: pngDataUrl([200, 120, 20]) },
      admin: { pubkeys: [ADMIN.pubkey] },
      authorization: { pubkey_denylist: [BANNED.pubkey] },
      pay_to_relay: {
        enabled: true,
        node_url: lnbits.url,
        api_secret: KEY,
        admission_cost: 2100,
        terms_message: TERMS,
        poll_seconds: 1,
        node_timeout_ms: 2000,
      },
      verified_users: { mode: "enabled", http_loopback: true, domain_interval_ms: 0, fetch_timeout_ms: 2000 },
      web_of_trust: { enabled: true, seeds: [SEED.pubkey] },
      membership: { enabled: true },
    } as any);
    await waitUntil("the admission lists loaded", () => relay.ctx.access?.ready === true, 10_000);
    http = `http://127.0.0.1:${port}`;
    client = await Client.connect(relay.url);
    browser = await Browser.launch();
    page = await signingPage(browser, () => signingAs);
  }, 60_000);

  afterAll(async () => {
    client?.close();
    await browser?.close();
    await relay?.stop();
    await lnbits.close();
    await nostrJson.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const note = (s: Signer) => s.sign({ kind: 1, content: `note ${Math.random()}` });
  /** Whether the relay stores a note by `s` now, over the websocket. */
  const accepts = async (s: Signer) => (await client.publish(note(s)))[2];
  const admittedBy = (s: Signer, basis: Basis) => ((relay.ctx.access?.bits(s.pubkey) ?? 0) & BASIS_BIT[basis]) !== 0;
  let tick = 0;
  const profile = (s: Signer, content: Record<string, unknown>) =>
    s.sign({ kind: 0, content: JSON.stringify(content), created_at: Math.floor(Date.now() / 1000) + ++tick });
  const js = (v: unknown) => JSON.stringify(v);
  const state = () => page.evaluate<string>(`document.getElementById("join").dataset.state`);
  const joinMessage = () => page.evaluate<string>(`document.getElementById("message").textContent`);

  /** Decodes the QR code on screen (its screenshot, `scale` device pixels a CSS pixel) with zbarimg. */
  async function decodeQr(scale = 1): Promise<string> {
    const file = join(dir, `qr-${Date.now()}.png`);
    writeFileSync(file, Buffer.from(await shotOf(page, "qr", scale), "base64"));
    const run = Bun.spawnSync([ZBARIMG, "--raw", "-q", file]);
    return run.stdout.toString().trim();
  }

  test("the join page shows the relay's name, icon, terms as text and cost, with ?pubkey= prefilled, under its own CSP", async () => {
    const res = await fetch(`${http}/join?pubkey=${npubEncode(paid.pubkey)}`);
    expect(res.status).toBe(200);
    const csp = res.headers.get("content-security-policy")!;
    expect(csp).toContain("connect-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    const html = await res.text();
    const hash = (s: string) => `'sha256-${new Bun.CryptoHasher("sha256").update(s).digest("base64")}'`;
    expect(csp).toContain(`script-src ${hash(/<script>([\s\S]*)<\/script>/.exec(html)![1]!)}`);
    expect(csp).toContain(`style-src ${hash(/<style>([\s\S]*?)<\/style>/.exec(html)![1]!)}`);

    await page.goto(`${http}/join?pubkey=${npubEncode(paid.pubkey)}`);
    const shown = await page.waitFor<any>(`(() => { const icon = document.getElementById("icon");
      return icon && icon.naturalWidth > 0 && {
        title: document.title, name: document.getElementById("name").textContent, terms: document.getElementById("terms").textContent,
        bold: document.querySelectorAll("#terms b").length, cost: document.getElementById("cost").textContent,
        pubkey: document.getElementById("pubkey").value, state: document.getElementById("join").dataset.state,
        csp: window.__csp }; })()`);
    expect(shown).toEqual({
      title: `Join ${RELAY_NAME}`,
      name: RELAY_NAME,
      terms: TERMS,
      bold: 0,
      cost: "2,100 sats",
      pubkey: npubEncode(paid.pubkey),
      state: "idle",
      csp: [],
    });
  });

  test("Get invoice: a QR code that decodes to lightning: + the bolt11 in upper case, the invoice as text; paid without a reload", async () => {
    expect(await accepts(paid)).toBe(false);
    await page.goto(`${http}/join?pubkey=${npubEncode(paid.pubkey)}`);
    await page.evaluate(`window.__sameDocument = true; document.getElementById("get-invoice").click()`);
    await page.waitFor(`document.getElementById("join").dataset.state === "invoice"`);
    const bolt11 = await page.evaluate<string>(`document.getElementById("invoice").textContent`);
    const invoice = [...lnbits.invoices.values()].find((i) => i.bolt11 === bolt11);
    expect(invoice?.amountSats).toBe(2100);
    expect(await joinMessage()).toBe("Pay 2,100 sats with a Lightning wallet: scan the code or copy the invoice.");
    expect(await page.evaluate(`document.getElementById("qr-link").getAttribute("href")`)).toBe(`lightning:${bolt11}`);
    expect(await decodeQr()).toBe(`lightning:${bolt11}`.toUpperCase());

    const unpaid = await shotOf(page, "join");
    lnbits.markPaid(invoice!.hash);
    // The page asks /join/status every 2 s; the relay asks the node (no webhook needed).
    await page.waitFor(`document.getElementById("join").dataset.state === "paid"`, 15_000);
    expect(await joinMessage()).toBe("Paid \u2014 you can publish now.");
    expect(await page.evaluate("window.__sameDocument")).toBe(true);
    expect(await page.evaluate(`document.getElementById("invoice-box").hidden`)).toBe(true);
    expect(await shotOf(page, "join")).not.toBe(unpaid);
    expect(await accepts(paid)).toBe(true);

    // Again: already admitted, no second invoice.
    const invoices = lnbits.invoices.size;
    await page.goto(`${http}/join?pubkey=${paid.pubkey}`);
    await page.evaluate(`document.getElementById("get-invoice").click()`);
    await page.waitFor(`document.getElementById("join").dataset.state === "admitted"`);
    expect(await joinMessage()).toBe("This pubkey is already admitted: you can publish now.");
    expect(lnbits.invoices.size).toBe(invoices);
  }, 40_000);

  test("long invoices (route hints make real ones so) decode too: 300, 700 and 1,200 characters", async () => {
    // The relay's answer is replaced in the browser (DevTools Fetch), as a node with long invoices would give it.
    const BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l";
    let bolt11 = "";
    await page.send("Fetch.enable", { patterns: [{ urlPattern: "*/join/invoice*" }] });
    const off = page.on("Fetch.requestPaused", (p) => {
      const body = JSON.stringify({ invoice: bolt11, payment_hash: "0".repeat(64), amount_sats: 2100 });
      void page.send("Fetch.fulfillRequest", {
        requestId: p.requestId,
        responseCode: 200,
        responseHeaders: [{ name: "Content-Type", value: "application/json" }],
        body: Buffer.from(body).toString("base64"),
      });
    });
    try {
      for (const length of [300, 700, 1200]) {
        bolt11 = "lnbc21u1p" + Array.from({ length: length - 9 }, () => BECH32[Math.floor(Math.random() * 32)]).join("");
        await page.goto(`${http}/join?pubkey=${signer().pubkey}`);
        await page.evaluate(`document.getElementById("get-invoice").click()`);
        await page.waitFor(`document.getElementById("join").dataset.state === "invoice"`);
        expect(await page.evaluate(`document.getElementById("invoice").textContent`)).toBe(bolt11);
        // At 1,200 characters the code has 125+ modules: read at 2 device pixels a CSS pixel (a phone's screen has more).
        expect(await decodeQr(length > 1000 ? 2 : 1)).toBe(`LIGHTNING:${bolt11.toUpperCase()}`);
      }
    } finally {
      off();
      await page.send("Fetch.disable");
    }
  }, 30_000);

  test("Sign in with extension fills the pubkey from NIP-07 getPublicKey; without an extension the page says so", async () => {
    const someone = signer();
    signingAs = someone;
    await page.goto(`${http}/join`);
    expect(await page.evaluate(`document.getElementById("pubkey").value`)).toBe("");
    await page.evaluate(`document.getElementById("sign-in").click()`);
    expect(await page.waitFor(`document.getElementById("pubkey").value`)).toBe(someone.pubkey);
    expect(await state()).toBe("idle");
    signingAs = ADMIN;

    const bare = await browser!.newPage();
    try {
      await bare.goto(`${http}/join`);
      await bare.evaluate(`document.getElementById("sign-in").click()`);
      expect(
        await bare.waitFor(`document.getElementById("join").dataset.state === "error" && document.getElementById("message").textContent`),
      ).toStartWith("No Nostr extension found");
    } finally {
      await bare.send("Page.close").catch(() => {});
    }
  });

  test("errors in words: a malformed pubkey before any call, the relay's refusal of a banned one, an invoice that expired unpaid", async () => {
    await page.goto(`${http}/join`);
    const invoices = lnbits.invoices.size;
    await page.evaluate(`document.getElementById("pubkey").value = "npub1nope"; document.getElementById("get-invoice").click()`);
    expect(
      await page.waitFor(`document.getElementById("join").dataset.state === "error" && document.getElementById("message").textContent`),
    ).toBe("That is not a pubkey: enter an npub1\u2026 or 64 hex characters.");
    await page.evaluate(`document.getElementById("pubkey").value = ${js(BANNED.pubkey)}; document.getElementById("get-invoice").click()`);
    expect(
      await page.waitFor(
        `document.getElementById("join").dataset.state === "error" && document.getElementById("message").textContent.includes("banned") && document.getElementById("message").textContent`,
      ),
    ).toBe("No invoice: blocked: this pubkey is banned from this relay");
    expect(lnbits.invoices.size).toBe(invoices);

    // An invoice not paid in its lifetime (here cut to 1 s in the page): the page stops asking and says so.
    const late = signer();
    await page.evaluate(
      `document.body.dataset.expirySeconds = "1"; document.getElementById("pubkey").value = ${js(late.pubkey)}; document.getElementById("get-invoice").click()`,
    );
    await page.waitFor(`document.getElementById("join").dataset.state === "invoice"`);
    expect(
      await page.waitFor(`document.getElementById("join").dataset.state === "expired" && document.getElementById("message").textContent`),
    ).toBe("This invoice has expired without a payment: get a new one.");
    expect(await page.evaluate(`document.getElementById("invoice-box").hidden`)).toBe(true);
  });

  describe("the console's admission view", () => {
    const verified = signer();
    const trusted = signer();
    const member = signer();
    const added = signer();
    const stranger = signer();
    const row = (pk: string) => `document.querySelector('#admissions tr[data-key="${pk}"]')`;

    /** Clicks what an expression finds on the admin page; the call's outcome as #result shows it. */
    async function clickWhere(button: string): Promise<{ state: string; text: string }> {
      const before = await page.evaluate<string>(`document.getElementById("result").dataset.seq`);
      await page.evaluate(`(${button}).click()`);
      return page.waitFor(
        `(() => { const r = document.getElementById("result");
          return r.dataset.seq !== ${js(before)} && r.dataset.state !== "pending" && { state: r.dataset.state, text: r.textContent }; })()`,
      );
    }

    /** Chooses a basis in the view's filter ("" every basis). */
    const filter = (basis: string) =>
      page.evaluate(
        `(() => { const f = document.getElementById("access-filter"); f.value = ${js(basis)}; f.dispatchEvent(new Event("change")); })()`,
      );

    beforeAll(async () => {
      // Names for everyone shown; a verified writer through the fake nostr.json; a followed one.
      expect((await client.publish(profile(ADMIN, { name: "Ada Admin" })))[2]).toBe(true);
      expect((await client.publish(profile(paid, { name: "Pat Paid" })))[2]).toBe(true);
      expect((await client.publish(profile(SEED, { name: "Sam Seed" })))[2]).toBe(true);
      nostrJson.names.set("vera", verified.pubkey);
      expect((await client.publish(profile(verified, { name: "Vera Verified", nip05: `vera@${nostrJson.domain}` })))[2]).toBe(true);
      expect((await client.publish(SEED.sign({ kind: 3, tags: [["p", trusted.pubkey]] })))[2]).toBe(true);
      await waitUntil("the NIP-05 check", () => admittedBy(verified, "verified"), 10_000);
      await waitUntil("the web of trust rebuilt", () => admittedBy(trusted, "trusted"), 10_000);
      expect((await client.publish(profile(trusted, { name: "Tia Trusted" })))[2]).toBe(true);
      expect((await client.publish(profile(member, { name: "Max Member" })))[2]).toBe(false); // not yet a member
    }, 30_000);

    test("lists paid (invoice), verified (address, last check), trusted (path as names) and member (invited by) with badges, counts and a filter", async () => {
      signingAs = ADMIN;
      await page.goto(`${http}/admin`);
      await page.waitFor(`!document.getElementById("access-section").hidden && !document.getElementById("members-box").hidden`);
      // A member by invitation: the console's Create invite, then a NIP-43 join request with the code.
      expect((await clickWhere(`document.getElementById("create-member-invite")`)).state).toBe("ok");
      const code = await page.evaluate<string>(`document.getElementById("member-invite").textContent`);
      expect((await relay.ctx.store.admission.invitesBy(ADMIN.pubkey)).map((i) => i.code)).toEqual([code]);
      const joiner = await Client.connect(relay.url);
      try {
        expect((await joiner.auth(member, relay.ctx.config.info.relay_url))[2]).toBe(true);
        const [, , joined] = await joiner.publish(
          member.sign({ kind: 28934, tags: [["-"], ["claim", code]], created_at: Math.floor(Date.now() / 1000) }),
        );
        expect(joined).toBe(true);
      } finally {
        joiner.close();
      }
      expect((await client.publish(profile(member, { name: "Max Member" })))[2]).toBe(true);
      // A member by the Admit form's "as member" box (addmember).
      await page.evaluate(
        `document.getElementById("admit-input").value = ${js(npubEncode(added.pubkey))}; document.getElementById("admit-member").checked = true`,
      );
      expect(await clickWhere(`document.getElementById("admit")`)).toEqual({ state: "ok", text: "addmember: ok" });
      expect(admittedBy(added, "member")).toBe(true);

      const cells = (pk: string) => `(() => { const r = ${row(pk)}; return r && [...r.cells].map((td) => td.textContent); })()`;
      const badges = (pk: string) =>
        page.evaluate<string[]>(`[...${row(pk)}.querySelectorAll(".badges .badge")].map((b) => b.dataset.basis)`);
      // Names arrive from the kind 0s after the rows: wait for them.
      const named = (pk: string, name: string) =>
        page.waitFor<string[]>(`(() => { const c = ${cells(pk)}; return c && c[0].includes(${js(name)}) && c; })()`);

      const hash = relay.ctx.store.admission.recentInvoices(10).then((l) => l.find((i) => i.pubkey === paid.pubkey)!.payment_hash);
      const p = await named(paid.pubkey, "Pat Paid");
      expect(await badges(paid.pubkey)).toEqual(["paid"]);
      expect(p[2]).toMatch(/^paid 2,100 sats, invoice [0-9a-f]{12}…, /);
      expect(await page.evaluate(`${row(paid.pubkey)}.querySelector(".evidence code").title`)).toBe(await hash);
      expect(p[4]).toBe("Revoke paid");

      const v = await named(verified.pubkey, "Vera Verified");
      expect(await badges(verified.pubkey)).toEqual(["verified"]);
      expect(v[2]).toContain(`vera@${nostrJson.domain} verified until `);
      expect(v[2]).toContain(", last check ");
      expect(v[4]).toBe("Revoke verified");

      const t = await named(trusted.pubkey, "Tia Trusted");
      expect(await badges(trusted.pubkey)).toEqual(["trusted"]);
      expect(
        await page.waitFor(`(() => { const t = ${row(trusted.pubkey)}.cells[2].textContent; return t.includes("Sam Seed") && t; })()`),
      ).toMatch(/^follows: .*Sam Seed.* → .*Tia Trusted.* \(depth 1\)$/);
      expect(t[4]).toBe(""); // banned, not revoked

      const m = await named(member.pubkey, "Max Member");
      expect(await badges(member.pubkey)).toEqual(["member"]);
      expect(
        await page.waitFor(`(() => { const t = ${row(member.pubkey)}.cells[2].textContent; return t.includes("Ada Admin") && t; })()`),
      ).toMatch(/^invited by .*Ada Admin/);
      expect(m[4]).toBe("Revoke member");
      // Added by an admin: the relay signs the 8000, so the relay's key is who added.
      expect(await page.evaluate(`${row(added.pubkey)}.cells[2].textContent`)).toStartWith("added by ");
      expect(await page.evaluate(`${row(added.pubkey)}.cells[2].querySelector("[data-profile]").dataset.profile`)).toBe(
        relay.ctx.relayKey.pubkey,
      );
      // The admin is admitted by hand (the [admin] list).
      expect(await badges(ADMIN.pubkey)).toEqual(["manual"]);

      const counts = await page.evaluate<Record<string, string>>(
        `Object.fromEntries([...document.querySelectorAll("#access-counts .badge")].map((b) => [b.dataset.basis, b.dataset.count]))`,
      );
      expect(counts).toEqual({ paid: "1", verified: "1", trusted: "2", member: "2", manual: "2" }); // the seed, the admin and the relay's key
      await filter("verified");
      expect(await page.evaluate(`[...document.querySelectorAll("#admissions tbody tr[data-key]")].map((r) => r.dataset.key)`)).toEqual([
        verified.pubkey,
      ]);
      await filter("");

      // The invoices (paid) and the members (added by the admin).
      const inv = await page.waitFor<
        string[]
      >(`(() => { const r = document.querySelector('#invoices tr[data-key="' + ${js(await hash)} + '"]');
        return r && r.cells[1].textContent.includes("Pat Paid") && [...r.cells].map((td) => td.textContent); })()`);
      expect(inv[2]).toBe("2,100 sats");
      expect(inv[3]).toStartWith("paid ");
      const mem = await page.waitFor<string[]>(`(() => { const r = document.querySelector('#members tr[data-key="${member.pubkey}"]');
        return r && r.cells[1].textContent.includes("Ada Admin") && [...r.cells].map((td) => td.textContent); })()`);
      expect(mem[0]).toContain("Max Member");
      expect(mem[3]).toBe("Remove");
    }, 40_000);

    test("Admit and Revoke change what the relay accepts; the table's screenshot changes when a row goes", async () => {
      expect(await accepts(stranger)).toBe(false);
      await page.evaluate(
        `document.getElementById("admit-input").value = ${js(stranger.pubkey)}; document.getElementById("admit-member").checked = false`,
      );
      expect(await clickWhere(`document.getElementById("admit")`)).toEqual({ state: "ok", text: "allowpubkey: ok" });
      expect(await accepts(stranger)).toBe(true);
      const manual = await page.waitFor<string[]>(
        `(() => { const r = ${row(stranger.pubkey)}; return r && [...r.cells].map((td) => td.textContent); })()`,
      );
      expect(manual.slice(1)).toEqual(["manual", "allowed here (NIP-86)", "", "Unallow"]);

      // Revoke paid: the row goes (Pat had no other basis), Pat's notes are refused; the pixels change.
      await page.evaluate(`document.getElementById("tab-admission").click()`);
      const before = await shotOf(page, "admissions");
      expect(await clickWhere(`${row(paid.pubkey)}.querySelector('button[data-method="revokeadmission"]')`)).toEqual({
        state: "ok",
        text: "revokeadmission: ok",
      });
      await page.waitFor(`!${row(paid.pubkey)}`);
      expect(await accepts(paid)).toBe(false);
      expect(await shotOf(page, "admissions")).not.toBe(before);

      // Unallow from the row: the stranger is refused again.
      expect(await clickWhere(`${row(stranger.pubkey)}.querySelector('button[data-method="unallowpubkey"]')`)).toEqual({
        state: "ok",
        text: "unallowpubkey: ok",
      });
      await page.waitFor(`!${row(stranger.pubkey)}`);
      expect(await accepts(stranger)).toBe(false);

      // Remove a member from the members table.
      expect(await clickWhere(`document.querySelector('#members tr[data-key="${member.pubkey}"] button')`)).toEqual({
        state: "ok",
        text: "removemember: ok",
      });
      await page.waitFor(`!${row(member.pubkey)} && !document.querySelector('#members tr[data-key="${member.pubkey}"]')`);
      expect(await accepts(member)).toBe(false);
    }, 40_000);
  });
});
