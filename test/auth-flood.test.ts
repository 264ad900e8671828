// Issue 36: a flood of NIP-42 AUTHs with valid ids and bad signatures. Each one was read, checked
// and hashed (SHA-256 of the event) before the in-flight limit refused it, and those that got in
// each cost a signature check: 50 such connections kept the main thread busy enough to take an
// honest client's p99 to a second. Now every AUTH is charged to its address's bucket first
// ([rate_limits] auths_per_minute / auths_burst) and refused `rate-limited:` on nothing but the
// frame's JSON, and a connection that keeps at it is closed.
//
// Over real sockets to a relay in its own process, with the default config but
// exempt_private_addresses off (loopback counts as public): attackers from 127.0.1.x, in a
// process of their own (test/fixtures/auth-flooder.ts), an honest client from 127.0.0.9
// publishing and reading every 100 ms meanwhile.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RawWs } from "../bench/lib/rawws.ts";
import { defaults } from "../src/config/schema.ts";
import { signer } from "./helpers.ts";
import { collectOutput, spawnRelay, type RelayProcess } from "./process-helpers.ts";
import { SOURCE } from "./relay-process.ts";

const ATTACKERS = 20;
const FLOOD_SECONDS = 5;
const dir = mkdtempSync(join(tmpdir(), "bunstr-auth-flood-"));
let relay: RelayProcess | undefined;

afterAll(() => {
  relay?.proc.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

const percentile = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)]!;

/** The honest client's round trips (EVENT -> OK, REQ -> EOSE), one of each every 100 ms, until stopped. */
function honestClient(c: RawWs): { stop(): Promise<number[]> } {
  const me = signer();
  const times: number[] = [];
  let running = true;
  const loop = (async () => {
    for (let i = 0; running; i++) {
      const e = me.sign({ kind: 1, content: `honest ${i}` });
      let t = performance.now();
      const from = c.frames.length;
      c.send(["EVENT", e]);
      const ok = await c.next((f) => f[0] === "OK" && f[1] === e.id, 10_000, from);
      expect(ok[2]).toBe(true);
      times.push(performance.now() - t);
      t = performance.now();
      const r = await c.req(`h${i}`, [{ ids: [e.id] }]);
      expect(r.end[0]).toBe("EOSE");
      expect(r.events).toBe(1);
      times.push(performance.now() - t);
      await Bun.sleep(100);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return times;
    },
  };
}

test("an AUTH flood with bad signatures: refused rate-limited from the address's bucket, the honest client keeps its latency", async () => {
  const config = join(dir, "bunstr.toml");
  writeFileSync(config, "[rate_limits]\nexempt_private_addresses = false\n");
  relay = await spawnRelay(SOURCE, ["--data-dir", join(dir, "data"), "--config", config], dir);
  // spawnRelay returns on the config warning (it says "listening on" too): wait for the real line.
  for (const deadline = Date.now() + 15_000; !/bunstr \S+ listening on/.test(relay.output()); await Bun.sleep(10))
    if (relay.proc.exitCode !== null || Date.now() > deadline) throw new Error(`relay did not start:\n${relay.output()}`);
  const honest = await RawWs.connect(relay.port, "127.0.0.9");
  await honest.next((f) => f[0] === "AUTH");

  // Niced: in the wild the attackers' sending is not on the relay's machine; here it shares two cores.
  const nice = Bun.which("nice") ? ["nice", "-n", "19"] : [];
  const flooder = Bun.spawn(
    [
      ...nice,
      process.execPath,
      join(import.meta.dir, "fixtures", "auth-flooder.ts"),
      String(relay.port),
      "127.0.1.",
      String(ATTACKERS),
      String(FLOOD_SECONDS),
    ],
    { stdin: "ignore", stdout: "pipe", stderr: "pipe" },
  );
  const out = collectOutput(flooder);
  try {
    for (const deadline = Date.now() + 15_000; !out().includes("flooding"); await Bun.sleep(10)) {
      if (flooder.exitCode !== null || Date.now() > deadline) throw new Error(`the flood did not start:\n${out()}`);
    }
    const probe = honestClient(honest);
    await flooder.exited;
    const times = await probe.stop();
    const counts = JSON.parse(out().trim().split("\n").at(-1)!) as Record<string, number>;
    const p50 = percentile(times, 50);
    const p99 = percentile(times, 99);
    console.log(
      `[auth-flood] honest p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms over ${times.length} round trips; attackers ${JSON.stringify(counts)}`,
    );

    // Measured on a busy 2-core machine (load 5-11): fixed, p50 2-4 ms and p99 36-140 ms, once
    // p50 25 ms and p99 743 ms beside a CPU hog (the p99 of ~40 round trips is their slowest: one
    // stall of the host); before, p50 0.7 s and p99 7-8 s, with 4 round trips in the 5 s (or an
    // OK not back within 10 s).
    expect(times.length).toBeGreaterThan(10);
    expect(p50).toBeLessThan(100);
    expect(p99).toBeLessThan(2500);
    // The attackers were told `rate-limited:` by their bucket, only the bucket's worth of their
    // AUTHs reached a signature check (its burst and what refilled, per address), and the
    // connections that kept at it were closed.
    const { auths_per_minute, auths_burst } = defaults().rate_limits;
    expect(counts.bucket).toBeGreaterThan(0);
    expect(counts.badSig).toBeLessThanOrEqual(ATTACKERS * (auths_burst + Math.ceil((auths_per_minute * (counts.seconds! + 5)) / 60)));
    expect(counts.closes).toBeGreaterThan(0);
    expect(relay.proc.exitCode).toBeNull();
  } finally {
    flooder.kill("SIGKILL");
    honest.close();
  }
}, 45_000);
