// Raise the soft open-files limit to the hard limit at start-up: every websocket is a file
// descriptor, and distributions often default the soft limit to 1,024.
import { log } from "../log.ts";
import { dlopen, FFIType, ptr } from "bun:ffi";

const RLIMIT_NOFILE = process.platform === "darwin" ? 8 : 7;
const LIBC = process.platform === "darwin" ? "libc.dylib" : "libc.so.6";
/** macOS refuses soft limits above OPEN_MAX for setrlimit. */
const DARWIN_MAX = 10240n;

/** Raises the soft limit to the hard one; returns the soft limit now in force (undefined if unknown). */
export function raiseOpenFileLimit(): number | undefined {
  try {
    const libc = dlopen(LIBC, {
      getrlimit: { args: [FFIType.i32, FFIType.ptr], returns: FFIType.i32 },
      setrlimit: { args: [FFIType.i32, FFIType.ptr], returns: FFIType.i32 },
    });
    const lim = new BigUint64Array(2); // { rlim_cur, rlim_max }
    if (libc.symbols.getrlimit(RLIMIT_NOFILE, ptr(lim)) !== 0) return undefined;
    const [soft, hard] = [lim[0]!, lim[1]!];
    const target = process.platform === "darwin" && hard > DARWIN_MAX ? DARWIN_MAX : hard;
    let now = soft;
    if (soft < target) {
      lim[0] = target;
      if (libc.symbols.setrlimit(RLIMIT_NOFILE, ptr(lim)) === 0) {
        log.info(`open files limit raised from ${soft} to ${target}`);
        now = target;
      }
    }
    libc.close();
    return Number(now);
  } catch {
    // No libc to call (an unusual platform): keep the limit the system gave us.
    return undefined;
  }
}
