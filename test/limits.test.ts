// Per-connection bounds on what a client can make the relay hold: live-index values across
// subscriptions, authenticated pubkeys, and negentropy items across sessions.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { nip77 } from "nostr-tools";
import { Client, signer, startTestRelay, type TestRelay } from "./helpers.ts";

const { Negentropy, NegentropyStorageVector } = nip77;
let relay: TestRelay;
beforeAll(async () => {
  relay = await startTestRelay({ limits: { max_values_per_connection: 100, max_auth_pubkeys: 2, max_negentropy_items: 10 } });
  const c = await Client.connect(relay.url);
  const s = signer();
  for (let i = 0; i < 6; i++) await c.publish(s.sign({ kind: 1, content: `n${i}` }));
  c.close();
});
afterAll(() => relay.stop());

const hex = (i: number) => i.toString(16).padStart(64, "0");

test("filter values across a connection's subscriptions are capped; closing one frees room", async () => {
  const c = await Client.connect(relay.url);
  expect((await c.req("a", { authors: Array.from({ length: 60 }, (_, i) => hex(i)), limit: 0 })).end[0]).toBe("EOSE");
  const over = await c.req("b", { authors: Array.from({ length: 60 }, (_, i) => hex(100 + i)), limit: 0 });
  expect(over.end[0]).toBe("CLOSED");
  expect(over.end[2]).toStartWith("rate-limited:");
  // Replacing "a" with the same size is allowed (its own values are not counted twice).
  expect((await c.req("a", { authors: Array.from({ length: 60 }, (_, i) => hex(200 + i)), limit: 0 })).end[0]).toBe("EOSE");
  c.send(["CLOSE", "a"]);
  expect((await c.req("b", { authors: Array.from({ length: 60 }, (_, i) => hex(100 + i)), limit: 0 })).end[0]).toBe("EOSE");
  c.close();
});

test("a connection authenticates at most max_auth_pubkeys pubkeys", async () => {
  const c = await Client.connect(relay.url);
  const [a, b, third] = [signer(), signer(), signer()];
  expect((await c.auth(a, relay.url))[2]).toBe(true);
  expect((await c.auth(b, relay.url))[2]).toBe(true);
  const refused = await c.auth(third, relay.url);
  expect(refused[2]).toBe(false);
  expect(refused[3]).toStartWith("rate-limited:");
  expect((await c.auth(a, relay.url))[2]).toBe(true); // re-authenticating a known one is fine
  c.close();
});

test("negentropy items are budgeted per connection, not per session", async () => {
  const c = await Client.connect(relay.url);
  const open = async (id: string, filter: object) => {
    const from = c.frames.length;
    const storage = new NegentropyStorageVector();
    storage.seal();
    const msg = await new Negentropy(storage).initiate();
    c.send(["NEG-OPEN", id, filter, msg]);
    return c.next((f) => f[1] === id && (f[0] === "NEG-MSG" || f[0] === "NEG-ERR"), 5000, from);
  };
  expect((await open("n1", { kinds: [1] }))[0]).toBe("NEG-MSG"); // 6 of 10
  const second = await open("n2", { kinds: [1] }); // 6 more would pass 10
  expect(second[0]).toBe("NEG-ERR");
  expect(second[2]).toStartWith("blocked:");
  c.send(["NEG-CLOSE", "n1"]);
  expect((await open("n3", { kinds: [1] }))[0]).toBe("NEG-MSG");
  c.close();
});
