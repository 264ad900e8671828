// Connections at scale against the relay as its own process (so its memory and descriptors are
// its own): 2,000 websockets with one subscription each, one event matching all of them reaches
// each exactly once; closing them all gives the descriptors back and the memory comes back close
// to where the first cycle left it (no leak over 3 cycles). The long version (10,000 connections,
// 5 cycles) is bench/connections.ts.
//
// File descriptors: each connection costs one in the relay and one in this process. Bun raises its
// soft RLIMIT_NOFILE to the hard limit at start-up (so does bunstr), so the hard limit is what
// counts; when it is too low for 2,000 (+ headroom), the test runs as many as fit and says so.
// The relay is started with its soft limit lowered to 1,024 (the usual default) to check that it
// raises it.
import { expect, test } from "bun:test";
import { connectionsThatFit, runConnections } from "../bench/scenarios/connections.ts";

test("2,000 websockets with a subscription each: one event reaches each exactly once; 3 open/close cycles leak neither descriptors nor memory", async () => {
  const fit = connectionsThatFit(2000);
  console.log(
    `[connections] ulimit -n here: soft ${fit.clientSoft}, hard ${fit.clientHard}; running ${fit.count} connections${fit.count < 2000 ? " (all that fit)" : ""}`,
  );
  expect(fit.count).toBeGreaterThan(0);
  const r = await runConnections({
    connections: fit.count,
    cycles: 3,
    relaySoftLimit: 1024,
    log: (m) => console.log(`[connections] ${m}`),
  });
  console.log(
    `[connections] relay ulimit -n after start: soft ${r.limits.relaySoft}, hard ${r.limits.relayHard}${r.relayRaised ? ` (${r.relayRaised})` : ""}`,
  );

  // Started with a soft limit of 1,024, the relay holds more than that: it raised the limit.
  expect(r.limits.relaySoft).toBeGreaterThanOrEqual(Math.min(r.limits.relayHard, fit.count + 100));
  expect(r.cycles.length).toBe(3);
  for (const c of r.cycles) {
    expect(c.openErrors).toBe(0);
    expect(c.fdsOpen).toBeGreaterThanOrEqual(r.idle.fds + fit.count);
    expect(c.received).toBe(fit.count);
    expect(c.missing).toBe(0);
    expect(c.duplicated).toBe(0);
    // Every socket closed on the relay's side too.
    expect(c.closeMs).not.toBeNull();
    expect(c.fdsAfterClose).toBeLessThanOrEqual(r.idle.fds + 3);
  }
  // No leak: after cycles 2 and 3 the relay's RSS is within 30 MiB of where cycle 1 left it.
  const first = r.cycles[0]!.rssAfterCloseMiB;
  for (const c of r.cycles.slice(1)) expect(c.rssAfterCloseMiB).toBeLessThan(first + 30);
  expect(r.relayExitCode).toBe(0);
}, 60_000);
