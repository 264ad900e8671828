// What one answer from the fanout's ring (relay/answers/feeds.ts) costs the main thread, at the
// bounds it accepts: 64 authors and limit 500 over a full ring (8,192 events of those authors,
// eight per second so ids settle ties), found in full; and the worst case, where no entry
// matches (other kinds) and the answer gives up after MAX_STEPS entries. Checks each answer.
// Then what adding an event with 2,000 hashtags (max_event_tags' default) costs the ring.
//
//   npx bun bench/ring-answer-cost.ts [--rounds 5] [--reps 200]
import { parseArgs } from "node:util";
import { serializeEvent, type NostrEvent } from "../src/protocol/event.ts";
import { compileFilter } from "../src/protocol/filter.ts";
import { FeedIndex } from "../src/relay/answers/feeds.ts";
import { CatchUpRing } from "../src/relay/fanout/ring.ts";

const { values } = parseArgs({
  args: Bun.argv.slice(2),
  options: { rounds: { type: "string", default: "5" }, reps: { type: "string", default: "200" } },
});
const hex = (i: number) => i.toString(16).padStart(64, "0");
/** A ring and its index of feeds, fed as the relay feeds them (relay/read/live.ts liveFeed). */
function feedRing(maxBytes: number) {
  const ring = new CatchUpRing(8192, maxBytes);
  const feeds = new FeedIndex(ring);
  ring.indexedBy(feeds);
  feeds.reset(-1);
  const add = (seq: number, e: NostrEvent, json: string) => {
    ring.add(seq, e, json);
    feeds.add(seq, json, e);
  };
  return { feeds, add };
}
const ring = feedRing(64 << 20);
const authors = Array.from({ length: 64 }, (_, i) => hex(5000 + i));
for (let s = 1; s <= 8192; s++) {
  const e: NostrEvent = {
    id: hex((s * 7919) % 100_003),
    pubkey: authors[s % 64]!,
    created_at: 1000 + (s >> 3),
    kind: 7,
    tags: [],
    content: "x",
    sig: "0".repeat(128),
  };
  ring.add(s, e, serializeEvent(e));
}
const none = new Set<number>();
const cases = [
  { name: "500 events of 64 authors", filter: compileFilter({ authors, kinds: [7], limit: 500 }, { maxValues: 1000 }), expect: 500 },
  { name: "nothing matches: gives up", filter: compileFilter({ authors, kinds: [1], limit: 500 }, { maxValues: 1000 }), expect: -1 },
];
let failed = false;
for (const c of cases) {
  const ms: number[] = [];
  for (let r = 0; r < Number(values.rounds); r++) {
    const started = performance.now();
    let got: string[] | undefined;
    for (let i = 0; i < Number(values.reps); i++) got = ring.feeds.answer(c.filter, 500, 0, none);
    ms.push((performance.now() - started) / Number(values.reps));
    if ((got?.length ?? -1) !== c.expect) failed = true;
  }
  ms.sort((a, b) => a - b);
  console.log(`${c.name.padEnd(28)} ms per answer: min ${ms[0]!.toFixed(3)}, median ${ms[ms.length >> 1]!.toFixed(3)}`);
}
{
  const tags = Array.from({ length: 2000 }, (_, i) => ["t", `tag${i}`]);
  const many = feedRing(1 << 30);
  const reps = Number(values.reps);
  const events = Array.from({ length: reps }, (_, i) => ({
    id: hex(i + 1),
    pubkey: hex(9),
    created_at: 1000 + i,
    kind: 1,
    tags,
    content: "",
    sig: "0".repeat(128),
  }));
  const jsons = events.map((e) => serializeEvent(e));
  const ms: number[] = [];
  for (let r = 0; r < Number(values.rounds); r++) {
    const started = performance.now();
    for (let i = 0; i < reps; i++) many.add(r * reps + i + 1, events[i]!, jsons[i]!);
    ms.push((performance.now() - started) / reps);
  }
  ms.sort((a, b) => a - b);
  console.log(`${"an event, 2,000 hashtags".padEnd(28)} ms to add:     min ${ms[0]!.toFixed(3)}, median ${ms[ms.length >> 1]!.toFixed(3)}`);
}
if (failed) {
  console.error("FAIL: an answer was not what it should be");
  process.exit(1);
}
