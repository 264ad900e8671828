// CPU time of the relay (all threads, its main thread) and of this process (all threads, the
// receiver threads), from /proc, sampled before and after the measured phase.
import { readFileSync } from "node:fs";
import { clockTicks } from "../../lib/relay.ts";

/** User and system CPU seconds from a /proc/.../stat file (a process or one thread). */
function procTimes(statPath: string): { user: number; sys: number } {
  try {
    const stat = readFileSync(statPath, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { user: Number(f[11]) / clockTicks(), sys: Number(f[12]) / clockTicks() };
  } catch {
    return { user: NaN, sys: NaN };
  }
}

export interface CpuSample {
  relay: { user: number; sys: number };
  relayMain: number;
  gen: { user: number; sys: number };
  receivers: number;
}

export function sampleCpu(relayPid: number, receiverTids: number[]): CpuSample {
  const m = procTimes(`/proc/${relayPid}/task/${relayPid}/stat`);
  let receivers = 0;
  for (const tid of receiverTids) {
    const t = procTimes(`/proc/self/task/${tid}/stat`);
    receivers += t.user + t.sys;
  }
  return { relay: procTimes(`/proc/${relayPid}/stat`), relayMain: m.user + m.sys, gen: procTimes("/proc/self/stat"), receivers };
}
