// A relay that does nothing but fan out: no verification, no storage, REQ -> EOSE + one Bun
// topic per (id, filters), EVENT -> OK + server.publish to every topic whose filters match (a
// linear scan with the reference matcher). What the fanout client can take when the relay costs
// almost nothing (bench/fanout.ts --mock, --calibrate). Runs as a child process:
//   bun bench/scenarios/fanout/mock-relay.ts   (prints "listening on ws://127.0.0.1:<port>/")
import type { NostrEvent } from "../../../src/protocol/event.ts";
import { naiveMatch, naiveOf, type RawFilter } from "../../lib/match.ts";
import { wireJson } from "./workload.ts";

function serveMock(): void {
  const groups = new Map<string, { prefix: string; naive: ReturnType<typeof naiveOf>[] }>();
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req, srv) {
      return srv.upgrade(req, { data: undefined }) ? undefined : new Response("websocket only", { status: 400 });
    },
    websocket: {
      perMessageDeflate: false,
      maxPayloadLength: 16 * 1024 * 1024,
      message(ws, message) {
        const m = JSON.parse(String(message)) as [string, ...unknown[]];
        if (m[0] === "REQ") {
          const subId = m[1] as string;
          const filters = m.slice(2) as RawFilter[];
          const topic = JSON.stringify([subId, filters]);
          if (!groups.has(topic)) groups.set(topic, { prefix: `["EVENT",${JSON.stringify(subId)},`, naive: filters.map(naiveOf) });
          ws.subscribe(topic);
          ws.send(`["EOSE",${JSON.stringify(subId)}]`);
        } else if (m[0] === "EVENT") {
          const e = m[1] as NostrEvent;
          const json = wireJson(e);
          for (const [topic, g] of groups) if (g.naive.some((n) => naiveMatch(n, e))) server.publish(topic, `${g.prefix}${json}]`);
          ws.send(`["OK",${JSON.stringify(e.id)},true,""]`);
        }
      },
    },
  });
  console.log(`listening on ws://127.0.0.1:${server.port}/`);
  process.on("SIGTERM", () => {
    server.stop(true);
    process.exit(0);
  });
}

if (import.meta.main) serveMock();
