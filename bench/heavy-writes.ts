// Issue 36, item 4: heavy events within policy. Five attacker addresses (127.0.0.2-6) send valid
// events that cost the writer a hundred times a note (1,800 tags; deletions of 1,700 `e` or 1,350
// `a` targets; replaceable lists of 1,500 `p` tags), each keeping WINDOW unanswered and at most
// RATE a second, against a relay on its default limits (loopback charged like any address), while
// an honest client (127.0.0.9) publishes a short note every 100 ms. Prints the honest OK latency
// (p50/p99), the relay's RSS (start -> peak -> end) and what the attackers' events became.
//
//   npx bun bench/heavy-writes.ts [--seconds 20]      (BUNSTR_RELAY_MAIN=<old>/src/main.ts: another tree)
// Talks to 127.0.0.0/8 only; bounded in time, stops by itself.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { finalizeEvent, generateSecretKey, getPublicKey } from "nostr-tools/pure";
import { type Frame, RawWs } from "./lib/rawws.ts";
import { memoryMiB, RelayProcess } from "./lib/relay.ts";

const { values: args } = parseArgs({ options: { seconds: { type: "string", default: "20" } } });
const SECONDS = Number(args.seconds);
const WINDOW = 20;
const RATE = 20;
const log = (m: string) => console.error(`[heavy-writes] ${m}`);

const dir = mkdtempSync(join(tmpdir(), "bunstr-heavy-writes-"));
const configFile = join(dir, "bunstr.toml");
writeFileSync(configFile, "[rate_limits]\nexempt_private_addresses = false\n");
const relay = await RelayProcess.spawn({
  verify: true,
  dataDir: join(dir, "data"),
  args: ["--config", configFile],
  startTimeoutMs: 60_000,
});
const port = Number(new URL(relay.url).port);
const rss0 = memoryMiB(relay.pid).rss;
let rssPeak = rss0;
const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, memoryMiB(relay.pid).rss)), 100);

const hex = (n: number) => Array.from(crypto.getRandomValues(new Uint8Array(n)), (b) => b.toString(16).padStart(2, "0")).join("");
function heavy(sk: Uint8Array, pk: string, i: number) {
  const now = Math.floor(Date.now() / 1000);
  const t = (tags: string[][], kind: number, created_at = now) =>
    finalizeEvent({ kind, created_at, tags, content: kind === 1 ? `heavy ${i}` : "" }, sk);
  switch (i % 4) {
    case 0:
      return t(
        Array.from({ length: 1800 }, (_, k) => ["t", `topic-${i}-${k}`]),
        1,
      );
    case 1:
      return t(
        Array.from({ length: 1700 }, () => ["e", hex(32)]),
        5,
      );
    case 2:
      return t(
        Array.from({ length: 1350 }, (_, k) => ["a", `30023:${pk}:d-${i}-${k}`]),
        5,
      );
    default:
      return t(
        Array.from({ length: 1500 }, () => ["p", hex(32)]),
        10000,
        now + i,
      );
  }
}

const until = performance.now() + SECONDS * 1000;
const outcomes = new Map<string, number>();
async function attacker(addr: string): Promise<void> {
  const ws = await RawWs.connect(port, addr);
  ws.keep = true;
  const sk = generateSecretKey();
  const pk = getPublicKey(sk);
  let inFlight = 0;
  for (let i = 0; performance.now() < until; i++) {
    while (inFlight >= WINDOW && performance.now() < until) await Bun.sleep(5);
    const e = heavy(sk, pk, i);
    inFlight++;
    const from = ws.frames.length;
    ws.send(["EVENT", e]);
    void ws
      .next((f: Frame) => f[0] === "OK" && f[1] === e.id, 60_000, from)
      .then((f) => {
        const key = f[2] === true ? "stored" : String(f[3]).split(":")[0]!;
        outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
      })
      .catch(() => outcomes.set("no answer", (outcomes.get("no answer") ?? 0) + 1))
      .finally(() => inFlight--);
    ws.frames.length > 10_000 && ws.frames.splice(0, 5_000);
    await Bun.sleep(1000 / RATE);
  }
  ws.close();
}

async function honest(): Promise<number[]> {
  const ws = await RawWs.connect(port, "127.0.0.9");
  const sk = generateSecretKey();
  const times: number[] = [];
  const pending: Promise<void>[] = [];
  for (let i = 0; performance.now() < until; i++) {
    const e = finalizeEvent({ kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [["t", "honest"]], content: `hello ${i}` }, sk);
    const t0 = performance.now();
    const from = ws.frames.length;
    ws.send(["EVENT", e]);
    pending.push(
      ws
        .next((f: Frame) => f[0] === "OK" && f[1] === e.id, 60_000, from)
        .then(
          (f) => void (f[2] === true ? times.push(performance.now() - t0) : log(`honest refused: ${f[3]}`)),
          () => log("honest: no OK in 60 s"),
        ),
    );
    await Bun.sleep(100);
  }
  await Promise.all(pending);
  ws.close();
  return times.sort((a, b) => a - b);
}

const [times] = await Promise.all([honest(), ...["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"].map(attacker)]);
await Bun.sleep(2000);
clearInterval(sampler);
const rssEnd = memoryMiB(relay.pid).rss;
const pct = (p: number) => times[Math.min(times.length - 1, Math.ceil(p * times.length) - 1)]!.toFixed(0);
console.log(
  `honest OKs ${times.length}: p50 ${pct(0.5)} ms, p99 ${pct(0.99)} ms, max ${times.at(-1)!.toFixed(0)} ms; ` +
    `relay RSS ${rss0.toFixed(0)} -> peak ${rssPeak.toFixed(0)} -> ${rssEnd.toFixed(0)} MiB; attackers ${JSON.stringify(Object.fromEntries(outcomes))}`,
);
await relay.stop();
rmSync(dir, { recursive: true, force: true });
