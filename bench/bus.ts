// Micro-benchmark of the cross-node bus candidates: Redis pub/sub (Bun's RedisClient)
// against Postgres LISTEN/NOTIFY (Bun's SQL client: sql.listen / sql.notify = pg_notify), for
// the messages the Postgres store publishes per committed batch (postgres/bus.ts): 1 event
// (~0.7 KB) and 20 events (~15 KB), built from the bench corpus exactly as RedisBus builds them.
// A third variant is what NOTIFY forces for big batches: a small {from,to} notification, then
// the listener reads the batch's rows back from Postgres.
// For each: round trip (publish -> the subscriber's callback, one message in flight) p50/p99, and
// messages/s with up to --window messages in flight. Everything on 127.0.0.1; bounded.
//
//   npx bun bench/bus.ts [--messages 2000] [--window 64] [--redis redis://127.0.0.1:6379] [--pg postgres://…/postgres]
import { RedisClient, SQL } from "bun";
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { loadCorpus } from "./corpus.ts";
import { summarize } from "./lib/stats.ts";
import { createDatabase, dropDatabase, PG_URL, REDIS_URL } from "../test/postgres-env.ts";

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    messages: { type: "string", default: "2000" },
    window: { type: "string", default: "64" },
    redis: { type: "string", default: REDIS_URL },
    pg: { type: "string", default: PG_URL },
  },
});
const MESSAGES = Number(values.messages);
const WINDOW = Number(values.window);
const log = (m: string) => console.error(`[bus] ${m}`);

// ---- messages, as RedisBus.publishBatch builds them, from typical corpus events (kind 1 and 7, no kind 3 lists)
const corpus = loadCorpus(20_000, log);
const typical: string[] = [];
for (const line of corpus.lines) if (/"kind":(1|7|6),/.test(line) && line.length < 1500) typical.push(line);
const NODE = crypto.randomUUID();
let nextSeq = 1;
function batchMessage(k: number, count: number): string {
  const from = nextSeq;
  const events = Array.from(
    { length: count },
    (_, j) => `{"seq":${from + j},"json":${JSON.stringify(typical[(k * count + j) % typical.length]!)}}`,
  ).join(",");
  nextSeq += count;
  return `{"node":"${NODE}","from":${from},"to":${from + count - 1},"events":[${events}]}`;
}

interface Transport {
  name: string;
  /** Sends one message; the subscriber gets it through `onMessage`. */
  send(channel: string, msg: string): Promise<unknown>;
  subscribe(channel: string, onMessage: (msg: string) => void): Promise<void>;
  close(): Promise<void>;
}

interface Row {
  transport: string;
  message: string;
  bytes: number;
  rttP50: number;
  rttP99: number;
  perSec: number;
  mbPerSec: number;
  error?: string;
}

/** Round trips one at a time, then a stream with `WINDOW` in flight. Each message carries its number first: "<k>|…". */
async function measure(t: Transport, label: string, messages: string[], transform?: (raw: string) => Promise<void>): Promise<Row> {
  const channel = `bench_bus_${label.replace(/\W/g, "_")}_${Date.now()}`;
  const bytes = Math.round(messages.reduce((a, m) => a + m.length, 0) / messages.length);
  let resolveOne: (() => void) | undefined;
  let received = 0;
  await t.subscribe(channel, (raw) => {
    const p = transform ? transform(raw) : Promise.resolve();
    void p.then(() => {
      received++;
      resolveOne?.();
    });
  });
  const waitFor = (target: number, ms = 10_000) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${t.name} ${label}: ${received}/${target} received after ${ms} ms`)), ms);
      const check = () => (received >= target ? (clearTimeout(timer), (resolveOne = undefined), resolve()) : (resolveOne = check));
      check();
    });
  try {
    // warm-up
    await t.send(channel, messages[0]!);
    await waitFor(1);
    const rtt: number[] = [];
    const rounds = Math.min(500, messages.length);
    for (let k = 0; k < rounds; k++) {
      const at = performance.now();
      const target = received + 1;
      void t.send(channel, messages[k % messages.length]!);
      await waitFor(target);
      rtt.push(performance.now() - at);
    }
    const base = received;
    const started = performance.now();
    let sent = 0;
    while (sent < messages.length) {
      while (sent < messages.length && sent - (received - base) < WINDOW) void t.send(channel, messages[sent++]!);
      await waitFor(Math.min(base + messages.length, received + 1));
    }
    await waitFor(base + messages.length, 60_000);
    const secs = (performance.now() - started) / 1000;
    const s = summarize(rtt);
    return {
      transport: t.name,
      message: label,
      bytes,
      rttP50: s.p50,
      rttP99: s.p99,
      perSec: messages.length / secs,
      mbPerSec: (messages.length * bytes) / secs / 2 ** 20,
    };
  } catch (err) {
    return {
      transport: t.name,
      message: label,
      bytes,
      rttP50: NaN,
      rttP99: NaN,
      perSec: NaN,
      mbPerSec: NaN,
      error: (err as Error).message.split("\n")[0]!,
    };
  }
}

function redisTransport(url: string): Transport {
  const pub = new RedisClient(url, { autoReconnect: false });
  const sub = new RedisClient(url, { autoReconnect: false });
  return {
    name: "redis pub/sub",
    send: (ch, m) => pub.publish(ch, m),
    async subscribe(ch, on) {
      await sub.subscribe(ch, (message: string) => on(message));
    },
    async close() {
      pub.close();
      sub.close();
    },
  };
}

function pgTransport(url: string): Transport & { sql: SQL } {
  // Like the store: a pool (the notifier) and Bun's dedicated LISTEN connection.
  const sql = new SQL({ url, max: 4 } as ConstructorParameters<typeof SQL>[0]);
  const listens: { unlisten(): Promise<void> }[] = [];
  return {
    name: "postgres NOTIFY",
    sql,
    send: (ch, m) => sql.notify(ch, m),
    async subscribe(ch, on) {
      listens.push(await sql.listen(ch, on));
    },
    async close() {
      for (const l of listens) await l.unlisten();
      await sql.close();
    },
  };
}

const fmt = (x: number, d = 0) =>
  Number.isFinite(x) ? x.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d }) : "—";

async function main(): Promise<number> {
  const probe = new SQL({ url: values.pg, max: 1 } as ConstructorParameters<typeof SQL>[0]);
  log(
    `bun ${Bun.version}; typeof sql.listen = ${typeof (probe as unknown as { listen: unknown }).listen}; ${MESSAGES} messages per stream, window ${WINDOW}; load ${loadavg()
      .map((x) => x.toFixed(2))
      .join(" ")}`,
  );
  await probe.close();
  const one = Array.from({ length: MESSAGES }, (_, k) => batchMessage(k, 1));
  const twenty = Array.from({ length: MESSAGES }, (_, k) => batchMessage(k, 20));
  const avg = (ms: string[]) => Math.round(ms.reduce((a, m) => a + m.length, 0) / ms.length);
  log(`messages: 1 event ~${avg(one)} B, 20 events ~${avg(twenty)} B (corpus ${corpus.path})`);
  const rows: Row[] = [];

  const redis = redisTransport(values.redis);
  rows.push(await measure(redis, "1 event", one));
  rows.push(await measure(redis, "20 events", twenty));
  await redis.close();

  // Postgres: a scratch database (for the read-back variant's rows), dropped at the end.
  const db = `bunstr_bench_bus_${process.pid}`;
  const dbUrl = await createDatabase(db);
  try {
    const pg = pgTransport(dbUrl);
    rows.push(await measure(pg, "1 event", one));
    rows.push(await measure(pg, "20 events", twenty));
    // NOTIFY {from,to} + SELECT the batch's rows (the way around the 8,000-byte limit).
    await pg.sql`CREATE TABLE events (seq bigint PRIMARY KEY, json text NOT NULL)`;
    const lines = typical.slice(0, 2000);
    await pg.sql.unsafe(`INSERT INTO events SELECT g, $1 || g FROM generate_series(1, 2000) g`, [lines[0]!]);
    for (let i = 0; i < lines.length; i += 200) {
      const chunk = lines.slice(i, i + 200);
      await pg.sql.unsafe(
        `UPDATE events e SET json = x.value FROM jsonb_array_elements_text($1::text::jsonb) WITH ORDINALITY x(value, n) WHERE e.seq = $2 + x.n - 1`,
        [JSON.stringify(chunk), i + 1],
      );
    }
    const reader = new SQL({ url: dbUrl, max: 4 } as ConstructorParameters<typeof SQL>[0]);
    const refs = Array.from({ length: MESSAGES }, (_, k) => {
      const from = ((k * 20) % 1980) + 1;
      return `{"node":"${NODE}","from":${from},"to":${from + 19}}`;
    });
    rows.push(
      await measure(pg, "20 events: {from,to} + SELECT", refs, async (raw) => {
        const m = JSON.parse(raw) as { from: number; to: number };
        const r = await reader`SELECT seq, json FROM events WHERE seq BETWEEN ${m.from} AND ${m.to} ORDER BY seq`;
        if (r.length !== 20) throw new Error(`read back ${r.length} rows`);
      }),
    );
    await reader.close();
    await pg.close();
  } finally {
    await dropDatabase(db);
  }

  console.log(
    `\nbus micro-benchmark (bun ${Bun.version}, ${new Date().toISOString().slice(0, 16)}Z, load ${loadavg()[0]!.toFixed(2)}; round trip = publish -> subscriber callback, one in flight; rate with ${WINDOW} in flight)`,
  );
  console.log("| transport | message | bytes | round trip p50 ms | p99 ms | messages/s | MiB/s |");
  console.log("|---|---|---:|---:|---:|---:|---:|");
  for (const r of rows)
    console.log(
      `| ${r.transport} | ${r.message} | ${fmt(r.bytes)} | ${fmt(r.rttP50, 3)} | ${fmt(r.rttP99, 3)} | ${fmt(r.perSec)} | ${fmt(r.mbPerSec, 1)} |${r.error ? ` ERROR: ${r.error}` : ""}`,
    );
  console.log(JSON.stringify({ format: "bus-1", at: new Date().toISOString(), load: loadavg(), messages: MESSAGES, window: WINDOW, rows }));
  return 0;
}

const hardStop = setTimeout(() => {
  console.error("[bus] timed out after 300 s");
  process.exit(1);
}, 300_000);
hardStop.unref();
process.exit(await main());
