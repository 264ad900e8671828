// Connections at scale: open N websockets to a relay process, one subscription each (the same
// filter; half share one subscription id, half have their own, so both the shared-topic and the
// one-group-per-connection paths are used), publish one event matching all of them, check that
// every connection got it exactly once, close them all, and repeat. Relay RSS and open descriptors
// are read from /proc after each step: after a close they must come back to where they were.
// Shared by test/connections.test.ts and bench/connections.ts.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Conn } from "../lib/conn.ts";
import { fakePubkey, unsignedEvent } from "../lib/events.ts";
import { fdLimit, memoryMiB, openFds, RATE_LIMITS_OFF, RelayProcess } from "../lib/relay.ts";

export interface ConnectionsOptions {
  connections: number;
  cycles: number;
  /** Connections opened concurrently (default 250): below the listen backlog. */
  batch?: number;
  /** How long to let the relay settle after closing before reading its RSS, ms (default 1000). */
  settleMs?: number;
  /** Lower the relay's soft `ulimit -n` before it starts (it is expected to raise it again). */
  relaySoftLimit?: number;
  log?: (m: string) => void;
}

export interface CycleResult {
  /** Opening every connection and getting EOSE for its subscription, ms. */
  openMs: number;
  /** Connections that failed to open or subscribe. */
  openErrors: number;
  rssOpenMiB: number;
  fdsOpen: number;
  /** (RSS with all open - RSS before opening) / N, KiB. */
  perConnectionKiB: number;
  /** Publish -> the last connection received the event, ms. */
  deliveryMs: number;
  received: number;
  missing: number;
  duplicated: number;
  /** Close sent -> the relay's descriptor count back to its idle level, ms (null: it never came back). */
  closeMs: number | null;
  rssAfterCloseMiB: number;
  fdsAfterClose: number;
}

export interface ConnectionsResult {
  connections: number;
  /** RLIMIT_NOFILE of this (client) process and of the relay. */
  limits: { clientSoft: number; clientHard: number; relaySoft: number; relayHard: number };
  /** The relay's "open files limit raised" line, if it printed one. */
  relayRaised: string | null;
  /** Relay RSS and descriptors right after start, with no client. */
  idle: { rssMiB: number; fds: number };
  cycles: CycleResult[];
  relayExitCode: number | null;
  stderr: string;
}

export async function runConnections(opts: ConnectionsOptions): Promise<ConnectionsResult> {
  const log = opts.log ?? (() => {});
  const n = opts.connections;
  const batch = opts.batch ?? 250;
  const dataDir = mkdtempSync(join(tmpdir(), "bunstr-connections-"));
  // Every client is 127.0.0.1: lift the per-IP cap above our count.
  writeFileSync(join(dataDir, "bunstr.toml"), `[limits]\nmax_connections_per_ip = ${n + 100}\n${RATE_LIMITS_OFF}`);
  const wrap = opts.relaySoftLimit ? ["sh", "-c", `ulimit -Sn ${opts.relaySoftLimit} && exec "$@"`, "sh"] : undefined;
  const relay = await RelayProcess.spawn({ verify: false, dataDir, args: ["--config", join(dataDir, "bunstr.toml")], wrap });
  const run = Math.random().toString(36).slice(2, 8);
  const filter = { kinds: [1], "#t": [`conn-${run}`], limit: 0 };
  const open: WebSocket[] = [];
  try {
    const mine = fdLimit("self");
    const theirs = fdLimit(relay.pid);
    const raised = /open files limit raised[^\n]*/.exec(relay.stdout.text)?.[0] ?? null;
    await Bun.sleep(300);
    const idle = { rssMiB: memoryMiB(relay.pid).rss, fds: openFds(relay.pid) };
    log(
      `relay idle: RSS ${idle.rssMiB.toFixed(1)} MiB, ${idle.fds} fds; ulimit -n: client ${mine.soft}/${mine.hard}, relay ${theirs.soft}/${theirs.hard}`,
    );
    const publisher = await Conn.connect(relay.url, "publisher");
    const baseFds = openFds(relay.pid); // idle + the publisher
    const author = fakePubkey();
    const cycles: CycleResult[] = [];

    for (let c = 1; c <= opts.cycles; c++) {
      const counts = new Uint8Array(n);
      let lastReceipt = 0;
      let openErrors = 0;
      const rssBefore = memoryMiB(relay.pid).rss;
      const t0 = performance.now();
      for (let i = 0; i < n; i += batch) {
        await Promise.all(
          Array.from({ length: Math.min(batch, n - i) }, (_, j) => {
            const k = i + j;
            const subId = k % 2 === 0 ? "shared" : `c${k}`;
            const req = JSON.stringify(["REQ", subId, filter]);
            return new Promise<void>((resolve) => {
              const ws = new WebSocket(relay.url);
              open.push(ws);
              const timer = setTimeout(() => (openErrors++, resolve()), 30_000);
              ws.onopen = () => ws.send(req);
              ws.onerror = () => (clearTimeout(timer), openErrors++, resolve());
              ws.onmessage = (m) => {
                const s = m.data as string;
                if (s.startsWith('["EOSE"')) return (clearTimeout(timer), resolve());
                if (s.startsWith('["EVENT"')) {
                  if (counts[k]! < 255) counts[k]!++;
                  lastReceipt = performance.now();
                }
              };
            });
          }),
        );
      }
      const openMs = performance.now() - t0;
      await Bun.sleep(200);
      const rssOpen = memoryMiB(relay.pid).rss;
      const fdsOpen = openFds(relay.pid);

      // One event that matches every subscription.
      const e = unsignedEvent(author, { content: `to all ${c}`, tags: [["t", `conn-${run}`]] });
      const acked = new Promise<boolean>((resolve) => {
        const t = setTimeout(() => resolve(false), 10_000);
        publisher.onFrame = (f) => f[0] === "OK" && f[1] === e.id && (clearTimeout(t), resolve(f[2] === true));
      });
      const tp = performance.now();
      publisher.send(JSON.stringify(["EVENT", e]));
      if (!(await acked)) throw new Error(`cycle ${c}: the event to all was not acknowledged`);
      const until = performance.now() + 15_000;
      const got = () => counts.reduce((a, x) => a + (x > 0 ? 1 : 0), 0);
      while (got() < n - openErrors && performance.now() < until) await Bun.sleep(20);
      await Bun.sleep(300); // a duplicate would arrive by now
      let received = 0;
      let duplicated = 0;
      for (const x of counts) {
        if (x > 0) received++;
        if (x > 1) duplicated++;
      }

      // Close everything; the relay is done when its descriptor count is back to idle.
      const tc = performance.now();
      for (const ws of open) ws.close();
      open.length = 0;
      let closeMs: number | null = null;
      const closeUntil = performance.now() + 20_000;
      while (performance.now() < closeUntil) {
        if (openFds(relay.pid) <= baseFds + 2) {
          closeMs = performance.now() - tc;
          break;
        }
        await Bun.sleep(50);
      }
      await Bun.sleep(opts.settleMs ?? 1000);
      const cycle: CycleResult = {
        openMs,
        openErrors,
        rssOpenMiB: rssOpen,
        fdsOpen,
        perConnectionKiB: ((rssOpen - rssBefore) * 1024) / n,
        deliveryMs: lastReceipt - tp,
        received,
        missing: n - received,
        duplicated,
        closeMs,
        rssAfterCloseMiB: memoryMiB(relay.pid).rss,
        fdsAfterClose: openFds(relay.pid),
      };
      cycles.push(cycle);
      log(
        `cycle ${c}: ${n} open in ${openMs.toFixed(0)} ms (${openErrors} failed), RSS ${rssBefore.toFixed(1)} -> ${rssOpen.toFixed(1)} MiB ` +
          `(${cycle.perConnectionKiB.toFixed(1)} KiB/conn), ${fdsOpen} fds; event to all: ${received} got it, ${duplicated} twice, in ${cycle.deliveryMs.toFixed(0)} ms; ` +
          `closed in ${closeMs?.toFixed(0) ?? "NEVER"} ms -> RSS ${cycle.rssAfterCloseMiB.toFixed(1)} MiB, ${cycle.fdsAfterClose} fds`,
      );
    }
    await publisher.close();
    const relayExitCode = await relay.stop();
    return {
      connections: n,
      limits: { clientSoft: mine.soft, clientHard: mine.hard, relaySoft: theirs.soft, relayHard: theirs.hard },
      relayRaised: raised,
      idle,
      cycles,
      relayExitCode,
      stderr: relay.stderr.text,
    };
  } finally {
    for (const ws of open) ws.close();
    relay.kill();
    await relay.proc.exited;
    relay.removeDataDir();
  }
}

/** How many connections fit: each needs one descriptor in the relay and one here, plus headroom. */
export function connectionsThatFit(want: number, headroom = 200): { count: number; clientSoft: number; clientHard: number } {
  const { soft, hard } = fdLimit("self");
  return { count: Math.max(0, Math.min(want, soft - headroom)), clientSoft: soft, clientHard: hard };
}
