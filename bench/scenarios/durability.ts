// Durability: publish as fast as the relay acknowledges, kill it (SIGKILL, or SIGTERM for the
// clean path), restart it on the same data directory and look for every acknowledged event.
// Shared by test/durability.test.ts (CI-sized) and bench/durability.ts (N kill cycles).
import { Database } from "bun:sqlite";
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import type { NostrEvent } from "../../src/protocol/event.ts";
import { Conn } from "../lib/conn.ts";
import { eventKey } from "../lib/events.ts";
import { Hammer } from "../lib/hammer.ts";
import { RelayProcess } from "../lib/relay.ts";
import { readWal, type WalState } from "../lib/wal.ts";

export const DB_FILE = "bunstr.sqlite";

/** When to pull the plug. */
export type KillTrigger =
  /** As soon as this many OK true have arrived in this cycle. */
  | { afterAcked: number }
  /**
   * Once at least this many OK true have arrived, at the first moment the -wal file is seen being
   * written (size or mtime, polled every millisecond): the writer is in the middle of a transaction.
   */
  | { walGrowthAfterAcked: number };

export interface KillCycleOptions {
  dataDir: string;
  verify: boolean;
  conns: number;
  window: number;
  /** Event number i for connection k (must be new to the relay). */
  make: (k: number, i: number) => NostrEvent;
  trigger: KillTrigger;
  signal?: "SIGKILL" | "SIGTERM";
  /** Give up (and fail) if the trigger did not fire within this long. */
  timeoutMs?: number;
  relayArgs?: string[];
}

export interface KillCycleResult {
  /** OK true count when the signal was sent. */
  ackedAtSignal: number;
  /** Every id answered OK true, including OKs that were already on their way when the signal hit. */
  acked: string[];
  /** All events sent, by id. */
  sent: Map<string, NostrEvent>;
  /** Sent but never answered. */
  unanswered: string[];
  /** OK false, with reasons (expected only after SIGTERM: "error: relay is shutting down"). */
  refused: Map<string, string>;
  notices: string[];
  anomalies: string[];
  /** The -wal file as the dead relay left it (before anyone recovered it). */
  wal: WalState;
  /** Exit code (SIGTERM) or null (killed). */
  exitCode: number | null;
  /** Signal sent -> process gone, ms. */
  exitMs: number;
  /** Relay output (for failure messages). */
  output: string;
  /** First EVENT sent -> signal, seconds. */
  seconds: number;
}

/** Starts a relay on `dataDir`, hammers it, sends the signal when the trigger fires, waits for the exit. */
export async function killCycle(opts: KillCycleOptions): Promise<KillCycleResult> {
  const relay = await RelayProcess.spawn({ verify: opts.verify, dataDir: opts.dataDir, args: opts.relayArgs });
  const signal = opts.signal ?? "SIGKILL";
  const walPath = join(opts.dataDir, `${DB_FILE}-wal`);
  const counters = new Array<number>(opts.conns).fill(0);
  let signalled = false;
  let ackedAtSignal = 0;
  let signalAt = 0;
  const fire = (acked: number) => {
    if (signalled) return;
    signalled = true;
    ackedAtSignal = acked;
    signalAt = performance.now();
    relay.proc.kill(signal);
  };
  const trigger = opts.trigger;
  const hammer = new Hammer({
    url: relay.url,
    conns: opts.conns,
    window: opts.window,
    next: (k) => opts.make(k, counters[k]!++),
    onAck: "afterAcked" in trigger ? (n) => n >= trigger.afterAcked && fire(n) : undefined,
  });
  const t0 = performance.now();
  const timeoutMs = opts.timeoutMs ?? 30_000;
  try {
    await hammer.start();
    let lastWal = "";
    while (!signalled) {
      if (!relay.running) throw new Error(`relay died before the kill (code ${relay.proc.exitCode}):\n${relay.stderr.text}`);
      if (performance.now() - t0 > timeoutMs)
        throw new Error(
          `kill trigger ${JSON.stringify(trigger)} did not fire within ${timeoutMs} ms (acked ${hammer.ackedCount}, refused ${hammer.refused.size})`,
        );
      if ("walGrowthAfterAcked" in trigger) {
        // Size or modification time: after a checkpoint SQLite rewrites the log from its start.
        const st = existsSync(walPath) ? statSync(walPath) : undefined;
        const wal = st ? `${st.size}:${st.mtimeMs}` : "";
        if (hammer.ackedCount >= trigger.walGrowthAfterAcked && lastWal !== "" && wal !== lastWal) fire(hammer.ackedCount);
        lastWal = wal;
        await Bun.sleep(1);
      } else await Bun.sleep(5);
    }
    // The connections keep sending until they are closed: after SIGTERM new events must be
    // refused (OK false), and those already in flight answered.
    const exited = await Promise.race([relay.proc.exited, Bun.sleep(15_000).then(() => "timeout" as const)]);
    if (exited === "timeout") throw new Error(`relay did not exit within 15 s of ${signal}:\n${relay.stdout.text}\n${relay.stderr.text}`);
    const exitMs = performance.now() - signalAt;
    await hammer.waitClosed(5000);
    const wal = readWal(walPath);
    return {
      ackedAtSignal,
      acked: [...hammer.acked],
      sent: hammer.sent,
      unanswered: [...hammer.pending],
      refused: hammer.refused,
      notices: hammer.notices,
      anomalies: hammer.anomalies,
      wal,
      exitCode: relay.proc.exitCode,
      exitMs,
      output: `${relay.stdout.text}${relay.stderr.text}`,
      seconds: (signalAt - t0) / 1000,
    };
  } finally {
    relay.kill();
    await relay.proc.exited;
    await hammer.close();
  }
}

export interface RestartCheck {
  /** Spawn -> "listening on", ms. */
  startMs: number;
  /** After "listening": connect + first REQ -> EOSE, ms. */
  firstReqMs: number;
  /** Acknowledged ids the restarted relay does not return. */
  missing: string[];
  /** Returned, but not byte for byte the event that was published. */
  altered: string[];
  /** Of the `maybe` ids (sent, not acknowledged): how many were stored anyway (committed, OK lost with the process). */
  maybeFound: number;
  /** REQs answered with CLOSED instead of EOSE. */
  closed: string[];
  /** Exit code of the restarted relay after SIGTERM. */
  exitCode: number | null;
  /** The -wal file after that clean exit. */
  walAfterExit: WalState;
  /** `PRAGMA integrity_check` rows ("ok" alone when healthy). */
  integrity: string[];
  /** Tag rows whose event is not there (a transaction split in two would leave some). */
  orphanTags: number;
  /** Events in the database. */
  storedEvents: number;
  output: string;
}

/**
 * Restarts the relay on `dataDir`, fetches every id of `expected` (and `maybe`) by REQ, compares
 * them with what was published, stops it with SIGTERM and checks the database file.
 */
export async function restartAndCheck(opts: {
  dataDir: string;
  verify: boolean;
  expected: Map<string, NostrEvent>;
  maybe?: string[];
  relayArgs?: string[];
}): Promise<RestartCheck> {
  const t0 = performance.now();
  const relay = await RelayProcess.spawn({ verify: opts.verify, dataDir: opts.dataDir, args: opts.relayArgs });
  const startMs = performance.now() - t0;
  let conn: Conn | undefined;
  try {
    const t1 = performance.now();
    conn = await Conn.connect(relay.url, "check");
    const reader = new IdReader(conn);
    await reader.req([{ kinds: [1], limit: 1 }]);
    const firstReqMs = performance.now() - t1;

    const ids = [...opts.expected.keys()];
    const found = await reader.fetch(ids);
    const missing = ids.filter((id) => !found.has(id));
    const altered = ids.filter((id) => found.has(id) && found.get(id) !== eventKey(opts.expected.get(id)!));
    const maybeFound = opts.maybe?.length ? (await reader.fetch(opts.maybe)).size : 0;
    await conn.close();
    const exitCode = await relay.stop();
    const walAfterExit = readWal(join(opts.dataDir, `${DB_FILE}-wal`));
    const db = checkDatabase(join(opts.dataDir, DB_FILE));
    return {
      startMs,
      firstReqMs,
      missing,
      altered,
      maybeFound,
      closed: reader.closed,
      exitCode,
      walAfterExit,
      ...db,
      output: `${relay.stdout.text}${relay.stderr.text}`,
    };
  } finally {
    relay.kill();
    await relay.proc.exited;
  }
}

/** Opens the database (the relay must be stopped) and checks it. */
export function checkDatabase(path: string): { integrity: string[]; orphanTags: number; storedEvents: number } {
  const db = new Database(path);
  try {
    const integrity = (db.query("PRAGMA integrity_check").all() as Record<string, string>[]).map((r) => Object.values(r)[0]!);
    const orphanTags = (db.query("SELECT count(*) AS n FROM tags WHERE seq NOT IN (SELECT seq FROM events)").get() as { n: number }).n;
    const storedEvents = (db.query("SELECT count(*) AS n FROM events").get() as { n: number }).n;
    return { integrity, orphanTags, storedEvents };
  } finally {
    db.close();
  }
}

/** REQs by id over one connection: one filter of 1,000 ids per REQ (~67 KB, under the default 128 KiB frame limit). */
export class IdReader {
  readonly closed: string[] = [];
  private n = 0;
  constructor(private readonly conn: Conn) {}

  /** Sends one REQ and resolves at EOSE with the events (id -> eventKey). */
  req(filters: unknown[], timeoutMs = 30_000): Promise<Map<string, string>> {
    const sub = `ids-${++this.n}`;
    const got = new Map<string, string>();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no EOSE for ${sub} within ${timeoutMs} ms`)), timeoutMs);
      this.conn.onFrame = (f) => {
        if (f[1] !== sub) return;
        if (f[0] === "EVENT") {
          const e = f[2] as NostrEvent;
          got.set(e.id, eventKey(e));
        } else if (f[0] === "EOSE" || f[0] === "CLOSED") {
          clearTimeout(timer);
          if (f[0] === "CLOSED") this.closed.push(`${sub}: ${JSON.stringify(f[2])}`);
          this.conn.send(JSON.stringify(["CLOSE", sub]));
          resolve(got);
        }
      };
      this.conn.send(JSON.stringify(["REQ", sub, ...filters]));
    });
  }

  async fetch(ids: string[]): Promise<Map<string, string>> {
    const found = new Map<string, string>();
    const PER_REQ = 1000;
    for (let i = 0; i < ids.length; i += PER_REQ) {
      const chunk = ids.slice(i, i + PER_REQ);
      for (const [id, key] of await this.req([{ ids: chunk, limit: chunk.length }])) found.set(id, key);
    }
    return found;
  }
}

/** One line describing a kill cycle and its check, for logs and failure messages. */
export function describe(k: KillCycleResult, c: RestartCheck): string {
  const wal = k.wal.exists
    ? `WAL at kill: ${k.wal.commits} commits, ${k.wal.uncommittedFrames} uncommitted frames${k.wal.trailingBytes ? `, ${k.wal.trailingBytes} trailing bytes` : ""}`
    : "no WAL at kill";
  return (
    `signal after ${k.ackedAtSignal} OKs (${k.seconds.toFixed(2)} s), ${k.acked.length} acknowledged in all, ${k.unanswered.length} unanswered ` +
    `(${c.maybeFound} of them stored anyway), ${k.refused.size} refused; ${wal}; restart: listening in ${c.startMs.toFixed(0)} ms, ` +
    `first REQ in ${c.firstReqMs.toFixed(0)} ms; missing ${c.missing.length}, altered ${c.altered.length}; ` +
    `integrity ${c.integrity.join("; ")}, orphan tags ${c.orphanTags}, ${c.storedEvents} events stored`
  );
}
