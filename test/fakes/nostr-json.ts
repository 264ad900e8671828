// A NIP-05 domain for tests: real HTTP on 127.0.0.1:0 answering `/.well-known/nostr.json?name=`
// from a names map, with per-name faults (a 50 MB body streamed, a redirect loop, a server that
// never answers, one that trickles, garbage, 500) and every request's time kept, so a test can
// check what the relay fetched and how often. Reach it as `name@127.0.0.1:<port>` (or
// `name@localhost:<port>`, a second "domain" on the same server) with `http_loopback = true`.

export type NostrJsonMode =
  /** `{"names":{name:pubkey}}` from `names` (or `{"names":{}}` when the name is not there). */
  | "ok"
  /** A 200 whose body is 50 MB of JSON-looking bytes, streamed (a reader must cut it). */
  | "huge"
  /** 302 to the same URL, for ever (a reader must not follow it). */
  | "redirect-loop"
  /** Never answers: no status, no headers. */
  | "hang"
  /** Headers at once, then one byte of a valid answer every 200 ms. */
  | "trickle"
  /** A 200 that is not JSON. */
  | "garbage"
  /** 500. */
  | "500";

export interface NostrJsonRequest {
  name: string;
  /** The Host header: `127.0.0.1:<port>` or `localhost:<port>`. */
  host: string;
  /** Date.now() when the request arrived. */
  at: number;
}

export interface FakeNostrJson {
  port: number;
  /** `127.0.0.1:<port>`: the domain of an address served here. */
  domain: string;
  /** name -> hex pubkey, changed freely by the test. */
  names: Map<string, string>;
  /** name -> its fault; a name not here is "ok". */
  modes: Map<string, NostrJsonMode>;
  /** Every request, in arrival order. */
  requests: NostrJsonRequest[];
  /** The requests for one name. */
  requestsFor(name: string): NostrJsonRequest[];
  /** How many bytes the "huge" bodies sent before their reader stopped (all of them summed). */
  hugeBytesSent(): number;
  /** How many "huge" bodies were cancelled by their reader going away. */
  hugeCancelled(): number;
  close(): Promise<void>;
}

const HUGE_BYTES = 50 * 1024 * 1024;
const CHUNK = new TextEncoder().encode(`${'"x",'.repeat(16 * 1024)}`);

export function startFakeNostrJson(): FakeNostrJson {
  const names = new Map<string, string>();
  const modes = new Map<string, NostrJsonMode>();
  const requests: NostrJsonRequest[] = [];
  // Answers that never end are kept, so close() can end them.
  const hanging = new Set<() => void>();
  let hugeSent = 0;
  let hugeCancelled = 0;

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    fetch(req) {
      const url = new URL(req.url);
      if (url.pathname !== "/.well-known/nostr.json") return new Response("not found", { status: 404 });
      const name = url.searchParams.get("name") ?? "";
      requests.push({ name, host: req.headers.get("host") ?? "", at: Date.now() });
      const answer = JSON.stringify({ names: names.has(name) ? { [name]: names.get(name) } : {} });
      switch (modes.get(name) ?? "ok") {
        case "ok":
          return Response.json(JSON.parse(answer));
        case "500":
          return new Response("internal error", { status: 500 });
        case "garbage":
          return new Response("<html>this is not json</html>", { headers: { "content-type": "application/json" } });
        case "redirect-loop":
          return new Response(null, { status: 302, headers: { location: url.pathname + url.search } });
        case "hang":
          return new Promise<Response>((resolve) => hanging.add(() => resolve(new Response("closed", { status: 503 }))));
        case "huge": {
          let sent = 0;
          const body = new ReadableStream<Uint8Array>({
            start(c) {
              c.enqueue(new TextEncoder().encode('{"names":{},"pad":['));
            },
            pull(c) {
              if (sent >= HUGE_BYTES) return c.close();
              c.enqueue(CHUNK);
              sent += CHUNK.length;
              hugeSent += CHUNK.length;
            },
            cancel() {
              hugeCancelled++;
            },
          });
          return new Response(body, { headers: { "content-type": "application/json" } });
        }
        case "trickle": {
          const bytes = new TextEncoder().encode(answer);
          let i = 0;
          let timer: ReturnType<typeof setInterval> | undefined;
          const body = new ReadableStream<Uint8Array>({
            start(c) {
              timer = setInterval(() => {
                if (i >= bytes.length) {
                  clearInterval(timer);
                  c.close();
                  return;
                }
                c.enqueue(bytes.subarray(i, ++i));
              }, 200);
            },
            cancel() {
              clearInterval(timer);
            },
          });
          return new Response(body, { headers: { "content-type": "application/json" } });
        }
      }
    },
  });

  const port = server.port as number;
  return {
    port,
    domain: `127.0.0.1:${port}`,
    names,
    modes,
    requests,
    requestsFor: (name) => requests.filter((r) => r.name === name),
    hugeBytesSent: () => hugeSent,
    hugeCancelled: () => hugeCancelled,
    async close() {
      for (const end of hanging) end();
      hanging.clear();
      await server.stop(true);
    },
  };
}
