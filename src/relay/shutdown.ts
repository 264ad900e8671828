// The graceful stop (Relay.close): stop listening, tell every connection, answer every EVENT the
// clients sent, close each connection once it is answered and quiet (connection/drain.ts), commit,
// then close the workers, the plugin and the store.
import { DEADLINE_MS } from "./connection/drain.ts";
import { noticeFrame, type Socket } from "./connection/session.ts";
import type { Live } from "./wiring.ts";

/**
 * The graceful stop after ctx.closing is set: stop listening, answer every EVENT the clients
 * sent, commit, close the sockets, the workers, the plugin and the store.
 */
export async function shutdown(live: Live): Promise<void> {
  const { ctx, sockets, closing, drain } = live;
  const server = live.server!;
  // Stop listening (with reuse_port the kernel now sends every new connection to the other
  // process); open sockets stay until we close them. Resolves once they are all closed.
  const gone = server.stop(false);
  for (const ws of sockets) {
    ws.send(noticeFrame(ctx.metrics, closing.notice));
    drain.begin(ws);
  }
  // New EVENTs are refused now (admit.ts). A connection is closed once it has been answered
  // everything it sent before the NOTICE and has gone quiet (connection/drain.ts): an idle client
  // reconnects (to the new process) after a round trip, and a busy one gets every answer it is
  // owed first, the pipelined EVENTs that were on the wire too.
  const told = new Set<Socket>();
  const deadline = Date.now() + DEADLINE_MS;
  drain.running = true;
  for (;;) {
    let waiting = false;
    const now = performance.now();
    for (const ws of sockets) {
      if (told.has(ws)) continue;
      if (!drain.done(ws, now)) waiting = true;
      else {
        told.add(ws);
        ws.close(closing.code, closing.reason);
      }
    }
    if ((!waiting && ctx.inflight === 0) || Date.now() >= deadline) break;
    await Bun.sleep(5);
  }
  drain.running = false;
  // Bounded: a writer thread that hangs must not keep the process from exiting.
  await Promise.race([ctx.writer.drain(), Bun.sleep(30_000)]);
  // Paid admission: the poller stopped, the balances written (the events above are settled).
  await ctx.access?.engines.payments?.stop();
  for (const ws of sockets) if (!told.has(ws)) ws.close(closing.code, closing.reason);
  // Let the close handshakes finish before cutting what is left.
  await Promise.race([gone, Bun.sleep(1000)]);
  server.stop(true);
  live.guard?.stop();
  ctx.verifier.close();
  await ctx.plugin.close();
  await ctx.store.close();
}
