// NIP-50 search over a real websocket: words in content (case- and accent-insensitive), in
// title-like tags and in kind 0 profiles; words AND-ed; relevance order (bm25) then recency;
// limit after ranking; other filter fields still apply; extensions ignored; hostile queries are
// plain words or refused (FTS5 syntax, too many words); live events are matched too; deleted, replaced and restricted events are never found.
//
// NIP-50: "Relays SHOULD interpret the query to the best of their ability and return events that
// match it. Relays SHOULD perform matching against `content` event field, and MAY perform matching
// against other fields if that makes sense in the context of a specific kind."
// "Results SHOULD be returned in descending order by quality of search result ... The `limit`
// filter SHOULD be applied after sorting by matching score."
// "A query string may contain `key:value` pairs ... relays SHOULD ignore extensions they don't support."
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { NostrEvent } from "../src/protocol/event.ts";
import { Client, fence, now, signer, startTestRelay, type Signer, type TestRelay } from "./helpers.ts";

let relay: TestRelay;
let off: TestRelay;
const clients: Client[] = [];

beforeAll(async () => {
  relay = await startTestRelay();
  off = await startTestRelay({ nips: { nip50: false } });
});
afterAll(async () => {
  for (const c of clients) c.close();
  await relay.stop();
  await off.stop();
});

async function connect(url = relay.url): Promise<Client> {
  const c = await Client.connect(url);
  clients.push(c);
  return c;
}

async function connectAs(s: Signer): Promise<Client> {
  const c = await connect();
  const challenge = (await c.next((f) => f[0] === "AUTH"))[1];
  const e = s.sign({
    kind: 22242,
    tags: [
      ["relay", relay.url],
      ["challenge", challenge],
    ],
  });
  c.send(["AUTH", e]);
  expect(await c.next((f) => f[0] === "OK" && f[1] === e.id)).toEqual(["OK", e.id, true, ""]);
  return c;
}

async function publishAll(c: Client, ...evs: NostrEvent[]): Promise<void> {
  for (const e of evs) expect(await c.publish(e)).toEqual(["OK", e.id, true, ""]);
}

/** A word no other test uses (letters only, so it is one token for any tokenizer). */
const word = (): string => "w" + Array.from({ length: 10 }, () => "abcdefghijklmnopqrstuvwxyz"[Math.floor(Math.random() * 26)]).join("");

let seq = 0;
/** REQ that must end with EOSE; returns the ids in the order received. */
async function search(c: Client, ...filters: object[]): Promise<string[]> {
  const id = `s${seq++}`;
  const r = await c.req(id, ...filters);
  expect(r.end).toEqual(["EOSE", id]);
  return r.events.map((e) => e.id);
}

const filler = (n: number) => Array.from({ length: n }, (_, i) => `filler${i % 37}`).join(" ");

describe("what is searched", () => {
  test("content words, case-insensitive, accents folded both ways", async () => {
    const w = word();
    const s = signer();
    const e = s.sign({ kind: 1, content: `Un Café CRÈME et une crème brûlée, ${w.toUpperCase()}!` });
    const other = s.sign({ kind: 1, content: `cafe creme ${w}ish` });
    const c = await connect();
    await publishAll(c, e, other);
    expect(await search(c, { search: w })).toEqual([e.id]);
    expect(await search(c, { search: `cafe ${w}` })).toEqual([e.id]);
    expect(await search(c, { search: `CAFÉ ${w}` })).toEqual([e.id]);
    expect(await search(c, { search: `brulee ${w}` })).toEqual([e.id]);
    expect(await search(c, { search: `crème ${w.toUpperCase()}` })).toEqual([e.id]);
    // Whole words: a longer word that starts with w is another word.
    expect(await search(c, { search: `${w}ish` })).toEqual([other.id]);
  });

  test("title, summary and subject tags", async () => {
    const [t, sm, sj] = [word(), word(), word()];
    const s = signer();
    const article = s.sign({
      kind: 30023,
      content: "body text",
      tags: [
        ["d", "a"],
        ["title", `The ${t} article`],
        ["summary", `about ${sm}`],
      ],
    });
    const note = s.sign({ kind: 1, content: "hello", tags: [["subject", `Re: ${sj}`]] });
    const c = await connect();
    await publishAll(c, article, note);
    expect(await search(c, { search: t })).toEqual([article.id]);
    expect(await search(c, { search: sm })).toEqual([article.id]);
    expect(await search(c, { search: sj })).toEqual([note.id]);
  });

  test("kind 0 profiles by name and about", async () => {
    const [name, about] = [word(), word()];
    const s = signer();
    const profile = s.sign({
      kind: 0,
      content: JSON.stringify({ name, about: `I like ${about} and stars`, picture: "https://example.com/p.png" }),
    });
    const c = await connect();
    await publishAll(c, profile);
    expect(await search(c, { search: name })).toEqual([profile.id]);
    expect(await search(c, { search: about, kinds: [0] })).toEqual([profile.id]);
    expect(await search(c, { search: `${name} ${about}` })).toEqual([profile.id]);
  });

  test("words are AND-ed, in any order", async () => {
    const [a, b] = [word(), word()];
    const s = signer();
    const both = s.sign({ kind: 1, content: `${a} and ${b}` });
    const onlyA = s.sign({ kind: 1, content: `${a} alone` });
    const onlyB = s.sign({ kind: 1, content: `${b} alone` });
    const c = await connect();
    await publishAll(c, both, onlyA, onlyB);
    expect(await search(c, { search: `${a} ${b}` })).toEqual([both.id]);
    expect(await search(c, { search: `${b}   ${a}` })).toEqual([both.id]);
    expect((await search(c, { search: a })).sort()).toEqual([both.id, onlyA.id].sort());
    expect(await search(c, { search: `${a} ${b} ${word()}` })).toEqual([]);
  });

  test("AND holds for a long query too (a pasted sentence of 20 words)", async () => {
    const words = Array.from({ length: 20 }, word);
    const s = signer();
    const all = s.sign({ kind: 1, content: words.join(" ") });
    const allButLast = s.sign({ kind: 1, content: words.slice(0, 19).join(" ") });
    const c = await connect();
    await publishAll(c, all, allButLast);
    expect(await search(c, { search: words.join(" ") })).toEqual([all.id]);
    // Live matching agrees.
    await c.req("live-long", { search: words.join(" "), limit: 0 }); // live only
    const later = s.sign({ kind: 1, content: words.slice(0, 19).join(" ") + " later" });
    const laterAll = s.sign({ kind: 1, content: words.join(" ") + " later" });
    await publishAll(c, later, laterAll);
    await c.next((f) => f[0] === "EVENT" && f[1] === "live-long" && f[2].id === laterAll.id);
    expect(c.eventsFor("live-long").map((e) => e.id)).toEqual([laterAll.id]);
  });

  test("the exact word as written is found in any script (Korean, Japanese, Russian, Greek, full-width, ligatures)", async () => {
    const w = word();
    const s = signer();
    const docs: [string, string][] = [
      ["안녕하세요", `안녕하세요 세계 ${w}`],
      ["がっこう", `がっこう に いく ${w}`],
      ["мой", `Привет мой друг ${w}`],
      ["ἀλήθεια", `ἀλήθεια ${w}`],
      ["Ｆｕｌｌ", `Ｆｕｌｌ width ${w}`],
      ["ﬁnance", `ﬁnance office ${w}`],
    ];
    const evs = docs.map(([, content]) => s.sign({ kind: 1, content }));
    const c = await connect();
    await publishAll(c, ...evs);
    const misses: string[] = [];
    for (const [i, [q]] of docs.entries()) {
      const got = await search(c, { search: `${q} ${w}` });
      if (got.join() !== evs[i]!.id) misses.push(q);
    }
    expect(misses).toEqual([]);
  });
});

describe("ranking and limit", () => {
  test("bm25 relevance first (more occurrences, shorter text), recency breaks ties, limit after ranking", async () => {
    const w = word();
    const s = signer();
    const t = now() - 1000;
    // Oldest but best: three occurrences in four words.
    const best = s.sign({ kind: 1, content: `${w} ${w} ${w} alpha`, created_at: t });
    // Once in four words.
    const good = s.sign({ kind: 1, content: `${w} beta gamma delta`, created_at: t + 1 });
    // Newest and worst: once in a long text.
    const weak = s.sign({ kind: 1, content: `${filler(150)} ${w} ${filler(50)}`, created_at: t + 2 });
    // Two equally relevant ones (same length, one occurrence): the newer first.
    const tieOld = s.sign({ kind: 1, content: `${w} kappa lambda omicron`, created_at: t - 50 });
    const tieNew = s.sign({ kind: 1, content: `${w} sigma lambda omicron`, created_at: t - 40 });
    const c = await connect();
    await publishAll(c, weak, tieOld, best, tieNew, good);
    const order = await search(c, { search: w });
    expect(order).toHaveLength(5);
    expect(order[0]).toBe(best.id);
    expect(order[order.length - 1]).toBe(weak.id);
    // good, tieNew and tieOld score the same (one occurrence, four words): newest first.
    expect(order.slice(1, 4)).toEqual([good.id, tieNew.id, tieOld.id]);
    // limit applies after ranking: the best (and oldest) event, not the newest.
    expect(await search(c, { search: w, limit: 1 })).toEqual([best.id]);
    expect(await search(c, { search: w, limit: 2 })).toEqual([best.id, good.id]);
  });

  test("several filters, each with its own search (the NIP-50 example)", async () => {
    const [orange, purple] = [word(), word()];
    const s = signer();
    const o = s.sign({ kind: 1, content: `an ${orange} thing` });
    const p1 = s.sign({ kind: 1, content: `a ${purple} thing` });
    const p7 = s.sign({ kind: 7, content: `${purple}` });
    const p3 = s.sign({ kind: 30023, content: `${purple}`, tags: [["d", "x"]] });
    const c = await connect();
    await publishAll(c, o, p1, p7, p3);
    const got = await search(c, { search: orange }, { kinds: [1, 7], search: purple });
    expect(got.sort()).toEqual([o.id, p1.id, p7.id].sort());
  });

  test("COUNT with search counts the matches", async () => {
    const w = word();
    const s = signer();
    const c = await connect();
    await publishAll(
      c,
      ...[1, 2, 3].map((i) => s.sign({ kind: 1, content: `${w} number ${i}` })),
      s.sign({ kind: 1, content: "no match" }),
    );
    c.send(["COUNT", "n", { search: w }]);
    expect(await c.next((f) => f[1] === "n")).toEqual(["COUNT", "n", { count: 3 }]);
  });
});

describe("search combined with other conditions", () => {
  const w = word();
  const x = signer();
  const y = signer();
  const t = now() - 5000;
  let evs: Record<string, NostrEvent>;
  beforeAll(async () => {
    evs = {
      x1green: x.sign({ kind: 1, content: `${w} one`, tags: [["t", "green"]], created_at: t }),
      x1blue: x.sign({ kind: 1, content: `${w} two`, tags: [["t", "blue"]], created_at: t + 10 }),
      x30023: x.sign({
        kind: 30023,
        content: `${w} article`,
        tags: [
          ["d", "d"],
          ["t", "green"],
        ],
        created_at: t + 20,
      }),
      y1green: y.sign({ kind: 1, content: `${w} three`, tags: [["t", "green"]], created_at: t + 30 }),
      xNoWord: x.sign({ kind: 1, content: "unrelated", tags: [["t", "green"]], created_at: t + 40 }),
    };
    const c = await connect();
    await publishAll(c, ...Object.values(evs));
  });
  const want = (...names: string[]) => names.map((n) => evs[n]!.id).sort();

  test("kinds, authors, #t, since/until, ids", async () => {
    const c = await connect();
    const got = async (f: object) => (await search(c, { search: w, ...f })).sort();
    expect(await got({})).toEqual(want("x1green", "x1blue", "x30023", "y1green"));
    expect(await got({ kinds: [1] })).toEqual(want("x1green", "x1blue", "y1green"));
    expect(await got({ authors: [x.pubkey] })).toEqual(want("x1green", "x1blue", "x30023"));
    expect(await got({ "#t": ["green"] })).toEqual(want("x1green", "x30023", "y1green"));
    expect(await got({ "#t": ["green"], authors: [x.pubkey], kinds: [1] })).toEqual(want("x1green"));
    expect(await got({ since: t + 10, until: t + 20 })).toEqual(want("x1blue", "x30023"));
    expect(await got({ ids: [evs.x1blue!.id, evs.xNoWord!.id] })).toEqual(want("x1blue"));
    expect(await got({ authors: [signer().pubkey] })).toEqual([]);
  });

  test("NIP-50 extensions are ignored: with a word they change nothing, alone they mean no search term", async () => {
    const c = await connect();
    expect((await search(c, { search: `include:spam ${w} language:en nsfw:false` })).sort()).toEqual(
      want("x1green", "x1blue", "x30023", "y1green"),
    );
    expect((await search(c, { search: `domain:example.com sentiment:positive ${w}`, kinds: [1], authors: [x.pubkey] })).sort()).toEqual(
      want("x1green", "x1blue"),
    );
    // Only extensions: recent events matching the other conditions, newest first, limit applied.
    expect(await search(c, { search: "include:spam language:en", authors: [x.pubkey] })).toEqual(
      ["xNoWord", "x30023", "x1blue", "x1green"].map((n) => evs[n]!.id),
    );
    expect(await search(c, { search: "include:spam", authors: [x.pubkey], limit: 2 })).toEqual(
      ["xNoWord", "x30023"].map((n) => evs[n]!.id),
    );
  });
});

describe("hostile queries", () => {
  // Read as plain words: punctuation of ordinary text, lone operator characters, SQL.
  const plain = [
    "",
    " ",
    "(",
    ")",
    "(((",
    "a)",
    "NEAR",
    "and or not near",
    "*",
    "*a",
    "^",
    "a^",
    ":",
    "a:",
    ":a",
    "text:a",
    "text : a",
    "-a",
    "+a",
    "a + b",
    "'",
    "\\",
    "%_",
    "'; DROP TABLE events; --",
    "\u0000",
    "hello, world!",
    "(maybe) c++ :-) 100%",
    "🎉",
    "🎉🔥 ❤️ 👩‍👩‍👧",
    "a".repeat(1000),
    Array.from({ length: 32 }, (_, i) => `w${i}`).join(" "),
    "🎉".repeat(500),
  ];
  // FTS5 syntax NIP-50 does not define, and more words than nips.nip50_max_terms (32): CLOSED invalid:.
  const refused = [
    '"',
    '""',
    '"unbalanced quote',
    'a "b',
    '\\"',
    "AND",
    "OR",
    "NOT",
    "a AND b",
    "a OR b",
    "NOT a",
    "a NOT",
    "NEAR(a b)",
    "NEAR(a b, 2)",
    "a NEAR/3 b",
    "a*",
    "^a",
    "{a b}",
    "AND ".repeat(250),
    '"(*^:NEAR'.repeat(111),
    Array.from({ length: 200 }, (_, i) => `w${i}`)
      .join(" ")
      .slice(0, 1000),
  ];

  test("plain ones get EOSE, FTS5 syntax and too many words CLOSED invalid: (never NOTICE), and the connection keeps working", async () => {
    const c = await connect();
    for (const [i, q] of [...plain, ...refused].entries()) {
      expect(q.length).toBeLessThanOrEqual(1000);
      const from = c.frames.length;
      const r = await c.req(`h${i}`, { search: q, limit: 3 });
      if (i < plain.length) expect([q, r.end]).toEqual([q, ["EOSE", `h${i}`]]);
      else expect([q, r.end]).toEqual([q, ["CLOSED", `h${i}`, expect.stringMatching(/^invalid: /)]]);
      expect(c.frames.slice(from).filter((f) => f[0] === "NOTICE")).toEqual([]);
      c.send(["CLOSE", `h${i}`]);
    }
    // Also as COUNT.
    for (const [i, q] of [...plain, ...refused].entries()) {
      c.send(["COUNT", `c${i}`, { search: q }]);
      const f = await c.next((f) => f[1] === `c${i}`);
      expect([q, f[0]]).toEqual([q, i < plain.length ? "COUNT" : "CLOSED"]);
    }
    expect(c.frames.filter((f) => f[0] === "NOTICE")).toEqual([]);
    const s = signer();
    const e = s.sign({ kind: 1, content: "still alive" });
    expect(await c.publish(e)).toEqual(["OK", e.id, true, ""]);
    expect(await search(c, { ids: [e.id] })).toEqual([e.id]);
  });

  test("parentheses and signs around a word still find that word; quotes, prefixes and ^ are refused", async () => {
    const w = word();
    const e = signer().sign({ kind: 1, content: `find ${w} here` });
    const c = await connect();
    await publishAll(c, e);
    for (const q of [`(${w})`, `${w})`, `-${w}`, `+${w}`, `🎉${w}🎉`, `${w}, here!`])
      expect([q, await search(c, { search: q })]).toEqual([q, [e.id]]);
    for (const [i, q] of [`"${w}"`, `${w}*`, `^${w}`, `"${w}`].entries()) {
      const r = await c.req(`q${i}`, { search: q });
      expect([q, r.end]).toEqual([q, ["CLOSED", `q${i}`, expect.stringMatching(/^invalid: search syntax/)]]);
    }
  });

  test("a search longer than 1000 characters: CLOSED invalid:", async () => {
    const c = await connect();
    const r = await c.req("long", { search: "a".repeat(1001) });
    expect(r.end[0]).toBe("CLOSED");
    expect(r.end[1]).toBe("long");
    expect(r.end[2]).toStartWith("invalid:");
    for (const bad of [1, null, ["a"], { a: 1 }]) {
      const b = await c.req("type", { search: bad });
      expect(b.end[0]).toBe("CLOSED");
      expect(b.end[2]).toStartWith("invalid:");
    }
  });
});

describe("live, deleted, replaced, restricted", () => {
  test("a subscription with search only receives new events containing the words", async () => {
    const [w, v] = [word(), word()];
    const sub = await connect();
    await sub.req("live", { search: w });
    await sub.req("live2", { search: `${w} ${v}`, kinds: [1] });
    const p = await connect();
    const s = signer();
    const miss = s.sign({ kind: 1, content: "nothing to see" });
    const hit = s.sign({ kind: 1, content: `a ${w.toUpperCase()} appears` });
    const title = s.sign({
      kind: 30023,
      content: "body",
      tags: [
        ["d", "x"],
        ["title", `${w} ${v}`],
      ],
    });
    const profile = s.sign({ kind: 0, content: JSON.stringify({ name: w }) });
    const both = s.sign({ kind: 1, content: `${v}, then ${w}` });
    await publishAll(p, miss, hit, title, profile, both);
    await sub.next((f) => f[0] === "EVENT" && f[1] === "live" && f[2].id === both.id);
    await sub.next((f) => f[0] === "EVENT" && f[1] === "live2" && f[2].id === both.id);
    expect(sub.eventsFor("live").map((e) => e.id)).toEqual([hit.id, title.id, profile.id, both.id]);
    expect(sub.eventsFor("live2").map((e) => e.id)).toEqual([both.id]);
  });

  test("a deleted event (NIP-09) is no longer found", async () => {
    const w = word();
    const s = signer();
    const e = s.sign({ kind: 1, content: `to be deleted ${w}` });
    const keep = s.sign({ kind: 1, content: `to be kept ${w}` });
    const c = await connect();
    await publishAll(c, e, keep);
    expect((await search(c, { search: w })).sort()).toEqual([e.id, keep.id].sort());
    await publishAll(c, s.sign({ kind: 5, tags: [["e", e.id]] }));
    expect(await search(c, { search: w })).toEqual([keep.id]);
    expect(await search(c, { search: `deleted ${w}` })).toEqual([]);
  });

  test("a replaced profile is no longer found by its old words", async () => {
    const s = signer();
    const tag = word();
    const v1 = s.sign({ kind: 0, content: JSON.stringify({ name: "alice", about: `v1 ${tag}` }), created_at: now() - 10 });
    const v2 = s.sign({ kind: 0, content: JSON.stringify({ name: "bob", about: "v2" }) });
    const c = await connect();
    await publishAll(c, v1);
    expect(await search(c, { search: "alice", authors: [s.pubkey] })).toEqual([v1.id]);
    await publishAll(c, v2);
    expect(await search(c, { search: "alice", authors: [s.pubkey] })).toEqual([]);
    expect(await search(c, { search: tag })).toEqual([]);
    expect(await search(c, { search: "bob", authors: [s.pubkey] })).toEqual([v2.id]);
    // An addressable event too.
    const w1 = word();
    const a1 = s.sign({ kind: 30023, content: `draft ${w1}`, tags: [["d", "post"]], created_at: now() - 10 });
    const a2 = s.sign({ kind: 30023, content: "final", tags: [["d", "post"]] });
    await publishAll(c, a1, a2);
    expect(await search(c, { search: w1 })).toEqual([]);
  });

  test("DMs (restricted kinds) are never found by their content or tags, not even by their recipient, stored or live", async () => {
    const w = word();
    const sender = signer();
    const to = signer();
    const dm4 = sender.sign({
      kind: 4,
      content: `plain ${w}`,
      tags: [
        ["p", to.pubkey],
        ["subject", w],
      ],
    });
    const gw = signer().sign({
      kind: 1059,
      content: `plain ${w}`,
      tags: [
        ["p", to.pubkey],
        ["title", w],
      ],
    });
    const r = await connectAs(to);
    await r.req("live", { search: w });
    await r.req("live-dm", { search: w, kinds: [4, 1059, 21059] });
    const p = await connect();
    await publishAll(p, dm4, gw, signer().sign({ kind: 21059, content: `plain ${w}`, tags: [["p", to.pubkey]] }));
    const pub = signer().sign({ kind: 1, content: `public ${w}` });
    await publishAll(p, pub);
    await r.next((f) => f[0] === "EVENT" && f[1] === "live" && f[2].id === pub.id);
    await (await fence(r, p))(); // a late DM or a second copy of pub would have come before it
    expect(r.eventsFor("live").map((e) => e.id)).toEqual([pub.id]);
    expect(r.eventsFor("live-dm")).toEqual([]);
    // Stored: the recipient can read them, but not find them by words.
    expect((await search(r, { kinds: [4, 1059], "#p": [to.pubkey] })).sort()).toEqual([dm4.id, gw.id].sort());
    expect(await search(r, { search: w })).toEqual([pub.id]);
    expect(await search(r, { search: w, kinds: [4, 1059] })).toEqual([]);
    expect(await search(await connect(), { search: w })).toEqual([pub.id]);
  });
});

test("with nips.nip50 = false a filter with search gets CLOSED invalid:, and NIP-11 lists 50 only when on", async () => {
  const c = await connect(off.url);
  const r = await c.req("s", { search: "anything" });
  expect(r.end[0]).toBe("CLOSED");
  expect(r.end[2]).toStartWith("invalid:");
  expect((await c.req("plain", { kinds: [1] })).end[0]).toBe("EOSE");
  const info = async (url: string) =>
    (await (await fetch(url.replace(/^ws/, "http"), { headers: { Accept: "application/nostr+json" } })).json()) as any;
  expect((await info(relay.url)).supported_nips).toContain(50);
  expect((await info(off.url)).supported_nips).not.toContain(50);
});
