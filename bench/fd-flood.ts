// bunstr under a half-open HTTP flood (can it run out of file descriptors?): attackers
// on several 127.0.1.x addresses open TCP connections, send `GET / HTTP/1.1\r\nHost: x\r\n` and
// never finish the request, reopening each as soon as it is closed, more of them than the relay
// has descriptors. The relay runs as a child process under `prlimit --nofile=N:N` so the limit
// is reached in seconds. Meanwhile a websocket client connected before the flood keeps asking
// (REQ -> EOSE, EVENT -> OK; its first REQ and EVENT are the relay's first, so worker threads
// that start lazily would start now; --warm asks once before the flood), and a new client tries
// to connect every 2 s.
//
//   npx bun bench/fd-flood.ts [--fd-limit 2048] [--connections N] [--attackers 8]
//                             [--flood-seconds 20] [--binary dist/bunstr] [--max-p99-ms 1000]
//                             [--min-newcomers-pct 50] [--warm]
//
// Pass: the relay is alive at the end; the established client got every answer, with p99 under
// --max-p99-ms; at least --min-newcomers-pct (50) % of the new clients get in during the flood,
// and one connects and gets EOSE once the flood stops. Printed too: the
// relay's CPU (a busy accept() loop at EMFILE shows as ~1 CPU-s/s), peak RSS, descriptors, how
// long the relay kept the half-open connections it closed, and how many new clients got in
// during the flood. Exit 0 pass, 1 fail, 2 bad arguments. Bounded: about flood-seconds + 25 s.
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { Conn, type RelayFrame } from "./lib/conn.ts";
import { newSecretKey, signedEvent } from "./lib/events.ts";
import { attackerIps, HalfOpenFlood, type FloodStats } from "./lib/flood.ts";
import { cpuSeconds, fdLimit, memoryMiB, openFds, RelayProcess } from "./lib/relay.ts";
import { summarize } from "./lib/stats.ts";
import { intOption } from "./lib/args.ts";

const { values } = parseArgs({
  args: process.argv.slice(2),
  strict: true,
  options: {
    "fd-limit": { type: "string", default: "2048" },
    connections: { type: "string" },
    attackers: { type: "string", default: "8" },
    "flood-seconds": { type: "string", default: "20" },
    binary: { type: "string" },
    "max-p99-ms": { type: "string", default: "1000" },
    "min-newcomers-pct": { type: "string", default: "50" },
    warm: { type: "boolean", default: false },
    // Internal: this script run as the flooding child process.
    flooder: { type: "boolean", default: false },
    port: { type: "string" },
    "max-seconds": { type: "string", default: "60" },
    help: { type: "boolean", short: "h", default: false },
  },
});
if (values.help) {
  console.log(
    "usage: npx bun bench/fd-flood.ts [--fd-limit 2048] [--connections N] [--attackers 8] [--flood-seconds 20] [--binary dist/bunstr] [--max-p99-ms 1000] [--min-newcomers-pct 50] [--warm]",
  );
  process.exit(0);
}
const num = (name: string, v: string | undefined): number => intOption(name, v);

const limit = num("fd-limit", values["fd-limit"]);
const target = values.connections === undefined ? limit + 1024 : num("connections", values.connections);
const attackers = num("attackers", values.attackers);

if (values.flooder) {
  // The flood runs in its own process so its work does not delay the measuring client's event loop.
  const flood = new HalfOpenFlood({ port: num("port", values.port), ips: attackerIps(attackers), target });
  flood.start();
  const report = () => {
    const s = flood.stats();
    console.log(
      JSON.stringify({
        ...s,
        lifetimes: undefined,
        lifetimeP50: s.lifetimes[s.lifetimes.length >> 1] ?? null,
        lifetimeMax: s.lifetimes.at(-1) ?? null,
      }),
    );
  };
  const tick = setInterval(report, 500);
  const end = () => (clearInterval(tick), report(), flood.stop(), process.exit(0));
  process.on("SIGTERM", end);
  setTimeout(end, num("max-seconds", values["max-seconds"]) * 1000);
} else {
  process.exit(await main());
}

type FloodLine = Omit<FloodStats, "lifetimes"> & { lifetimeP50: number | null; lifetimeMax: number | null };

async function main(): Promise<number> {
  const floodSeconds = num("flood-seconds", values["flood-seconds"]);
  const maxP99 = num("max-p99-ms", values["max-p99-ms"]);
  const minNewcomers = Number(values["min-newcomers-pct"]);
  const t0 = performance.now();
  const log = (m: string) => console.error(`[fd-flood] ${((performance.now() - t0) / 1000).toFixed(1)} s: ${m}`);
  const relay = await RelayProcess.spawn({
    verify: true,
    wrap: ["prlimit", `--nofile=${limit}:${limit}`, "--"],
    command: values.binary ? [values.binary] : undefined,
  });
  const pid = relay.pid;
  const port = Number(new URL(relay.url).port);
  const problems: string[] = [];
  let flooder: ReturnType<typeof Bun.spawn> | undefined;
  try {
    const lim = fdLimit(pid);
    const idleFds = openFds(pid);
    log(
      `relay pid ${pid} at ${relay.url}, limit ${lim.soft}/${lim.hard}, ${idleFds} fds idle; ${relay.stdout.text.trim().split("\n").join(" | ")}`,
    );
    const established = await Conn.connect(relay.url, "established");
    const sk = newSecretKey();

    // One request at a time: REQ -> EOSE (or CLOSED), EVENT -> OK; latency of each.
    const latencies: number[] = [];
    let timeouts = 0;
    let n = 0;
    const ask = (frame: unknown[], done: (f: RelayFrame) => boolean, timeoutMs = 5000): Promise<number | undefined> =>
      new Promise((resolve) => {
        const start = performance.now();
        const timer = setTimeout(() => ((established.onFrame = undefined), resolve(undefined)), timeoutMs);
        established.onFrame = (f) => {
          if (!done(f)) return;
          clearTimeout(timer);
          established.onFrame = undefined;
          resolve(performance.now() - start);
        };
        established.send(JSON.stringify(frame));
      });
    const oneRound = async () => {
      const sub = `q${n++}`;
      const e = signedEvent(sk, { content: `established ${n}` });
      const steps: [unknown[], (f: RelayFrame) => boolean][] = [
        [["REQ", sub, { kinds: [1], limit: 1 }], (f) => (f[0] === "EOSE" || f[0] === "CLOSED") && f[1] === sub],
        [["EVENT", e], (f) => f[0] === "OK" && f[1] === e.id],
      ];
      for (const [frame, done] of steps) {
        const ms = await ask(frame, done);
        if (ms === undefined) timeouts++;
        else latencies.push(ms);
        if (ms !== undefined && frame[0] === "REQ") established.send(JSON.stringify(["CLOSE", sub]));
      }
    };

    // A brand-new client: connects and gets EOSE within `ms`?
    const newcomer = async (ms: number): Promise<boolean> => {
      const c = await Promise.race([Conn.connect(relay.url, "newcomer", ms).catch(() => undefined), Bun.sleep(ms).then(() => undefined)]);
      if (!c) return false;
      try {
        const got = await new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => resolve(false), ms);
          c.onFrame = (f) => f[0] === "EOSE" && (clearTimeout(timer), resolve(true));
          c.send(JSON.stringify(["REQ", "n", { limit: 1 }]));
        });
        return got;
      } finally {
        void c.close(500);
      }
    };

    // --warm: one round before the flood, so worker threads that start lazily are running.
    if (values.warm) await oneRound();

    flooder = Bun.spawn(
      [
        process.execPath,
        import.meta.path,
        "--flooder",
        "--port",
        String(port),
        "--fd-limit",
        String(limit),
        "--connections",
        String(target),
        "--attackers",
        String(attackers),
        "--max-seconds",
        String(floodSeconds + 25),
      ],
      { stdin: "ignore", stdout: "pipe", stderr: "inherit" },
    );
    let flood: FloodLine | undefined;
    void (async () => {
      let buf = "";
      for await (const chunk of flooder.stdout as ReadableStream<Uint8Array>) {
        buf += new TextDecoder().decode(chunk);
        const lines = buf.split("\n");
        buf = lines.pop()!;
        for (const l of lines) if (l.trim()) flood = JSON.parse(l) as FloodLine;
      }
    })();

    // Saturation: the relay's descriptors near the limit (or the flood fully open), at most 15 s.
    log(`flooding: ${target} half-open connections from ${attackers} addresses (127.0.1.1-${attackers})`);
    const satDeadline = performance.now() + 15_000;
    let maxFds = idleFds;
    while (performance.now() < satDeadline && relay.running) {
      const fds = openFds(pid);
      maxFds = Math.max(maxFds, fds);
      if (fds >= limit - 64 || (flood && flood.open >= target)) break;
      await Bun.sleep(100);
    }
    log(`saturated: relay ${relay.running ? openFds(pid) : "DEAD"} fds; flood ${JSON.stringify({ ...flood, perIp: undefined })}`);

    // The measured window: the established client asks, newcomers try, the relay is sampled.
    const cpu0 = relay.running ? cpuSeconds(pid) : 0;
    const w0 = performance.now();
    const windowEnd = w0 + floodSeconds * 1000;
    let newcomersIn = 0;
    let newcomersTried = 0;
    let cpu1 = cpu0;
    const sampler = (async () => {
      while (performance.now() < windowEnd && relay.running) {
        try {
          maxFds = Math.max(maxFds, openFds(pid));
          cpu1 = cpuSeconds(pid);
        } catch {
          break; // gone
        }
        await Bun.sleep(250);
      }
    })();
    const newcomers = (async () => {
      while (performance.now() < windowEnd - 2000 && relay.running) {
        newcomersTried++;
        if (await newcomer(2000)) newcomersIn++;
        await Bun.sleep(500);
      }
    })();
    while (performance.now() < windowEnd && relay.running) {
      await oneRound();
      await Bun.sleep(50);
    }
    await Promise.all([sampler, newcomers]);
    const windowS = (performance.now() - w0) / 1000;
    const load = loadavg();
    const mem = relay.running ? memoryMiB(pid) : undefined;
    const floodAtEnd = flood;

    flooder.kill("SIGTERM");
    await Promise.race([flooder.exited, Bun.sleep(5000)]);
    log("flood stopped");
    await Bun.sleep(1000);
    const after = relay.running && (await newcomer(5000));
    const fdsAfter = relay.running ? openFds(pid) : NaN;

    const lat = summarize(latencies);
    const f = floodAtEnd;
    console.log(
      `relay: ${values.binary ?? "src/main.ts"} under prlimit --nofile=${limit}:${limit}; idle ${idleFds} fds, max ${maxFds} during the flood, ${fdsAfter} after`,
    );
    console.log(
      `flood: ${target} half-open connections from ${attackers} addresses; at the end ${f?.open ?? "?"} open, ${f?.connecting ?? "?"} connecting; ` +
        `${f?.opened ?? "?"} opened, ${f?.cut ?? "?"} cut by the relay (kept for p50 ${fmtMs(f?.lifetimeP50)}, max ${fmtMs(f?.lifetimeMax)}), ${f?.failed ?? "?"} connects failed`,
    );
    console.log(
      `established client: ${lat.n} answers, ${timeouts} timed out (5 s); p50 ${lat.p50.toFixed(1)} ms, p99 ${lat.p99.toFixed(1)} ms, max ${lat.max.toFixed(1)} ms`,
    );
    console.log(
      `new clients during the flood: ${newcomersIn}/${newcomersTried} connected and got EOSE within 2 s; after the flood: ${after ? "yes" : "NO"}`,
    );
    console.log(
      `relay: ${relay.running ? "alive" : `DEAD (exit ${relay.proc.exitCode ?? relay.proc.signalCode})`}; CPU ${((cpu1 - cpu0) / windowS).toFixed(2)} s/s over the ${windowS.toFixed(1)} s window; ` +
        `RSS ${mem ? `${mem.rss.toFixed(0)} MiB, peak ${mem.peak.toFixed(0)} MiB` : "?"}; load average ${load.map((x) => x.toFixed(2)).join(" ")}`,
    );
    if (!relay.running)
      problems.push(
        `the relay died (exit ${relay.proc.exitCode ?? relay.proc.signalCode}):\n${relay.stderr.text.slice(-1200) || relay.stdout.text.slice(-1200)}`,
      );
    if (timeouts > 0) problems.push(`the established client got no answer within 5 s to ${timeouts} of ${timeouts + lat.n} requests`);
    if (lat.n > 0 && lat.p99 > maxP99) problems.push(`the established client's p99 ${lat.p99.toFixed(0)} ms is over ${maxP99} ms`);
    if (lat.n === 0) problems.push("the established client got no answer at all");
    if (newcomersTried > 0 && (100 * newcomersIn) / newcomersTried < minNewcomers)
      problems.push(`only ${newcomersIn} of ${newcomersTried} new clients got in during the flood (want ${minNewcomers}%)`);
    if (!after) problems.push("no new client could connect (and get EOSE) within 5 s after the flood stopped");
  } finally {
    flooder?.kill("SIGKILL");
    const out = relay.stderr.text;
    await relay.stop(5000);
    // The relay's own account of what it cut (src/relay/connection/fd-guard.ts), if it gave one.
    for (const line of out.split("\n")) if (line.startsWith("file descriptors:")) console.log(`relay says: ${line}`);
    relay.removeDataDir();
  }
  for (const p of problems) console.log(`FAIL ${p}`);
  console.log(problems.length ? "FAIL" : "PASS");
  return problems.length ? 1 : 0;
}

function fmtMs(ms: number | null | undefined): string {
  return ms === null || ms === undefined ? "-" : ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${ms.toFixed(0)} ms`;
}
