// bunstr connections check, the long version of test/connections.test.ts: 10,000 idle websockets
// with one subscription each, memory per connection, one event reaching all of them, and 5
// open/close cycles with the relay's RSS after each. See bench/scenarios/connections.ts.
//
//   npx bun bench/connections.ts [--connections 10000] [--cycles 5] [--relay-soft-limit 1024]
//   npx bun bench/connections.ts --fd-limit-probe 300 [--probe-wait-ms 2000]
//
// File descriptors: every connection needs one in the relay and one in this process. Bun raises
// its soft RLIMIT_NOFILE to the hard limit at start-up, in both processes, so the hard limit
// (`ulimit -Hn`) is what matters; the relay's own limit binds before ours (it also holds the
// database, WAL, workers), so spreading the clients over several processes would not help.
//
// --fd-limit-probe N starts the relay with `ulimit -n N` (soft and hard) and opens N + 100
// connections: it reports whether the relay survives running out of descriptors, how much CPU it
// burns while stuck at the limit, and whether it accepts a new client once some have left.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { cpuSeconds, fdLimit, openFds, RATE_LIMITS_OFF, RelayProcess } from "./lib/relay.ts";
import { connectionsThatFit, runConnections } from "./scenarios/connections.ts";
import { intOption } from "./lib/args.ts";

const { values } = parseArgs({
  args: process.argv.slice(2),
  strict: true,
  options: {
    connections: { type: "string", default: "10000" },
    cycles: { type: "string", default: "5" },
    "relay-soft-limit": { type: "string", default: "1024" },
    "fd-limit-probe": { type: "string" },
    "probe-wait-ms": { type: "string", default: "2000" },
    help: { type: "boolean", short: "h", default: false },
  },
});
if (values.help) {
  console.log(
    "usage: npx bun bench/connections.ts [--connections 10000] [--cycles 5] [--relay-soft-limit 1024]\n       npx bun bench/connections.ts --fd-limit-probe N [--probe-wait-ms 2000]",
  );
  process.exit(0);
}
const num = (name: string, v: string | undefined): number => intOption(name, v, 0);

if (values["fd-limit-probe"] !== undefined)
  process.exit(await probe(num("fd-limit-probe", values["fd-limit-probe"]), num("probe-wait-ms", values["probe-wait-ms"])));

const want = num("connections", values.connections);
const fit = connectionsThatFit(want);
const t0 = performance.now();
console.log(`ulimit -n here: soft ${fit.clientSoft}, hard ${fit.clientHard} (Bun raised the soft limit to the hard one at start-up)`);
if (fit.count < want) console.log(`NOTE: only ${fit.count} of ${want} connections fit under this limit; running ${fit.count}`);
const soft = num("relay-soft-limit", values["relay-soft-limit"]);
const r = await runConnections({
  connections: fit.count,
  cycles: Math.max(1, num("cycles", values.cycles)),
  relaySoftLimit: soft || undefined,
  log: (m) => console.error(`[connections] ${((performance.now() - t0) / 1000).toFixed(1)} s: ${m}`),
});
const n = r.connections;
console.log(
  `relay started with soft limit ${soft || "inherited"}; after start: soft ${r.limits.relaySoft}, hard ${r.limits.relayHard}` +
    (r.relayRaised ? ` (bunstr: "${r.relayRaised}")` : " (bunstr printed nothing: the soft limit was already at the hard one)"),
);
console.log(`relay idle: RSS ${r.idle.rssMiB.toFixed(1)} MiB, ${r.idle.fds} fds`);
console.log("cycle  open ms  RSS open  KiB/conn  fds open  got event  twice  delivery ms  close ms  RSS after close  fds after");
r.cycles.forEach((c, i) =>
  console.log(
    `${String(i + 1).padEnd(5)}  ${c.openMs.toFixed(0).padStart(7)}  ${c.rssOpenMiB.toFixed(1).padStart(8)}  ${c.perConnectionKiB.toFixed(1).padStart(8)}  ${String(c.fdsOpen).padStart(8)}  ` +
      `${String(c.received).padStart(9)}  ${String(c.duplicated).padStart(5)}  ${c.deliveryMs.toFixed(0).padStart(11)}  ${(c.closeMs?.toFixed(0) ?? "NEVER").padStart(8)}  ` +
      `${c.rssAfterCloseMiB.toFixed(1).padStart(15)}  ${String(c.fdsAfterClose).padStart(9)}`,
  ),
);
const first = r.cycles[0]!;
const memPerConn = ((first.rssOpenMiB - r.idle.rssMiB) * 1024) / n;
const after = r.cycles.map((c) => c.rssAfterCloseMiB);
const failures: string[] = [];
r.cycles.forEach((c, i) => {
  if (c.openErrors) failures.push(`cycle ${i + 1}: ${c.openErrors} connections failed to open`);
  if (c.received !== n || c.duplicated) failures.push(`cycle ${i + 1}: ${c.received}/${n} got the event, ${c.duplicated} twice`);
  if (c.closeMs === null || c.fdsAfterClose > r.idle.fds + 3)
    failures.push(`cycle ${i + 1}: descriptors not released (${c.fdsAfterClose} open)`);
  if (c.rssAfterCloseMiB > first.rssAfterCloseMiB + 30)
    failures.push(`cycle ${i + 1}: RSS after close ${c.rssAfterCloseMiB.toFixed(1)} MiB > cycle 1 + 30`);
});
if (r.relayExitCode !== 0) failures.push(`relay exit code ${r.relayExitCode}`);
console.log(
  `\n${n} connections held: ${memPerConn.toFixed(1)} KiB per connection (cycle 1: RSS with all open - idle RSS, / N); ` +
    `RSS after each close: ${after.map((x) => x.toFixed(1)).join(", ")} MiB (idle ${r.idle.rssMiB.toFixed(1)})`,
);
for (const f of failures) console.log(`FAIL ${f}`);
console.log(`${failures.length ? "FAILED" : "ok"} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
process.exit(failures.length ? 1 : 0);

/** Runs the relay at a tiny descriptor limit and floods it. Exit 0 if it survives without spinning and recovers. */
async function probe(limit: number, waitMs: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), "bunstr-fd-probe-"));
  writeFileSync(join(dir, "bunstr.toml"), `[limits]\nmax_connections_per_ip = 1000000\n${RATE_LIMITS_OFF}`);
  const relay = await RelayProcess.spawn({
    verify: false,
    dataDir: dir,
    args: ["--config", join(dir, "bunstr.toml")],
    wrap: ["sh", "-c", `ulimit -n ${limit} && exec "$@"`, "sh"],
  });
  const sockets: WebSocket[] = [];
  try {
    const lim = fdLimit(relay.pid);
    await Bun.sleep(waitMs);
    console.log(
      `relay at ulimit -n ${lim.soft}/${lim.hard}, ${openFds(relay.pid)} fds in use after ${waitMs} ms; opening ${limit + 100} connections`,
    );
    let opened = 0;
    let failed = 0;
    for (let i = 0; i < limit + 100; i++) {
      const ws = new WebSocket(relay.url);
      sockets.push(ws);
      ws.onopen = () => opened++;
      ws.onerror = () => failed++;
    }
    const exited = await Promise.race([relay.proc.exited, Bun.sleep(1000).then(() => undefined)]);
    if (exited !== undefined) {
      console.log(
        `FAIL the relay died (exit ${exited}) when it ran out of descriptors; ${opened} had opened\n${relay.stderr.text.slice(-1500)}`,
      );
      return 1;
    }
    const c0 = cpuSeconds(relay.pid);
    await Bun.sleep(3000);
    const cpu = cpuSeconds(relay.pid) - c0;
    console.log(
      `at the limit: ${opened} open, ${failed} failed, ${sockets.length - opened - failed} waiting; relay CPU ${cpu.toFixed(2)} s in 3 s; ${openFds(relay.pid)} fds`,
    );
    for (const ws of sockets.slice(0, 200)) ws.close(); // room for the 100+ still waiting, and one more
    await Bun.sleep(1000);
    const late = new WebSocket(relay.url);
    const lateResult = await Promise.race([
      new Promise<string>((resolve) => ((late.onopen = () => resolve("opened")), (late.onerror = () => resolve("refused")))),
      Bun.sleep(5000).then(() => "no answer in 5 s"),
    ]);
    late.close();
    console.log(`after 200 clients left: a new client ${lateResult}; relay running ${relay.running}`);
    const problems = [];
    if (!relay.running) problems.push(`relay died (exit ${relay.proc.exitCode}): ${relay.stderr.text.slice(-800)}`);
    if (cpu > 1.5) problems.push(`relay burned ${cpu.toFixed(2)} CPU s in 3 s while out of descriptors (busy accept loop)`);
    for (const p of problems) console.log(`FAIL ${p}`);
    return problems.length ? 1 : 0;
  } finally {
    for (const ws of sockets) ws.close();
    relay.kill();
    await relay.proc.exited;
    relay.removeDataDir();
  }
}
