// Progress for the operator commands: one line on stderr, redrawn at most four times a second,
// only on a terminal and only once the work has taken more than a second. Not on a terminal
// (cron, pipes, tests) nothing is drawn; the commands print one summary at the end instead.

const FIRST_DRAW_MS = 1000;
const REDRAW_MS = 250;

export const int = (n: number): string => Math.round(n).toLocaleString("en-US");

export function bytes(n: number): string {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) (n /= 1000), i++;
  return i === 0 ? `${n} B` : `${n.toFixed(n < 10 ? 2 : n < 100 ? 1 : 0)} ${units[i]}`;
}

export function duration(seconds: number): string {
  if (seconds < 10) return `${seconds.toFixed(2)} s`;
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const pad = (x: number) => String(x).padStart(2, "0");
  return h > 0 ? `${h}:${pad(m)}:${pad(s % 60)}` : `${m}:${pad(s % 60)}`;
}

/** "42%, ETA 1:10" from work done out of a known total, at the rate so far. */
export function eta(done: number, total: number, elapsedSeconds: number): string {
  if (total <= 0 || done <= 0) return "";
  const f = Math.min(1, done / total);
  const left = (elapsedSeconds * (1 - f)) / f;
  return `${Math.floor(f * 100)}%, ETA ${duration(left)}`;
}

/** For work done in slices on the main thread: call update() often, it draws when due. */
export class Progress {
  readonly tty = process.stderr.isTTY === true;
  private readonly started = performance.now();
  private lastDraw = 0;
  private drawn = false;

  constructor(private readonly label: string) {}

  get seconds(): number {
    return (performance.now() - this.started) / 1000;
  }

  /** Draws `render()` if this is a terminal, a second has passed and the last draw is 250 ms old. */
  update(render: () => string): void {
    if (!this.tty) return;
    const now = performance.now();
    if (now - this.started < FIRST_DRAW_MS || now - this.lastDraw < REDRAW_MS) return;
    this.lastDraw = now;
    this.drawn = true;
    process.stderr.write(`\r\x1b[K${this.label}: ${render()}`);
  }

  /** Clears the line, so the summary that follows starts clean. */
  end(): void {
    if (this.drawn) process.stderr.write("\r\x1b[K");
    this.drawn = false;
  }
}

/**
 * Progress while the main thread is blocked in one long SQLite statement (VACUUM, VACUUM INTO):
 * a small worker watches a file grow towards an expected size and draws the line itself.
 * The worker is inline code (no imports of ours), so the single executable needs no extra entrypoint.
 * Returns stop(), which clears the line. On a non-terminal it does nothing.
 */
export async function watchFileGrowth(label: string, file: string, expectedBytes: number): Promise<() => void> {
  if (process.stderr.isTTY !== true) return () => {};
  const code = `
    import { statSync } from "node:fs";
    const { label, file, expected, first, every } = ${JSON.stringify({ label, file, expected: expectedBytes, first: FIRST_DRAW_MS, every: REDRAW_MS })};
    const started = Date.now();
    const fmt = (n) => n >= 1e9 ? (n / 1e9).toFixed(2) + " GB" : n >= 1e6 ? (n / 1e6).toFixed(1) + " MB" : (n / 1e3).toFixed(0) + " KB";
    setTimeout(() => setInterval(() => {
      let size = 0;
      try { size = statSync(file).size; } catch {}
      const secs = (Date.now() - started) / 1000;
      const f = expected > 0 ? Math.min(0.99, size / expected) : 0;
      const left = f > 0 ? Math.round(secs * (1 - f) / f) : undefined;
      const etaText = left === undefined ? "" : ", ETA " + Math.floor(left / 60) + ":" + String(left % 60).padStart(2, "0");
      process.stderr.write("\\r\\x1b[K" + label + ": " + fmt(size) + " of ~" + fmt(expected) + " (" + Math.floor(f * 100) + "%" + etaText + "), " + secs.toFixed(0) + " s");
    }, every), first);
    postMessage("ready");
  `;
  const url = URL.createObjectURL(new Blob([code], { type: "application/javascript" }));
  const worker = new Worker(url);
  // Wait until it runs: messages to a worker are not delivered while the main thread is blocked.
  await new Promise<void>((resolve) => (worker.onmessage = () => resolve()));
  return () => {
    worker.terminate();
    URL.revokeObjectURL(url);
    process.stderr.write("\r\x1b[K");
  };
}
