// A process's resident memory as Linux's /proc/<pid>/status counts it, in KiB: the whole (VmRSS)
// and its peak (VmHWM), and the two parts the whole is made of: anonymous memory (RssAnon: heaps,
// stacks, caches; what the process alone holds) and pages of mapped files or shared memory
// (RssFile + RssShmem: the executable, the database file's map; cache the kernel can drop). The
// relay's /metrics and the bench read the same file the same way.
import { readFileSync } from "node:fs";

export interface ResidentKib {
  rss: number;
  peak: number;
  anon: number;
  file: number;
}

/** The figures of one status text; NaN where the kernel gives no such line. */
export function residentKib(status: string): ResidentKib {
  const kib = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? Number.NaN);
  return { rss: kib("VmRSS"), peak: kib("VmHWM"), anon: kib("RssAnon"), file: kib("RssFile") + (kib("RssShmem") || 0) };
}

/** The figures of a process (default: this one); throws when its status cannot be read. */
export function readResidentKib(pid: number | "self" = "self"): ResidentKib {
  return residentKib(readFileSync(`/proc/${pid}/status`, "utf8"));
}
