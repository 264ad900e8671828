// permessage-deflate ([network] compression): bytes on the wire and relay CPU with each mode, for
// REQ answers (load.ts's checked query mix) and for fanout (live events to many subscribers, every
// delivery checked), so the default is picked from numbers. Clients are Bun's WebSocket, which
// offers permessage-deflate as browsers do. Bytes on the wire are the kernel's count for the
// relay's sockets (`ss -ti`: bytes_acked), so frame headers and compression are both in them.
//
//   npx bun bench/compression.ts [--events 20000] [--reqs 2000] [--subs 200] [--publish 1000] [--modes off,shared,4KB,32KB]
//
// Fanout runs twice: every subscriber with the same subscription (one Bun topic: is a message
// compressed once per topic?) and each with a subscription id of its own (one topic each).
// Exit status 0 = every answer and delivery exact, 1 = a check failed, 2 = bad arguments.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { schema } from "../src/config/schema.ts";
import { type Corpus, loadCorpus } from "./corpus.ts";
import { intOption } from "./lib/args.ts";
import { Oracle } from "./lib/oracle.ts";
import { cpuSeconds, memoryMiB, RATE_LIMITS_OFF, RelayProcess } from "./lib/relay.ts";
import { IngestRun } from "./scenarios/ingest.ts";
import { QueryRun } from "./scenarios/query.ts";

const log = (msg: string) => console.error(`[compression] ${msg}`);
const MODES = schema.network.compression.oneOf ?? [];

function options() {
  const { values } = parseArgs({
    options: {
      events: { type: "string", default: "20000" },
      reqs: { type: "string", default: "2000" },
      subs: { type: "string", default: "200" },
      publish: { type: "string", default: "1000" },
      modes: { type: "string", default: "off,shared,4KB,32KB" },
    },
  });
  const modes = values.modes.split(",");
  for (const m of modes)
    if (!MODES.includes(m)) {
      console.error(`--modes: ${JSON.stringify(m)} is not one of ${MODES.join(", ")}`);
      process.exit(2);
    }
  return {
    events: intOption("events", values.events),
    reqs: intOption("reqs", values.reqs),
    subs: intOption("subs", values.subs),
    publish: intOption("publish", values.publish),
    modes,
  };
}

/** Bytes the relay has sent and received on all its open connections (the kernel's counts). */
function wireBytes(port: number): { sent: number; received: number } {
  const out = execFileSync("ss", ["-tinH", "state", "established", `( sport = :${port} )`], { encoding: "utf8" });
  let sent = 0;
  let received = 0;
  for (const m of out.matchAll(/bytes_acked:(\d+)/g)) sent += Number(m[1]);
  for (const m of out.matchAll(/bytes_received:(\d+)/g)) received += Number(m[1]);
  return { sent, received };
}

/** A phase's relay CPU and wire bytes: call before, then call the result after. */
function meter(relay: RelayProcess, port: number) {
  const cpu0 = cpuSeconds(relay.pid);
  const wire0 = wireBytes(port);
  const t0 = performance.now();
  return () => ({ cpu: cpuSeconds(relay.pid) - cpu0, sent: wireBytes(port).sent - wire0.sent, seconds: (performance.now() - t0) / 1000 });
}

interface FanoutFigures {
  deliveries: number;
  perSec: number;
  cpuPer1k: number;
  bytesPerDelivery: number;
}

/** `subs` subscribers on kind 1 (one subscription id for all, or one each), then the events published after EOSE. */
async function fanout(relay: RelayProcess, corpus: Corpus, from: number, count: number, subs: number, shared: boolean, failures: string[]) {
  const port = Number(new URL(relay.url).port);
  const expected = new Set<string>();
  for (let i = from; i < from + count; i++) if (corpus.event(i).kind === 1) expected.add(corpus.id(i));
  const got: Set<string>[] = [];
  const sockets: WebSocket[] = [];
  let deliveries = 0;
  let eose = 0;
  for (let s = 0; s < subs; s++) {
    const ws = new WebSocket(relay.url);
    const seen = new Set<string>();
    got.push(seen);
    ws.onmessage = (m) => {
      const f = JSON.parse(String(m.data));
      if (f[0] === "EOSE") eose++;
      else if (f[0] === "EVENT") {
        if (seen.has(f[2].id)) failures.push(`fanout: ${f[2].id} delivered twice to subscriber ${s}`);
        seen.add(f[2].id);
        deliveries++;
      }
    };
    await new Promise((resolve, reject) => {
      ws.onopen = resolve;
      ws.onerror = reject;
    });
    ws.send(JSON.stringify(["REQ", shared ? "live" : `live-${s}`, { kinds: [1], limit: 0 }]));
    sockets.push(ws);
  }
  while (eose < subs) await Bun.sleep(5);
  const pub = new WebSocket(relay.url);
  await new Promise((resolve) => (pub.onopen = resolve));
  const done = meter(relay, port);
  let acked = 0;
  pub.onmessage = (m) => {
    const f = JSON.parse(String(m.data));
    if (f[0] === "OK") acked++;
  };
  for (let i = from; i < from + count; i++) {
    while (i - from - acked > 100) await Bun.sleep(1);
    pub.send(`["EVENT",${corpus.lines[i]}]`);
  }
  const want = expected.size * subs;
  const deadline = Date.now() + 60_000;
  while ((acked < count || deliveries < want) && Date.now() < deadline) await Bun.sleep(5);
  const m = done();
  if (deliveries !== want) failures.push(`fanout: ${deliveries} deliveries, expected ${want}`);
  got.forEach((seen, s) => {
    for (const id of expected) if (!seen.has(id)) return failures.push(`fanout: subscriber ${s} missed ${id}`);
  });
  for (const ws of [...sockets, pub]) ws.close();
  const f: FanoutFigures = {
    deliveries,
    perSec: deliveries / m.seconds,
    cpuPer1k: (m.cpu / deliveries) * 1000,
    bytesPerDelivery: m.sent / deliveries,
  };
  return f;
}

async function runMode(mode: string, opts: ReturnType<typeof options>, corpus: Corpus, oracle: Oracle, failures: string[]) {
  const dir = mkdtempSync(join(tmpdir(), "bunstr-compression-"));
  const config = join(dir, "bunstr.toml");
  writeFileSync(config, `[network]\ncompression = "${mode}"\n[limits]\nquery_ms_per_second = 1000000\n${RATE_LIMITS_OFF}`);
  const relay = await RelayProcess.spawn({ verify: false, args: ["--config", config] });
  const port = Number(new URL(relay.url).port);
  try {
    const stored: Corpus = { ...corpus, size: opts.events };
    const ingest = new IngestRun({
      url: relay.url,
      corpus: stored,
      conns: 4,
      window: 200,
      stallMs: 30_000,
      mayBeRefused: (i) => oracle.isGone(corpus.id(i)),
      windowEvents: opts.events,
      log: () => {},
    });
    await ingest.run();
    await ingest.close();
    failures.push(...ingest.failures.lines().map((l) => `${mode} ingest: ${l}`));
    const query = new QueryRun({
      url: relay.url,
      corpus: stored,
      oracle,
      reqs: opts.reqs,
      perType: 0,
      conns: 8,
      inflight: 1,
      exact: true,
      seed: 1,
      timeoutMs: 30_000,
      log: () => {},
    });
    const done = meter(relay, port);
    const q = await query.run();
    const m = done(); // before close: closed sockets leave ss's count
    await query.close();
    failures.push(...query.failures.lines().map((l) => `${mode} query: ${l}`));
    const one = await fanout(relay, corpus, opts.events, opts.publish, opts.subs, true, failures);
    const each = await fanout(relay, corpus, opts.events + opts.publish, opts.publish, opts.subs, false, failures);
    return {
      mode,
      reqsPerSec: q.mix.reqsPerSec,
      p99: q.mix.latencyMs.p99,
      cpuPer1kReqs: (m.cpu / q.mix.reqs) * 1000,
      bytesPerEventReturned: m.sent / q.mix.eventsReturned,
      one,
      each,
      peakRss: memoryMiB(relay.pid).peak,
    };
  } finally {
    await relay.stop();
    relay.removeDataDir();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<number> {
  const opts = options();
  const load = loadavg()[0]!.toFixed(2);
  const corpus = loadCorpus(opts.events + 2 * opts.publish, log);
  const oracle = new Oracle({ keepEvents: true });
  for (let i = 0; i < opts.events; i++) oracle.add(corpus.event(i));
  const failures: string[] = [];
  const rows = [];
  for (const mode of opts.modes) {
    log(
      `${mode}: ingest ${opts.events}, ${opts.reqs} REQs, fanout of ${opts.publish} events to ${opts.subs} subscribers (one topic, then one each)`,
    );
    rows.push(await runMode(mode, opts, corpus, oracle, failures));
  }
  const n = (v: number, d = 0) => v.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d });
  console.log(
    `\npermessage-deflate: ${opts.events} events stored, ${opts.reqs} REQs (8 conns x 1), fanout ${opts.publish} events x ${opts.subs} subs; load ${load} at start\n`,
  );
  console.log(
    "| mode | REQs/s | p99 ms | CPU-s/1k REQs | wire B per event returned | fanout, one topic: deliveries/s, CPU-s/1k, B/delivery | one topic each: deliveries/s, CPU-s/1k, B/delivery | peak RSS MiB |",
  );
  console.log("|---|---|---|---|---|---|---|---|");
  for (const r of rows)
    console.log(
      `| ${r.mode} | ${n(r.reqsPerSec)} | ${n(r.p99, 1)} | ${n(r.cpuPer1kReqs, 3)} | ${n(r.bytesPerEventReturned)} | ` +
        `${n(r.one.perSec)}, ${n(r.one.cpuPer1k, 3)}, ${n(r.one.bytesPerDelivery)} | ${n(r.each.perSec)}, ${n(r.each.cpuPer1k, 3)}, ${n(r.each.bytesPerDelivery)} | ${n(r.peakRss)} |`,
    );
  for (const f of failures.slice(0, 50)) console.log(`FAIL ${f}`);
  console.log(JSON.stringify({ load: Number(load), opts, rows, ok: failures.length === 0 }));
  return failures.length ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
