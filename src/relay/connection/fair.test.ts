import { expect, test } from "bun:test";
import { FairTurns, SLICE_MS } from "./fair.ts";

interface Conn {
  id: string;
  closed: boolean;
}

const busy = (ms: number) => {
  const end = performance.now() + ms;
  while (performance.now() < end);
};

function setup(limits = { perConnection: 0, perGroup: 0, total: 0 }) {
  const ran: string[] = [];
  const events: string[] = [];
  const fair = new FairTurns<Conn>(
    {
      run(conn, m) {
        ran.push(`${conn.id}:${m}`);
        busy(1);
      },
      closed: (conn) => conn.closed,
      refuse: (conn, m, over) => events.push(`${over} ${conn.id}:${m}`),
    },
    () => limits,
  );
  return { fair, ran, events };
}

const settled = async (fair: FairTurns<Conn>) => {
  for (let i = 0; i < 1000 && fair.stats.connections > 0; i++) await new Promise((r) => setImmediate(r));
  expect(fair.stats.connections).toBe(0);
};

test("past its slice an address's messages wait, in order per connection; another address's run at once", async () => {
  const { fair, ran } = setup();
  const a1 = { id: "a1", closed: false };
  const a2 = { id: "a2", closed: false };
  const b = { id: "b", closed: false };
  for (let i = 0; i < 20; i++) {
    fair.message(a1, "A", `${i}`);
    fair.message(a2, "A", `${i}`);
  }
  fair.message(b, "B", "x");
  // A's slice ran out after about SLICE_MS of 1 ms messages; B's message ran inline.
  expect(ran.length).toBeLessThanOrEqual(SLICE_MS + 3);
  expect(ran.at(-1)).toBe("b:x");
  expect(fair.stats.deferred).toBeGreaterThan(30);
  await settled(fair);
  for (const c of ["a1", "a2"]) expect(ran.filter((r) => r.startsWith(`${c}:`))).toEqual(Array.from({ length: 20 }, (_, i) => `${c}:${i}`));
  expect(fair.stats.bytes).toBe(0);
});

test("waiting bytes past a connection's or an address's bound are refused; a closed connection's queue dropped", async () => {
  const { fair, ran, events } = setup({ perConnection: 10, perGroup: 15, total: 0 });
  const a1 = { id: "a1", closed: false };
  const a2 = { id: "a2", closed: false };
  // A's slice runs out on a1's first two or three messages; two more wait, the rest are refused.
  for (let i = 0; i < 10; i++) fair.message(a1, "A", `${i}234`);
  expect(events.length).toBeGreaterThan(3);
  expect(events.every((e) => e.startsWith("connection a1:"))).toBe(true);
  await settled(fair);
  events.length = 0;
  ran.length = 0;
  fair.message(a1, "A", "0000");
  busy(SLICE_MS + 1); // charged to a1's message when the next comes: A's slice is used up again
  const a3 = { id: "a3", closed: false };
  for (let i = 0; i < 2; i++) fair.message(a2, "A", "1234");
  for (let i = 0; i < 2; i++) fair.message(a3, "A", "1234");
  expect(events).toEqual(["address a3:1234"]);
  a2.closed = true;
  fair.drop(a2);
  await settled(fair);
  expect(ran.filter((r) => r.startsWith("a2:"))).toEqual([]);
  expect(ran.filter((r) => r.startsWith("a3:"))).toEqual(["a3:1234"]);
  expect(fair.stats.bytes).toBe(0);
});
