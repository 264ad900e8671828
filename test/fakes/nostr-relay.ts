// A relay that says what it likes, for the web of trust's refresh (test/wot.test.ts): a real
// websocket server on 127.0.0.1:0 that answers every REQ with every event it holds, asked for or
// not, then EOSE, and records the filters it was sent. A relay the operator names in
// [web_of_trust] relays is another party: what it sends beyond the question must be dropped.
import type { Server } from "bun";
import type { NostrEvent } from "../../src/protocol/event.ts";

export interface FakeRelay {
  /** ws://127.0.0.1:<port> */
  readonly url: string;
  /** What it sends to every REQ. */
  readonly events: NostrEvent[];
  /** The filters of the REQs received, in order. */
  readonly filters: Record<string, unknown>[];
  close(): void;
}

export function startFakeRelay(events: NostrEvent[] = []): FakeRelay {
  const filters: Record<string, unknown>[] = [];
  const server: Server<undefined> = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (req, srv) => (srv.upgrade(req, { data: undefined }) ? undefined : new Response("websocket only", { status: 400 })),
    websocket: {
      message(ws, raw) {
        const m = JSON.parse(String(raw)) as unknown[];
        if (m[0] !== "REQ") return;
        const sub = String(m[1]);
        filters.push(...(m.slice(2) as Record<string, unknown>[]));
        for (const e of events) ws.send(JSON.stringify(["EVENT", sub, e]));
        ws.send(JSON.stringify(["EOSE", sub]));
      },
    },
  });
  return {
    url: `ws://127.0.0.1:${server.port}`,
    events,
    filters,
    close: () => void server.stop(true),
  };
}
