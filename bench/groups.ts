// NIP-29 at scale (issue 32, point 9): 10,000 groups and 100,000 memberships written into a
// SQLite store by the bulk writer (the 9007s, the joins, the relay's 39000/39002), then
//   1. the group state's rebuild: ms from the store (what a relay does at start) and from memory
//      (the state's own cost), its size (stats().bytes, and the heap and RSS it added);
//   2. judge and access, ns per call (the write rule and the read rule's per-event question);
//   3. ingest: kind 9 messages into the groups (an h tag, from members) on a relay with groups on,
//      against the same messages without the h tag on the same data with groups off: events/s and
//      relay CPU-seconds per 1,000 events, runs interleaved, with the load average.
//
//   npx bun bench/groups.ts [--groups 10000] [--members 10] [--events 20000] [--runs 3]
// Relays run with --no-verify (events get valid ids and dummy signatures): what is compared is
// the group work, not the signature check both would do alike.
import { heapStats } from "bun:jsc";
import { cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { openBulk } from "../src/cli/options.ts";
import { readOrCreateKeyFile } from "../src/cli/relay-key.ts";
import { defaults, type Config } from "../src/config/schema.ts";
import { GroupState } from "../src/groups/state.ts";
import { REBUILD_KINDS } from "../src/nips/nip29.ts";
import { writeRules } from "../src/policy/visibility.ts";
import type { NostrEvent } from "../src/protocol/event.ts";
import type { GroupRecords } from "../src/store/types.ts";
import { intOption } from "./lib/args.ts";
import { type Conn, connectAll } from "./lib/conn.ts";
import { fakePubkey, unsignedEvent } from "./lib/events.ts";
import { cpuSeconds, RATE_LIMITS_OFF, RelayProcess } from "./lib/relay.ts";

const { values } = parseArgs({
  options: {
    groups: { type: "string", default: "10000" },
    members: { type: "string", default: "10" },
    events: { type: "string", default: "20000" },
    runs: { type: "string", default: "3" },
    connections: { type: "string", default: "8" },
    window: { type: "string", default: "500" },
  },
});
const GROUPS = intOption("groups", values.groups);
const MEMBERS = intOption("members", values.members);
const EVENTS = intOption("events", values.events);
const RUNS = intOption("runs", values.runs);
const CONNECTIONS = intOption("connections", values.connections);
const WINDOW = intOption("window", values.window);

const root = mkdtempSync(join(tmpdir(), "bunstr-bench-groups-"));
process.on("exit", () => rmSync(root, { recursive: true, force: true }));
const log = (line: string) => console.log(line);
const load = () => loadavg()[0]!.toFixed(2);
const MiB = (b: number) => (b / 1048576).toFixed(1);

function groupsConfig(dataDir: string): Config {
  const c = defaults();
  c.database.data_directory = dataDir;
  c.groups.enabled = true;
  c.groups.creators = ["anyone"];
  c.groups.max_groups = Math.max(GROUPS, c.groups.max_groups);
  c.groups.max_members_per_group = Math.max(MEMBERS, c.groups.max_members_per_group);
  return c;
}

// ---- the corpus: per group a 9007 by its owner (and a 9002 making every other group private),
// MEMBERS - 1 joins, the relay's 39000-39003 ----

interface Corpus {
  events: NostrEvent[];
  /** Per group: its id and its members (owner first). */
  groups: { id: string; members: string[] }[];
}

async function corpus(relayPubkey: string, config: Config): Promise<Corpus> {
  const events: NostrEvent[] = [];
  const groups: Corpus["groups"] = [];
  const t = Math.floor(Date.now() / 1000) - 600;
  for (let g = 0; g < GROUPS; g++) {
    const id = `g${g.toString(36)}`;
    const members = Array.from({ length: MEMBERS }, () => fakePubkey());
    groups.push({ id, members });
    events.push(unsignedEvent(members[0]!, { kind: 9007, created_at: t, tags: [["h", id]], content: "" }));
    // Every other group private: the read rule then has work (member or not).
    if (g % 2 === 1) events.push(unsignedEvent(members[0]!, { kind: 9002, created_at: t, tags: [["h", id], ["private"]], content: "" }));
    for (const pk of members.slice(1)) events.push(unsignedEvent(pk, { kind: 9021, created_at: t + 1, tags: [["h", id]], content: "" }));
  }
  // The relay's 39000-39003 as the state renders them (so a relay starting on this data has
  // nothing to republish), after the users' events as a relay would have written them.
  const state = new GroupState({ config: () => config, relayPubkey });
  await state.rebuild(memoryRecords(events));
  for (const { id } of groups)
    for (const kind of [39000, 39001, 39002, 39003] as const)
      events.push(unsignedEvent(relayPubkey, { kind, created_at: t + 2, tags: state.render(id, kind)!, content: "" }));
  return { events, groups };
}

async function writeCorpus(dataDir: string, c: Corpus): Promise<number> {
  const config = groupsConfig(dataDir);
  const bulk = await openBulk(config, join(dataDir, "bunstr.sqlite"), "create");
  const started = performance.now();
  try {
    const w = await bulk.writer({ rules: writeRules(config), batchSize: 1000 });
    // txnSize is the next transaction's (it changes as the writer goes).
    for (let i = 0; i < c.events.length; ) {
      const chunk = c.events.slice(i, i + w.txnSize).map((event) => ({ event, json: JSON.stringify(event) }));
      i += chunk.length;
      const outcomes = await w.commit(chunk);
      const bad = outcomes.findIndex((o) => !o.stored);
      if (bad >= 0) throw new Error(`the corpus did not store: ${JSON.stringify(outcomes[bad])} ${JSON.stringify(chunk[bad]!.event)}`);
    }
  } finally {
    await bulk.close();
  }
  return performance.now() - started;
}

// ---- 1. rebuild, size ----

/** The moderation kinds in commit order from memory: the state's own cost without the store's read. */
function memoryRecords(events: readonly NostrEvent[]): GroupRecords {
  const rows = events.map((e, i) => ({ seq: i + 1, json: JSON.stringify(e) }));
  return {
    async inOrder(kinds, afterSeq, max) {
      const out: { seq: number; json: string }[] = [];
      for (let i = afterSeq; i < rows.length && out.length < max; i++) if (kinds.includes(events[i]!.kind)) out.push(rows[i]!);
      return out;
    },
    async recentByGroup() {
      return new Map();
    },
  };
}

const settle = () => {
  Bun.gc(true);
  return process.memoryUsage();
};

async function rebuildFrom(records: GroupRecords, config: Config, relayPubkey: string) {
  const before = settle();
  const state = new GroupState({ config: () => config, relayPubkey });
  const r = await state.rebuild(records);
  const after = settle();
  return { state, r, rss: after.rss - before.rss, heap: after.heapUsed - before.heapUsed };
}

// ---- 2. judge and access ----

function nsPerOp(n: number, f: (i: number) => unknown): number {
  for (let i = 0; i < Math.min(n, 10_000); i++) f(i); // warm
  const t = Bun.nanoseconds();
  for (let i = 0; i < n; i++) f(i);
  return (Bun.nanoseconds() - t) / n;
}

// ---- 3. ingest ----

/** Publishes `events` over CONNECTIONS sockets, WINDOW in flight in all; resolves with the wall seconds and refusals. */
async function publish(conns: Conn[], events: NostrEvent[]): Promise<{ seconds: number; refused: Map<string, number> }> {
  const refused = new Map<string, number>();
  let next = 0;
  let done = 0;
  const started = performance.now();
  await new Promise<void>((resolve) => {
    const send = (c: Conn) => {
      if (next < events.length) c.send(`["EVENT",${JSON.stringify(events[next++])}]`);
    };
    for (const c of conns)
      c.onFrame = (f) => {
        if (f[0] !== "OK") return;
        if (f[2] !== true) {
          const why = String(f[3]).split(":")[0]!;
          refused.set(why, (refused.get(why) ?? 0) + 1);
        }
        if (++done === events.length) resolve();
        else send(c);
      };
    for (let i = 0; i < WINDOW; i++) send(conns[i % conns.length]!);
  });
  return { seconds: (performance.now() - started) / 1000, refused };
}

async function main() {
  log(`bench/groups: ${GROUPS} groups x ${MEMBERS} members, ${EVENTS} messages x ${RUNS} runs; bun ${Bun.version}; load ${load()}`);
  const dataDir = join(root, "groups");
  const key = readOrCreateKeyFile(join(dataDir, "relay.key"), () => {});
  const c = await corpus(key.pubkey, groupsConfig(dataDir));
  const wrote = await writeCorpus(dataDir, c);
  log(`corpus: ${c.events.length} events written by the bulk writer in ${(wrote / 1000).toFixed(1)} s`);

  // 1. Rebuild from the store (as a relay at start) and from memory (the state alone).
  const config = groupsConfig(dataDir);
  const bulk = await openBulk(config, join(dataDir, "bunstr.sqlite"), "readonly");
  const fromStore = await rebuildFrom(bulk.groups, config, key.pubkey);
  // Its two reads alone: the moderation kinds along the seq, and the newest h rows per group.
  let t = performance.now();
  let storedRows = 0;
  for (let after = 0; ; ) {
    const page = await bulk.groups.inOrder(REBUILD_KINDS, after, 5000);
    storedRows += page.length;
    if (page.length < 5000) break;
    after = page.at(-1)!.seq;
  }
  const inOrderMs = performance.now() - t;
  t = performance.now();
  const recent = await bulk.groups.recentByGroup(config.groups.previous_window, Math.max(100_000, GROUPS * config.groups.previous_window));
  const recentMs = performance.now() - t;
  await bulk.close();
  const fromMemory = await rebuildFrom(memoryRecords(c.events), config, key.pubkey);
  const stats = fromMemory.state.stats();
  log(
    `rebuild from the store: ${fromStore.r.ms} ms, ${fromStore.r.events} events, ${fromStore.r.groups} groups, ${fromStore.r.members} members` +
      (fromStore.r.groups === GROUPS ? "" : "  (the store returned fewer: its GroupRecords is not filled in on this commit)"),
  );
  log(
    `  of which the store's reads alone: inOrder ${inOrderMs.toFixed(0)} ms (${storedRows} rows, pages of 5,000), ` +
      `recentByGroup ${recentMs.toFixed(0)} ms (${recent.size} groups)`,
  );
  log(
    `rebuild from memory: ${fromMemory.r.ms} ms, ${fromMemory.r.events} events, ${stats.groups} groups, ${stats.members} members; ` +
      `stats().bytes ${MiB(stats.bytes)} MiB, heap +${MiB(fromMemory.heap)} MiB, RSS +${MiB(fromMemory.rss)} MiB`,
  );

  // 2. judge (a member's message; an outsider's) and access (a member of a private group; not).
  const state = fromMemory.state;
  const now = Math.floor(Date.now() / 1000);
  const K = Math.min(1000, GROUPS);
  const posts = c.groups
    .slice(0, K)
    .map((g, i) => unsignedEvent(g.members[(i % (MEMBERS - 1)) + 1]!, { kind: 9, created_at: now, tags: [["h", g.id]], content: "hi" }));
  const ctx = { config, now, authed: new Set<string>() };
  const judgeNs = nsPerOp(1_000_000, (i) => state.judge(ctx, posts[i % posts.length]!));
  const authedSets = c.groups.slice(0, K).map((g) => new Set([g.members[1]!]));
  const accessNs = nsPerOp(1_000_000, (i) => state.access(c.groups[i % K]!.id, authedSets[i % K]!, false));
  const nobody = new Set<string>();
  const outsiderNs = nsPerOp(1_000_000, (i) => state.access(c.groups[i % K]!.id, nobody, false));
  const membershipsNs = nsPerOp(100_000, (i) => state.memberships(authedSets[i % K]!));
  log(
    `judge: ${judgeNs.toFixed(0)} ns/op; access (half the groups private): member ${accessNs.toFixed(0)} ns/op, anonymous ${outsiderNs.toFixed(0)} ns/op; ` +
      `memberships(one pubkey), from the index by pubkey: ${membershipsNs.toFixed(0)} ns/op`,
  );
  // What fresh AUTH keys (members of nothing) cost: nothing is kept per reader.
  Bun.gc(true);
  Bun.gc(true);
  const heap0 = heapStats().heapSize;
  const strangers = Array.from({ length: 1000 }, () => new Set([fakePubkey()]));
  const tStrangers = performance.now();
  for (const a of strangers) state.memberships(a);
  const strangersMs = performance.now() - tStrangers;
  Bun.gc(true);
  Bun.gc(true);
  log(
    `memberships for 1,000 fresh keys: ${strangersMs.toFixed(0)} ms, heap +${MiB(heapStats().heapSize - heap0)} MiB ` +
      `(${state.memberships(strangers[0]!).length} ids each)`,
  );

  // 3. Ingest: groups on (h-tagged messages from members) against groups off (the same events; without h; a t tag instead), same data.
  const plainDir = join(root, "plain");
  cpSync(dataDir, plainDir, { recursive: true });
  const groupsToml = join(root, "groups.toml");
  writeFileSync(
    groupsToml,
    `${RATE_LIMITS_OFF}\n[groups]\nenabled = true\ncreators = "anyone"\nmax_groups = ${Math.max(GROUPS, 100000)}\n`,
  );
  const plainToml = join(root, "plain.toml");
  writeFileSync(plainToml, RATE_LIMITS_OFF);
  const withGroups = await RelayProcess.spawn({ verify: false, dataDir, args: ["--config", groupsToml], startTimeoutMs: 300_000 });
  const without = await RelayProcess.spawn({ verify: false, dataDir: plainDir, args: ["--config", plainToml], startTimeoutMs: 300_000 });
  const rows: string[] = [];
  try {
    const connsA = await connectAll(withGroups.url, CONNECTIONS, "groups-");
    const connsB = await connectAll(without.url, CONNECTIONS, "plain-");
    const totals = { groups: { s: 0, cpu: 0 }, same: { s: 0, cpu: 0 }, plain: { s: 0, cpu: 0 }, tagged: { s: 0, cpu: 0 } };
    // Run 0 warms both relays (JIT, page cache) and is not counted.
    for (let run = 0; run <= RUNS; run++) {
      const t = Math.floor(Date.now() / 1000);
      const messages = Array.from({ length: EVENTS }, (_, i) => {
        const g = c.groups[(i * 7919) % GROUPS]!;
        return { pk: g.members[(i % (MEMBERS - 1)) + 1]!, id: g.id, content: `run ${run} message ${i}` };
      });
      const inGroups = messages.map((m) => unsignedEvent(m.pk, { kind: 9, created_at: t, tags: [["h", m.id]], content: m.content }));
      const plain = messages.map((m) => unsignedEvent(m.pk, { kind: 9, created_at: t, tags: [], content: m.content }));
      // The same with one indexed tag in place of h (a tag row and its index entry are written for
      // both): what the groups cost beside one more tag.
      const tagged = messages.map((m) => unsignedEvent(m.pk, { kind: 9, created_at: t, tags: [["t", m.id]], content: `${m.content} t` }));
      for (const [name, relay, conns, events] of [
        ["groups", withGroups, connsA, inGroups],
        // The issue's comparison: the very same events (h tags and all) where groups are off.
        ["same", without, connsB, inGroups],
        ["plain", without, connsB, plain],
        ["tagged", without, connsB, tagged],
      ] as const) {
        const cpu0 = cpuSeconds(relay.pid);
        const r = await publish(conns, events);
        const cpu = cpuSeconds(relay.pid) - cpu0;
        if (run > 0) {
          totals[name].s += r.seconds;
          totals[name].cpu += cpu;
        }
        const refused = [...r.refused].map(([k, n]) => `${k} ${n}`).join(", ");
        const label = {
          groups: "into groups (h)        ",
          same: "groups off, the same   ",
          plain: "groups off, no tag     ",
          tagged: "groups off, a t tag    ",
        }[name];
        const line = `${run === 0 ? "warm-up" : `run ${run}`} ${label}: ${(EVENTS / r.seconds).toFixed(0)} events/s, ${((cpu / EVENTS) * 1000).toFixed(3)} CPU-s / 1k events, load ${load()}${refused ? `; refused: ${refused}` : ""}`;
        log(line);
        rows.push(line);
      }
    }
    const rate = (x: { s: number }) => (EVENTS * RUNS) / x.s;
    const per1k = (x: { cpu: number }) => (x.cpu / (EVENTS * RUNS)) * 1000;
    log(
      `all runs: into groups ${rate(totals.groups).toFixed(0)} events/s, ${per1k(totals.groups).toFixed(3)} CPU-s / 1k; ` +
        `groups off, the same events ${rate(totals.same).toFixed(0)} events/s, ${per1k(totals.same).toFixed(3)} CPU-s / 1k; ` +
        `without (no tag) ${rate(totals.plain).toFixed(0)} events/s, ${per1k(totals.plain).toFixed(3)} CPU-s / 1k; ` +
        `without (a t tag) ${rate(totals.tagged).toFixed(0)} events/s, ${per1k(totals.tagged).toFixed(3)} CPU-s / 1k; ` +
        `CPU per event with groups: ${((per1k(totals.groups) / per1k(totals.same) - 1) * 100).toFixed(1)}% more than the same events with groups off (goal: at most 10%), ` +
        `${((per1k(totals.groups) / per1k(totals.plain) - 1) * 100).toFixed(1)}% more than no tag, ` +
        `${((per1k(totals.groups) / per1k(totals.tagged) - 1) * 100).toFixed(1)}% more than a t tag`,
    );
    await Promise.all([...connsA, ...connsB].map((x) => x.close()));
  } finally {
    await withGroups.stop();
    await without.stop();
  }
}

await main();
process.exit(0);
