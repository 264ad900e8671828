// A closing relay answers every EVENT a connection sent before it closes it (relay/connection/drain.ts):
// those it had not read yet when it began to close too. The hand-over between real processes is
// test/zero-downtime.test.ts; here the timing is exact, in one process.
import { expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { fakePubkey, unsignedEvent } from "../bench/lib/events.ts";
import { Client, startTestRelay } from "./helpers.ts";

test("EVENTs sent but not yet read when the drain begins are answered before the 1012 close", async () => {
  const relay = await startTestRelay();
  const c = await Client.connect(relay.url);
  const idle = await Client.connect(relay.url);
  await c.next((f) => f[0] === "AUTH");
  const author = fakePubkey();
  const events = Array.from({ length: 50 }, (_, i) => unsignedEvent(author, { content: `on the wire ${i}` }));
  // Written to the socket in this tick; the relay reads them only once this test yields.
  for (const e of events) c.send(["EVENT", e]);
  const t0 = performance.now();
  await relay.close("restart");
  const closedIn = performance.now() - t0;
  for (let i = 0; i < 100 && !(c.closed && idle.closed); i++) await Bun.sleep(10);
  rmSync(relay.dir, { recursive: true, force: true });

  expect(c.frames.find((f) => f[0] === "NOTICE")).toEqual(["NOTICE", "closing: relay is restarting, reconnect"]);
  const oks = new Map(c.frames.filter((f) => f[0] === "OK").map((f) => [f[1], f.slice(2)]));
  expect(events.filter((e) => !oks.has(e.id)).length).toBe(0);
  for (const e of events) expect(oks.get(e.id)).toEqual([false, "error: relay is shutting down"]);
  expect([c.closeCode, idle.closeCode]).toEqual([1012, 1012]);
  // Neither held until the 5 s deadline: a round trip and 250 ms of quiet.
  expect(closedIn).toBeLessThan(2000);
});
