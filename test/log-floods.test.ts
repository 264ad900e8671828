// Issue 36: what an outsider or an operator's slip could do to the log and the process.
// - Refused NIP-86 calls: anyone can sign a valid NIP-98 token with a pubkey that is not an
//   admin, and each refusal was a warning line (8 MB of log in 15 s). Now one line a minute,
//   with the count of those held back (src/log.ts LogLimiter, as the writer's failure log).
// - A second SIGUSR2 during a hand-over exited 1 at once, cutting the drain short, and systemd's
//   Restart=on-failure then started the old process again. Now it is ignored with a note.
import { afterAll, expect, spyOn, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { now, signer, startTestRelay } from "./helpers.ts";
import { freePort } from "./process-helpers.ts";
import { spawnBunstr } from "./relay-process.ts";

const dir = mkdtempSync(join(tmpdir(), "bunstr-log-floods-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("a flood of refused NIP-86 calls (valid tokens, not an admin) writes one warning line, not one per call", async () => {
  const warned: string[] = [];
  const warn = spyOn(console, "warn").mockImplementation((...args: unknown[]) => void warned.push(args.map(String).join(" ")));
  const admin = signer();
  const outsider = signer();
  const relay = await startTestRelay({ admin: { pubkeys: [admin.pubkey] } });
  try {
    const url = relay.url.replace(/^ws/, "http");
    const body = JSON.stringify({ method: "supportedmethods", params: [] });
    const payload = new Bun.CryptoHasher("sha256").update(body).digest("hex");
    const call = async (): Promise<number> => {
      const tags = [
        ["u", url],
        ["method", "POST"],
        ["payload", payload],
        ["nonce", crypto.randomUUID()],
      ];
      const token = outsider.sign({ kind: 27235, tags, created_at: now() });
      const res = await fetch(url, {
        method: "POST",
        headers: { "Content-Type": "application/nostr+json+rpc", Authorization: `Nostr ${btoa(JSON.stringify(token))}` },
        body,
      });
      await res.arrayBuffer();
      return res.status;
    };
    const CALLS = 200;
    const statuses: number[] = [];
    for (let i = 0; i < CALLS; i += 20) statuses.push(...(await Promise.all(Array.from({ length: 20 }, call))));
    expect(statuses).toEqual(Array(CALLS).fill(401));
    const refused = warned.filter((l) => l.includes("admin: refused"));
    // Before: 200 lines. Now the first, then at most one a minute (the test takes a second or two).
    expect(refused.length).toBeGreaterThanOrEqual(1);
    expect(refused.length).toBeLessThanOrEqual(2);
    expect(refused[0]).toContain(`admin: refused ${outsider.pubkey}: not in [admin] pubkeys`);
    expect(refused[0]).toContain("logged at most every 60 s");
  } finally {
    warn.mockRestore();
    await relay.stop();
  }
}, 30_000);

test("a second SIGUSR2 during a hand-over is ignored with a note: the drain goes on and the process exits 0", async () => {
  const port = freePort();
  const relay = await spawnBunstr(["--host", "127.0.0.1", "--port", String(port), "--data-dir", join(dir, "data")], dir);
  // A client that keeps sending keeps the drain waiting for it to go quiet (relay/connection/drain.ts), so
  // the hand-over is surely under way when the second signal comes.
  const ws = new WebSocket(`ws://127.0.0.1:${port}/`);
  await new Promise((resolve, reject) => ((ws.onopen = resolve), (ws.onerror = reject)));
  const chatter = setInterval(() => ws.readyState === WebSocket.OPEN && ws.send('["CLOSE","x"]'), 20);
  try {
    relay.proc.kill("SIGUSR2");
    const from = relay.output().length;
    await relay.waitFor("SIGUSR2: draining for a restart", 10_000);
    relay.proc.kill("SIGUSR2");
    // Before: "SIGUSR2 again: exiting now" and exit 1 (waitFor throws when the process exits).
    await relay.waitFor("SIGUSR2 again: the hand-over is already under way, ignored", 10_000, from);
  } finally {
    clearInterval(chatter);
  }
  // Quiet now (or the drain's own time ran out on a busy machine): the process ends as a
  // hand-over does, never with the second signal's exit 1.
  expect(await relay.proc.exited).toBe(0);
  expect(relay.output()).toContain("bye");
  expect(relay.output()).not.toContain("exiting now");
  ws.close();
}, 30_000);
