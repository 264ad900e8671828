// `bunstr sync` as a real process against real relay processes (loopback, separate data dirs):
// NIP-77 reconciliation both ways and one way, the plain REQ fallback against a relay with
// NIP-77 off, and a filter. Plus the negentropy client (initiator) at the pure level.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { nip77 } from "nostr-tools";
import { NegentropyClient } from "../src/nips/nip77-client.ts";
import { NegentropyServer, NegentropyStorage, type NegentropyItem } from "../src/nips/nip77.ts";
import type { NostrEvent } from "../src/protocol/event.ts";
import { prng } from "../bench/lib/stats.ts";
import { now, signer } from "./helpers.ts";
import { BUNSTR, bunstr, importFile, writeLines } from "./ops-helpers.ts";
import { spawnRelay, type RelayProcess } from "./process-helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "bunstr-ops-sync-"));
const relays: RelayProcess[] = [];
afterAll(async () => {
  for (const r of relays) {
    r.proc.kill();
    await r.proc.exited;
  }
  rmSync(dir, { recursive: true, force: true });
});

describe("negentropy client (pure)", () => {
  const randomId = (rnd: () => number) =>
    Array.from({ length: 8 }, () =>
      Math.floor(rnd() * 0x100000000)
        .toString(16)
        .padStart(8, "0"),
    ).join("");
  function scenario(
    seed: number,
    shared: number,
    mine: number,
    theirs: number,
    ts = (r: () => number) => 1_700_000_000 + Math.floor(r() * 1000),
  ) {
    const rnd = prng(seed);
    const make = (n: number): NegentropyItem[] => Array.from({ length: n }, () => ({ timestamp: ts(rnd), id: randomId(rnd) }));
    const both = make(shared);
    const a = make(mine);
    const b = make(theirs);
    return { client: [...both, ...a], server: [...both, ...b], have: a.map((i) => i.id).sort(), need: b.map((i) => i.id).sort() };
  }
  function run(client: NegentropyClient, answer: (q: string) => string) {
    const have = new Set<string>();
    const need = new Set<string>();
    let q: string | null = client.initiate();
    let trips = 0;
    while (q !== null) {
      if (++trips > 500) throw new Error("no convergence");
      q = client.reconcile(
        answer(q),
        (id) => have.add(id),
        (id) => need.add(id),
      );
    }
    return { have: [...have].sort(), need: [...need].sort() };
  }
  const cases: [string, number, number, number, number?][] = [
    ["overlapping", 1, 3000, 200, 150],
    ["client empty", 2, 0, 0, 800],
    ["server empty", 3, 0, 900, 0],
    ["both empty", 4, 0, 0, 0],
    ["many differences", 5, 1000, 1200, 1300],
  ];
  for (const [name, seed, shared, mine, theirs] of cases) {
    test(`${name}: against our relay side, with and without frame limits`, () => {
      const sc = scenario(seed, shared, mine, theirs!);
      for (const [clientLimit, serverLimit] of [
        [0, 0],
        [4096, 4096],
        [30_000, 60_000],
      ]) {
        const server = new NegentropyServer(NegentropyStorage.from(sc.server), serverLimit);
        const r = run(new NegentropyClient(NegentropyStorage.from(sc.client), clientLimit), (q) => server.reconcile(q));
        expect(r).toEqual({ have: sc.have, need: sc.need });
      }
    });
    test(`${name}: sends the same queries as nostr-tools' initiator, message for message`, () => {
      const sc = scenario(seed + 100, shared, mine, theirs!, () => 1_700_000_000);
      const st = new nip77.NegentropyStorageVector();
      for (const it of sc.client) st.insert(it.timestamp, it.id);
      st.seal();
      const theirs_ = new nip77.Negentropy(st, 1e9);
      const ours = new NegentropyClient(NegentropyStorage.from(sc.client));
      const server = new NegentropyServer(NegentropyStorage.from(sc.server));
      const have = new Set<string>();
      const need = new Set<string>();
      let q: string | null = ours.initiate();
      expect(q).toBe(theirs_.initiate());
      while (q !== null) {
        const reply = server.reconcile(q);
        q = ours.reconcile(
          reply,
          (id) => have.add(id),
          (id) => need.add(id),
        );
        expect(q).toBe(
          theirs_.reconcile(
            reply,
            () => {},
            () => {},
          ),
        );
      }
      expect({ have: [...have].sort(), need: [...need].sort() }).toEqual({ have: sc.have, need: sc.need });
    });
  }
});

// ---- real processes --------------------------------------------------------------------------

const alice = signer();
const bob = signer();
const carol = signer();
const t = now();
let seq = 0;
const note = (s: typeof alice, text: string) => s.sign({ kind: 1, content: `${text} ${seq++}`, created_at: t - 10_000 + seq });

const shared = Array.from({ length: 120 }, (_, i) => note(i % 2 ? alice : bob, "shared"));
const onlyA = Array.from({ length: 40 }, () => note(alice, "only on A"));
const onlyB = [...Array.from({ length: 30 }, () => note(bob, "only on B")), ...Array.from({ length: 10 }, () => note(carol, "carol on B"))];
// Behind the fallback (NIP-77 off): more than one REQ page of 500.
const onlyC = Array.from({ length: 620 }, (_, i) =>
  (i % 3 ? bob : carol).sign({ kind: 1, content: `only on C ${i}`, created_at: t - 5000 + Math.floor(i / 4) }),
);

async function storedIds(dataDir: string): Promise<Set<string>> {
  const r = await bunstr(["export", "--data-dir", dataDir]);
  if (r.code !== 0) throw new Error(`export exited ${r.code}: ${r.stderr}`);
  return new Set(
    r.stdout
      .trim()
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l).id as string),
  );
}

async function seeded(name: string, events: NostrEvent[]): Promise<string> {
  const d = join(dir, name);
  mkdirSync(d, { recursive: true });
  if (events.length > 0) {
    const s = await importFile(["--data-dir", d], writeLines(join(dir, `${name}.jsonl`), events));
    expect(s.accepted).toBe(events.length);
  }
  return d;
}

async function relayOn(dataDir: string, extra: string[] = []): Promise<RelayProcess> {
  const r = await spawnRelay(BUNSTR, ["--data-dir", dataDir, ...extra], dir);
  relays.push(r);
  return r;
}

const ids = (events: NostrEvent[]) => events.map((e) => e.id);
const sync = (args: string[]) => bunstr(["sync", ...args]);

test("--dir down changes only the local database, --dir both makes both sides hold the union (local relay running)", async () => {
  const dirA = await seeded("a", [...shared, ...onlyA]);
  const dirB = await seeded("b", [...shared, ...onlyB]);
  const relayA = await relayOn(dirA); // the local database is in use by its relay throughout
  const relayB = await relayOn(dirB);

  const down = await sync([relayB.url, "--dir", "down", "--data-dir", dirA, "--json"]);
  expect(down.code).toBe(0);
  const sd = JSON.parse(down.stdout);
  expect(sd).toMatchObject({ method: "negentropy", local: 160, have: 40, need: 40, received: 40, uploaded: 0 });
  expect(sd.imported.accepted).toBe(40);
  expect(sd.imported.badSig).toBe(0);
  expect(await storedIds(dirA)).toEqual(new Set(ids([...shared, ...onlyA, ...onlyB])));
  expect(await storedIds(dirB)).toEqual(new Set(ids([...shared, ...onlyB])));

  // Human summary, both ways: only A's own events go up now.
  const both = await sync([relayB.url, "--dir", "both", "--data-dir", dirA]);
  expect(both.code).toBe(0);
  expect(both.stdout).toContain("NIP-77");
  expect(both.stdout).toContain("only here (have) 40, only there (need) 0");
  expect(both.stdout).toContain("uploaded 40, refused 0");
  const union = new Set(ids([...shared, ...onlyA, ...onlyB]));
  expect(await storedIds(dirA)).toEqual(union);
  expect(await storedIds(dirB)).toEqual(union);

  // The relay on A serves what sync stored beside it.
  const again = await sync([relayA.url, "--dir", "both", "--data-dir", dirB, "--json"]);
  expect(JSON.parse(again.stdout)).toMatchObject({ method: "negentropy", have: 0, need: 0, uploaded: 0, received: 0 });
}, 120_000);

test("a fresh database, both ways at once; a refused upload is counted by reason", async () => {
  const dirB2 = await seeded("b2", [...shared.slice(0, 20), ...onlyB]);
  const relayB2 = await relayOn(dirB2, [
    "--config",
    writeConfig("deny-alice.toml", `[authorization]\npubkey_denylist = ["${alice.pubkey}"]\n`),
  ]);
  const dirL = await seeded("l", [...shared.slice(0, 30), ...onlyA.slice(0, 5)]);
  const r = await sync([relayB2.url, "--data-dir", dirL, "--json"]);
  expect(r.code).toBe(0);
  const s = JSON.parse(r.stdout);
  // L has shared 20..29 (5 of them alice's) and 5 of alice's: 5 uploaded (bob's), 10 refused.
  expect(s).toMatchObject({ method: "negentropy", local: 35, have: 15, need: 40, received: 40, uploaded: 5, refused: { blocked: 10 } });
  expect(await storedIds(dirL)).toEqual(new Set(ids([...shared.slice(0, 30), ...onlyA.slice(0, 5), ...onlyB])));
}, 120_000);

test("every have id is accounted for: uploaded, already there, or no longer here because the download replaced or deleted it", async () => {
  // Here: alice's old profile, a note of bob's, a DM both sides hold and carol's new note.
  // There: alice's newer profile, bob's deletion of that note, the DM (its NIP-77 answer leaves DMs
  // out for a connection without AUTH, so it looks like "only here").
  const profileOld = alice.sign({ kind: 0, content: '{"name":"old"}', created_at: t - 500 });
  const profileNew = alice.sign({ kind: 0, content: '{"name":"new"}', created_at: t - 100 });
  const doomed = bob.sign({ kind: 1, content: "to be deleted", created_at: t - 400 });
  const deletion = bob.sign({ kind: 5, tags: [["e", doomed.id]], created_at: t - 50 });
  const dm = bob.sign({ kind: 4, content: "secret?iv=AAAAAAAAAAAAAAAAAAAAAA==", tags: [["p", carol.pubkey]], created_at: t - 300 });
  const fresh = carol.sign({ kind: 1, content: "carol, new", created_at: t - 200 });
  const dirR = await seeded("r9", [profileNew, deletion, dm]);
  const relayR = await relayOn(dirR);
  const dirL = await seeded("l9", [profileOld, doomed, dm, fresh]);

  const r = await sync([relayR.url, "--dir", "both", "--data-dir", dirL, "--json"]);
  expect(r.code).toBe(0);
  const s = JSON.parse(r.stdout);
  expect(s).toMatchObject({ method: "negentropy", local: 4, have: 4, need: 2, received: 2, notReceived: 0 });
  expect(s.imported.accepted).toBe(2);
  expect({ uploaded: s.uploaded, alreadyThere: s.alreadyThere, refused: s.refused, gone: s.gone }).toEqual({
    uploaded: 1,
    alreadyThere: 1,
    refused: {},
    gone: { "replaced by a newer version": 1, "deleted by a deletion request (NIP-09)": 1 },
  });
  const union = new Set(ids([profileNew, deletion, dm, fresh]));
  expect(await storedIds(dirL)).toEqual(union);
  expect(await storedIds(dirR)).toEqual(union);

  // The same in words: the four have ids add up.
  const dirL2 = await seeded("l9b", [profileOld, doomed, dm]);
  const human = await sync([relayR.url, "--dir", "both", "--data-dir", dirL2]);
  expect(human.code).toBe(0);
  expect(human.stdout).toContain("only here (have) 3, only there (need) 3");
  expect(human.stdout).toContain(
    "uploaded 0, refused 0, already there 1 (the remote held them; its answer did not list them), " +
      "not uploaded because no longer here 2 (replaced by a newer version 1, deleted by a deletion request (NIP-09) 1)",
  );
}, 120_000);

function writeConfig(name: string, text: string): string {
  const f = join(dir, name);
  writeFileSync(f, text);
  return f;
}

test("falls back to a paged REQ download when the relay has NIP-77 off, and uploads what it did not list", async () => {
  const dirC = await seeded("c", onlyC);
  const relayC = await relayOn(dirC, ["--config", writeConfig("no-nip77.toml", "[nips]\nnip77 = false\n")]);
  const dirL = await seeded("l2", onlyA.slice(0, 7));
  const r = await sync([relayC.url, "--dir", "both", "--data-dir", dirL, "--json"]);
  expect(r.code).toBe(0);
  const s = JSON.parse(r.stdout);
  expect(s.method).toBe("fallback");
  expect(s.fallbackReason).toStartWith("NEG-ERR:");
  expect(s).toMatchObject({ local: 7, have: 7, need: 620, received: 620, uploaded: 7 });
  expect(s.imported.accepted).toBe(620);
  const all = new Set(ids([...onlyC, ...onlyA.slice(0, 7)]));
  expect(await storedIds(dirL)).toEqual(all);
  expect(await storedIds(dirC)).toEqual(all);

  const human = await sync([relayC.url, "--dir", "down", "--data-dir", dirL]);
  expect(human.stdout).toContain("plain REQ download (NEG-ERR: error: negentropy is not supported");
}, 120_000);

test("a filter limits what is synced, both ways", async () => {
  const dirB3 = await seeded("b3", [...shared.slice(0, 10), ...onlyB]);
  const relayB3 = await relayOn(dirB3);
  const dirL = await seeded("l3", [...onlyA.slice(0, 3), bob.sign({ kind: 1, content: "bob local", created_at: t - 1 })]);
  const r = await sync([relayB3.url, "--filter", JSON.stringify({ authors: [carol.pubkey, alice.pubkey] }), "--data-dir", dirL, "--json"]);
  expect(r.code).toBe(0);
  expect(JSON.parse(r.stdout)).toMatchObject({ method: "negentropy", local: 3, have: 3, need: 15, uploaded: 3 }); // carol's 10 + alice's 5 shared
  const local = await storedIds(dirL);
  for (const e of onlyB.filter((e) => e.pubkey === carol.pubkey)) expect(local.has(e.id)).toBe(true);
  for (const e of onlyB.filter((e) => e.pubkey === bob.pubkey)) expect(local.has(e.id)).toBe(false);
  const remote = await storedIds(dirB3);
  expect(remote.size).toBe(10 + 40 + 3); // bob's local note stayed local

  const bad = await sync([relayB3.url, "--filter", '{"limit":5}', "--data-dir", dirL]);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toContain("limit");
}, 120_000);

/** A relay without NIP-77 that answers NEG-OPEN with a NOTICE (as strfry-less relays do) or not at all. */
function fakeRelay(events: NostrEvent[], onNegOpen: "notice" | "silence") {
  const received: NostrEvent[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (req, srv) => (srv.upgrade(req) ? undefined : new Response("no")),
    websocket: {
      message(ws, data) {
        const m = JSON.parse(String(data));
        if (m[0] === "NEG-OPEN" && onNegOpen === "notice") ws.send(JSON.stringify(["NOTICE", `unknown message type ${m[0]}`]));
        if (m[0] === "REQ") {
          const f = m[2];
          const page = events
            .filter((e) => f.until === undefined || e.created_at <= f.until)
            .sort((a, b) => b.created_at - a.created_at)
            .slice(0, f.limit ?? 500);
          for (const e of page) ws.send(JSON.stringify(["EVENT", m[1], e]));
          ws.send(JSON.stringify(["EOSE", m[1]]));
        }
        if (m[0] === "EVENT") {
          received.push(m[1]);
          ws.send(JSON.stringify(["OK", m[1].id, true, ""]));
        }
      },
    },
  });
  return { url: `ws://127.0.0.1:${server.port}/`, received, stop: () => server.stop(true) };
}

test.each(["notice", "silence"] as const)(
  "falls back when NEG-OPEN gets a %s",
  async (how) => {
    const remote = fakeRelay(onlyC.slice(0, 30), how);
    try {
      const dirL = await seeded(`l-${how}`, onlyA.slice(0, 2));
      const r = await sync([remote.url, "--data-dir", dirL, "--json"]);
      expect(r.code).toBe(0);
      const s = JSON.parse(r.stdout);
      expect(s.method).toBe("fallback");
      expect(s.fallbackReason).toStartWith(how === "notice" ? "NOTICE: unknown message type NEG-OPEN" : "no answer to NEG-OPEN");
      expect(s).toMatchObject({ local: 2, have: 2, need: 30, received: 30, uploaded: 2 });
      expect(remote.received.map((e) => e.id).sort()).toEqual(ids(onlyA.slice(0, 2)).sort());
      expect(await storedIds(dirL)).toEqual(new Set(ids([...onlyC.slice(0, 30), ...onlyA.slice(0, 2)])));
    } finally {
      remote.stop();
    }
  },
  60_000,
);
