// packaging/nginx-http.conf and nginx.conf, packaging/Caddyfile and packaging/config.toml for
// real: the proxy (the shipped files, with their ports and certificate swapped for test ones)
// terminates TLS on loopback in front of a relay started here with the shipped [network] settings. A websocket client
// publishes through it, and the relay's per-IP connection limit shows which address it counted:
// the client's, from X-Forwarded-For, and never one a client wrote into the header itself.
// nginx (with openssl) and Caddy are required in CI (test/ci.ts): a missing one fails there; on a
// developer's machine its suite is left out with a printed reason. Nothing leaves loopback: Caddy gets
// `tls internal` (its own local CA, no ACME) and no admin endpoint.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import tls from "node:tls";
import { loadConfigFile } from "../src/config/load.ts";
import { needInCI } from "./ci.ts";
import { signer, startTestRelay, type TestRelay } from "./helpers.ts";
import { freePort, selfSignedCert, swap } from "./process-helpers.ts";

const root = resolve(import.meta.dir, "..");
const find = (name: string) => [Bun.which(name), `/usr/sbin/${name}`, `/usr/bin/${name}`].find((p): p is string => !!p && existsSync(p));
const nginx = find("nginx");
const caddy = find("caddy");
const openssl = find("openssl");
const nginxMissing = !nginx ? "nginx is not installed (apt-get install nginx)" : !openssl ? "openssl is not installed" : undefined;
const caddyMissing = !caddy ? "caddy is not installed (apt-get install caddy)" : undefined;
const haveNginx = needInCI("packaging-proxy: nginx and openssl", nginxMissing);
const haveCaddy = needInCI("packaging-proxy: Caddy", caddyMissing);

interface Ports {
  https: number;
  http: number;
  relay: number;
}

interface Proxy {
  stop(): Promise<void>;
  log(): string;
}

async function startNginx(dir: string, p: Ports): Promise<Proxy> {
  const { cert, key } = selfSignedCert(openssl!, dir, "relay.example.com");
  const plain = swap("packaging/nginx-http.conf", readFileSync(join(root, "packaging/nginx-http.conf"), "utf8"), [
    [/^\s*listen \[::\]:80;\n/m, ""],
    ["listen 80;", `listen 127.0.0.1:${p.http};`],
  ]);
  const site = swap("packaging/nginx.conf", readFileSync(join(root, "packaging/nginx.conf"), "utf8"), [
    ["server 127.0.0.1:7447;", `server 127.0.0.1:${p.relay};`],
    [/^\s*listen \[::\]:443 ssl;\n/m, ""],
    ["listen 443 ssl;", `listen 127.0.0.1:${p.https} ssl;`],
    ["/etc/letsencrypt/live/relay.example.com/fullchain.pem", cert],
    ["/etc/letsencrypt/live/relay.example.com/privkey.pem", key],
  ]);
  writeFileSync(join(dir, "bunstr-http.conf"), plain);
  writeFileSync(join(dir, "bunstr.conf"), site);
  const temp = (name: string) => `${name}_temp_path ${join(dir, name)};`;
  writeFileSync(
    join(dir, "nginx.conf"),
    `daemon off;\nworker_processes 1;\npid ${join(dir, "nginx.pid")};\nerror_log ${join(dir, "error.log")} info;\n` +
      `events { worker_connections 256; }\n` +
      `http {\n  access_log ${join(dir, "access.log")};\n  ${temp("client_body")}\n  ${temp("proxy")}\n  ${temp("fastcgi")}\n  ${temp("uwsgi")}\n  ${temp("scgi")}\n` +
      `  include ${join(dir, "bunstr-http.conf")};\n  include ${join(dir, "bunstr.conf")};\n}\n`,
  );
  const args = ["-p", dir, "-e", join(dir, "error.log"), "-c", join(dir, "nginx.conf")];
  const check = Bun.spawnSync([nginx!, "-t", ...args], { stderr: "pipe" });
  if (check.exitCode !== 0) throw new Error(`nginx -t failed:\n${check.stderr}`);
  const log = () => (existsSync(join(dir, "error.log")) ? readFileSync(join(dir, "error.log"), "utf8") : "");
  return watch(Bun.spawn([nginx!, ...args], { stdout: "ignore", stderr: "ignore" }), p, log, "SIGQUIT");
}

async function startCaddy(dir: string, p: Ports): Promise<Proxy> {
  const site = swap("packaging/Caddyfile", readFileSync(join(root, "packaging/Caddyfile"), "utf8"), [
    [/^relay\.example\.com \{\n/m, `https://relay.example.com:${p.https} {\n\tbind 127.0.0.1\n\ttls internal\n`],
    ["reverse_proxy 127.0.0.1:7447 {", `reverse_proxy 127.0.0.1:${p.relay} {`],
  ]);
  // No admin endpoint, no ACME, no changes to the system trust store; state in the temp dir.
  const global = `{\n\tadmin off\n\tskip_install_trust\n\thttp_port ${p.http}\n\thttps_port ${p.https}\n\tstorage file_system ${join(dir, "caddy")}\n\tauto_https disable_redirects\n}\n`;
  writeFileSync(join(dir, "Caddyfile"), global + site);
  const env = { ...process.env, HOME: dir, XDG_DATA_HOME: join(dir, "data"), XDG_CONFIG_HOME: join(dir, "config") };
  const check = Bun.spawnSync([caddy!, "validate", "--adapter", "caddyfile", "--config", join(dir, "Caddyfile")], { stderr: "pipe", env });
  if (check.exitCode !== 0) throw new Error(`caddy validate failed:\n${check.stderr}`);
  let out = "";
  const proc = Bun.spawn([caddy!, "run", "--adapter", "caddyfile", "--config", join(dir, "Caddyfile")], {
    stdout: "ignore",
    stderr: "pipe",
    env,
  });
  void (async () => {
    for await (const chunk of proc.stderr) out += new TextDecoder().decode(chunk);
  })();
  return watch(proc, p, () => out, "SIGTERM");
}

/** Waits until the proxy completes a TLS handshake (Caddy issues its certificate after it binds); stop() signals it and waits (then kills). */
async function watch(proc: ReturnType<typeof Bun.spawn>, p: Ports, log: () => string, signal: NodeJS.Signals): Promise<Proxy> {
  const stop = async () => {
    proc.kill(signal);
    if ((await Promise.race([proc.exited, Bun.sleep(5000).then(() => "late")])) === "late") proc.kill("SIGKILL");
  };
  for (const deadline = Date.now() + 10_000; ; await Bun.sleep(50)) {
    const up = await new Promise<boolean>((r) => {
      const s = tls.connect({ host: "127.0.0.1", port: p.https, servername: "relay.example.com", rejectUnauthorized: false });
      s.once("secureConnect", () => (s.destroy(), r(true))).once("error", () => (s.destroy(), r(false)));
    });
    if (up) return { stop, log };
    if (proc.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`proxy did not start:\n${log()}`);
    }
  }
}

interface Upgrade {
  status: number;
  close(): void;
}

/**
 * A raw websocket handshake from `localAddress` (another loopback address: the client IP the
 * relay should see), over TLS to the proxy or plain to the relay; resolves with the HTTP status
 * and keeps the connection open until close().
 */
function upgrade(port: number, o: { localAddress: string; tls: boolean; headers?: Record<string, string> }): Promise<Upgrade> {
  return new Promise((res, rej) => {
    const opts = { host: "127.0.0.1", port, localAddress: o.localAddress };
    const sock: net.Socket = o.tls
      ? tls.connect({ ...opts, servername: "relay.example.com", rejectUnauthorized: false })
      : net.connect(opts);
    const extra = Object.entries(o.headers ?? {})
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join("");
    const host = o.tls ? `relay.example.com:${port}` : `127.0.0.1:${port}`;
    sock.once(o.tls ? "secureConnect" : "connect", () =>
      sock.write(
        `GET / HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          `Sec-WebSocket-Key: ${Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString("base64")}\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`,
      ),
    );
    let head = "";
    const timer = setTimeout(() => (sock.destroy(), rej(new Error(`no answer to the upgrade from ${o.localAddress}`))), 5000);
    sock.on("data", (d) => {
      head += d.toString("latin1");
      const m = /^HTTP\/1\.1 (\d{3})/.exec(head);
      if (m) {
        clearTimeout(timer);
        sock.removeAllListeners("data");
        res({ status: Number(m[1]), close: () => sock.destroy() });
      }
    });
    sock.on("error", (err) => (clearTimeout(timer), rej(err)));
  });
}

/** The same checks against either proxy. */
function proxySuite(name: string, available: boolean, start: (dir: string, p: Ports) => Promise<Proxy>, redirects: boolean): void {
  describe.skipIf(!available)(`${name} in front of bunstr (packaging/config.toml)`, () => {
    let dir: string;
    let relay: TestRelay;
    let proxy: Proxy | undefined;
    let ports: Ports;
    const open: { close(): void }[] = [];

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), "bunstr-proxy-"));
      chmodSync(dir, 0o755); // nginx workers may run as another user
      // The shipped relay config's proxy settings; the test relay listens on a free port.
      const shipped = (await loadConfigFile(join(root, "packaging/config.toml"))).config;
      expect(shipped.network.host).toBe("127.0.0.1");
      expect(shipped.network.port).toBe(7447); // the port the proxy files forward to
      relay = await startTestRelay({
        network: { remote_ip_header: shipped.network.remote_ip_header, trusted_proxies: shipped.network.trusted_proxies },
        limits: { max_connections_per_ip: 1 }, // the observable: a second connection from one IP gets 429
      });
      ports = { https: freePort(), http: freePort(), relay: relay.server.port! };
      proxy = await start(dir, ports);
    });

    afterAll(async () => {
      for (const c of open) c.close();
      await proxy?.stop();
      await relay?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    test("NIP-11 over HTTPS through the proxy", async () => {
      const r = await fetch(`https://127.0.0.1:${ports.https}/`, {
        headers: { Accept: "application/nostr+json", Host: `relay.example.com:${ports.https}` },
        tls: { rejectUnauthorized: false, serverName: "relay.example.com" },
      } as RequestInit);
      expect(r.status).toBe(200);
      expect(r.headers.get("access-control-allow-origin")).toBe("*");
      expect(((await r.json()) as { supported_nips: number[] }).supported_nips).toContain(1);
      if (redirects) {
        const plain = await fetch(`http://127.0.0.1:${ports.http}/`, { redirect: "manual", headers: { Host: "relay.example.com" } });
        expect(plain.status).toBe(301);
        expect(plain.headers.get("location")).toStartWith("https://relay.example.com/");
      }
    });

    test("/metrics is not served to the internet through the proxy (loopback only by default)", async () => {
      const tlsOpts = { tls: { rejectUnauthorized: false, serverName: "relay.example.com" } };
      const r = await fetch(`https://127.0.0.1:${ports.https}/metrics`, {
        headers: { Host: `relay.example.com:${ports.https}` },
        ...tlsOpts,
      } as RequestInit);
      expect(r.status).toBe(403);
      // A scraper on the relay's host, straight to its port, is served.
      expect((await fetch(`http://127.0.0.1:${ports.relay}/metrics`)).status).toBe(200);
    });

    test("a websocket client publishes and reads back through the proxy (wss)", async () => {
      // Bun's WebSocket takes TLS options (the test certificate is not trusted) and headers.
      const ws = new WebSocket(`wss://127.0.0.1:${ports.https}/`, {
        tls: { rejectUnauthorized: false, serverName: "relay.example.com" },
        headers: { Host: `relay.example.com:${ports.https}` },
      } as unknown as string[]);
      const frames: any[] = [];
      ws.onmessage = (m) => frames.push(JSON.parse(String(m.data)));
      await new Promise(
        (res, rej) => ((ws.onopen = res), (ws.onerror = () => rej(new Error(`wss through ${name} failed:\n${proxy?.log()}`)))),
      );
      open.push(ws); // stays open: 127.0.0.1 (this client, via the proxy) now has its one connection
      const next = async (pred: (f: any) => boolean) => {
        for (const deadline = Date.now() + 5000; Date.now() < deadline; await Bun.sleep(10)) {
          const f = frames.find(pred);
          if (f) return f;
        }
        throw new Error(`timed out; frames: ${JSON.stringify(frames)}`);
      };
      const e = signer().sign({ kind: 1, content: `through ${name}` });
      ws.send(JSON.stringify(["EVENT", e]));
      expect(await next((f) => f[0] === "OK")).toEqual(["OK", e.id, true, ""]);
      ws.send(JSON.stringify(["REQ", "p", { ids: [e.id] }]));
      await next((f) => f[0] === "EOSE");
      expect(frames.filter((f) => f[0] === "EVENT").map((f) => f[2].id)).toEqual([e.id]);
    });

    test("the relay counts the client's address from X-Forwarded-For, not the proxy's", async () => {
      // The proxy connects from 127.0.0.1, which the wss client above already uses up: were the
      // header ignored, every connection through the proxy would be 127.0.0.1 and refused.
      const a = await upgrade(ports.https, { localAddress: "127.0.0.3", tls: true });
      open.push(a);
      expect(a.status).toBe(101);
      const again = await upgrade(ports.https, { localAddress: "127.0.0.3", tls: true });
      open.push(again);
      expect(again.status).toBe(429); // same client, one connection per IP
      const other = await upgrade(ports.https, { localAddress: "127.0.0.4", tls: true });
      open.push(other);
      expect(other.status).toBe(101);
    });

    test("a client cannot choose its address by sending X-Forwarded-For", async () => {
      // Through the proxy: the address it saw (127.0.0.5) comes last (or alone), after the header.
      const spoofed = await upgrade(ports.https, { localAddress: "127.0.0.5", tls: true, headers: { "X-Forwarded-For": "127.0.0.4" } });
      open.push(spoofed);
      expect(spoofed.status).toBe(101); // counted as 127.0.0.5, not as 127.0.0.4 (which is at its limit)
      // Straight to the relay from an address that is not a trusted proxy: the header is ignored.
      const direct = await upgrade(ports.relay, { localAddress: "127.0.0.6", tls: false, headers: { "X-Forwarded-For": "127.0.0.3" } });
      open.push(direct);
      expect(direct.status).toBe(101);
    });
  });
}

proxySuite("nginx (packaging/nginx-http.conf, nginx.conf)", haveNginx, startNginx, true);
proxySuite("Caddy (packaging/Caddyfile)", haveCaddy, startCaddy, false);
