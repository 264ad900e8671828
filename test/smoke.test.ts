import { afterAll, beforeAll, expect, test } from "bun:test";
import { Client, signer, startTestRelay, type TestRelay } from "./helpers.ts";

let relay: TestRelay;
beforeAll(async () => (relay = await startTestRelay()));
afterAll(() => relay.stop());

test("publish and read back", async () => {
  const c = await Client.connect(relay.url);
  const s = signer();
  const e = s.sign({ kind: 1, content: "hi" });
  expect(await c.publish(e)).toEqual(["OK", e.id, true, ""]);
  const { events } = await c.req("a", { ids: [e.id] });
  expect(events).toEqual([e]);
  c.close();
});
