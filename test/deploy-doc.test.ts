// docs/deploy.md's reverse-proxy steps, run as the doc writes them (issue 34): the ```sh blocks of
// its "### nginx" and "### Caddy" sections are taken from the doc's text, in the doc's order, and
// run by one bash each, so the doc cannot drift from what is tested. What is changed, and only
// that:
// - paths: /etc/… and /var/www/… in the commands point into a temporary directory (ROOT), which
//   holds what Debian's packages put there: /etc/nginx/nginx.conf (an http block that includes
//   conf.d/*.conf and sites-enabled/*, with its pid, logs and temp paths in ROOT), the default
//   site (a port-80 default_server on /var/www/html), /etc/nginx/conf.d/, /etc/caddy/. The commands run in ROOT/work, whose packaging/ holds copies of the shipped files
//   with only their ports (80, 443 -> free ports on 127.0.0.1, no [::] listeners; 7447 -> the test
//   relay's) and those same paths swapped; Caddy's copy also gets `tls internal` and a global block
//   (no admin endpoint, state in ROOT), as in test/packaging-proxy.test.ts.
// - the host name: `DOMAIN=relay.example.com` is set to another name, as the doc asks the reader
//   to, so that the doc's sed commands are seen to put it everywhere (server_name, certificate
//   paths, Caddy's site address).
// - tools that would touch the system: `apt-get` only prints (the packages are installed: CI's
//   .ci/run installs nginx and caddy); `nginx` is the real one with -p/-c/-e pointing into ROOT;
//   `systemctl reload nginx` starts nginx that way (or `nginx -s reload`s it once running);
//   `systemctl reload caddy` starts `caddy run` on ROOT's Caddyfile; `certbot certonly --webroot
//   -w DIR -d NAME` does what the ACME server would first (writes a challenge file under DIR and
//   fetches it through the running port-80 server with Host: NAME), then `openssl req -x509` writes
//   a self-signed certificate where certbot writes its own (/etc/letsencrypt/live/NAME/).
// Each stand-in prints an "@@" line, and the test checks that sequence (so the steps keep the
// order that works on a fresh host), that `nginx -t` passed at each step, and that a websocket
// client publishes through the TLS server at the end. Nothing leaves loopback.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import tls from "node:tls";
import { parse } from "smol-toml";
import { loadConfigFile } from "../src/config/load.ts";
import { needInCI } from "./ci.ts";
import { signer, startTestRelay, type TestRelay } from "./helpers.ts";
import { freePort, swap } from "./process-helpers.ts";

const root = resolve(import.meta.dir, "..");
const doc = readFileSync(join(root, "docs/deploy.md"), "utf8");
const find = (name: string) => [Bun.which(name), `/usr/sbin/${name}`, `/usr/bin/${name}`].find((p): p is string => !!p && existsSync(p));
const nginx = find("nginx");
const caddy = find("caddy");
const openssl = find("openssl");
const haveNginx = needInCI(
  "deploy-doc: nginx and openssl",
  !nginx ? "nginx is not installed (apt-get install nginx)" : !openssl ? "openssl is not installed" : undefined,
);
const haveCaddy = needInCI("deploy-doc: Caddy", !caddy ? "caddy is not installed (apt-get install caddy)" : undefined);

/** The text of docs/deploy.md from `heading` to the next heading of its level or above. */
function section(heading: string): string {
  const level = /^#+/.exec(heading)![0].length;
  const start = doc.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`docs/deploy.md has no "${heading}": update this test`);
  const rest = doc.slice(start + heading.length + 2);
  const end = rest.search(new RegExp(`^#{1,${level}} `, "m"));
  return end < 0 ? rest : rest.slice(0, end);
}

/** The ```lang blocks of `text`, in order. */
function blocks(text: string, lang: string): string[] {
  return [...text.matchAll(new RegExp(`^\`\`\`${lang}\\n([\\s\\S]*?)^\`\`\`$`, "gm"))].map((m) => m[1]!);
}

/** The host name the test gives DOMAIN (the doc's example is relay.example.com); nothing resolves it. */
const DOMAIN = "nostr.example.org";

/** The doc's absolute system paths moved under `dir`. */
const localize = (text: string, dir: string) => text.replace(/(^|[\s="'])\/(etc|var\/www)\//gm, `$1${dir}/$2/`);

interface Ports {
  http: number;
  https: number;
  relay: number;
}

/** ROOT as a fresh Debian host with the packages installed would have it, plus work/packaging/. */
function makeHost(dir: string, p: Ports): void {
  chmodSync(dir, 0o755); // nginx's workers run as another user and read the webroot
  for (const d of ["etc/nginx/conf.d", "etc/nginx/sites-enabled", "var/www/html", "etc/caddy", "work/packaging", "caddy"])
    mkdirSync(join(dir, d), { recursive: true });
  const temps = ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map((t) => `  ${t}_temp_path ${join(dir, t)};\n`).join("");
  writeFileSync(
    join(dir, "etc/nginx/nginx.conf"),
    `worker_processes 1;\npid ${join(dir, "nginx.pid")};\nerror_log ${join(dir, "nginx-error.log")};\n` +
      `events { worker_connections 256; }\nhttp {\n  access_log ${join(dir, "access.log")};\n${temps}` +
      `  include ${join(dir, "etc/nginx/conf.d")}/*.conf;\n  include ${join(dir, "etc/nginx/sites-enabled")}/*;\n}\n`,
  );
  // Debian's default site, minus its [::]:80 listener.
  writeFileSync(
    join(dir, "etc/nginx/sites-enabled/default"),
    `server {\n  listen 127.0.0.1:${p.http} default_server;\n  root ${join(dir, "var/www/html")};\n  index index.html;\n  server_name _;\n  location / { try_files $uri $uri/ =404; }\n}\n`,
  );
  const shipped = (name: string) => readFileSync(join(root, "packaging", name), "utf8");
  const out = (name: string, text: string) => writeFileSync(join(dir, "work/packaging", name), text);
  out(
    "nginx-http.conf",
    swap("packaging/nginx-http.conf", shipped("nginx-http.conf"), [
      [/^\s*listen \[::\]:80;\n/m, ""],
      ["listen 80;", `listen 127.0.0.1:${p.http};`],
      ["root /var/www/html;", `root ${join(dir, "var/www/html")};`],
    ]),
  );
  out(
    "nginx.conf",
    swap("packaging/nginx.conf", shipped("nginx.conf"), [
      ["server 127.0.0.1:7447;", `server 127.0.0.1:${p.relay};`],
      [/^\s*listen \[::\]:443 ssl;\n/m, ""],
      ["listen 443 ssl;", `listen 127.0.0.1:${p.https} ssl;`],
      [/\/etc\/letsencrypt\//g, `${join(dir, "etc/letsencrypt")}/`],
    ]),
  );
  const global = `{\n\tadmin off\n\tskip_install_trust\n\thttp_port ${p.http}\n\thttps_port ${p.https}\n\tstorage file_system ${join(dir, "caddy")}\n\tauto_https disable_redirects\n}\n`;
  out(
    "Caddyfile",
    global +
      swap("packaging/Caddyfile", shipped("Caddyfile"), [
        [/^relay\.example\.com \{\n/m, `https://relay.example.com:${p.https} {\n\tbind 127.0.0.1\n\ttls internal\n`],
        ["reverse_proxy 127.0.0.1:7447 {", `reverse_proxy 127.0.0.1:${p.relay} {`],
      ]),
  );
}

/** The stand-ins for the tools that touch the system (see the top of this file). */
function prelude(dir: string, p: Ports): string {
  const n = `"${nginx}" -p "${dir}/" -e "${dir}/nginx-error.log" -c "${dir}/etc/nginx/nginx.conf"`;
  const caddyEnv = `HOME="${dir}" XDG_DATA_HOME="${dir}/data" XDG_CONFIG_HOME="${dir}/config"`;
  return `set -euo pipefail
umask 022
apt-get() { echo "@@ apt-get $*"; }
nginx() { local rc=0; ${n} "$@" 2>&1 || rc=$?; echo "@@ nginx $* exit $rc"; return $rc; }
caddy() { local rc=0; env ${caddyEnv} "${caddy}" "$@" 2>&1 | tail -n 3 || rc=$?; echo "@@ caddy $1 exit $rc"; return $rc; }
systemctl() {
  case "$*" in
    "reload nginx")
      if [ -s "${dir}/nginx.pid" ] && kill -0 "$(cat "${dir}/nginx.pid")" 2>/dev/null; then ${n} -s reload; else ${n} </dev/null >>"${dir}/nginx-start.log" 2>&1; fi ;;
    "reload caddy")
      env ${caddyEnv} "${caddy}" run --adapter caddyfile --config "${dir}/etc/caddy/Caddyfile" </dev/null >"${dir}/caddy.log" 2>&1 &
      echo $! >"${dir}/caddy.pid" ;;
    *) echo "@@ systemctl $*: not stood in for by this test"; return 1 ;;
  esac
  echo "@@ systemctl $*"
}
certbot() {
  local webroot="" name="" token="token$RANDOM" got=""
  while [ $# -gt 0 ]; do case "$1" in -w) webroot=$2; shift ;; -d) name=$2; shift ;; esac; shift; done
  [ -n "$webroot" ] && [ -n "$name" ] || { echo "@@ certbot: no -w or -d"; return 1; }
  mkdir -p "$webroot/.well-known/acme-challenge"
  echo "$token.proof" >"$webroot/.well-known/acme-challenge/$token"
  exec 3<>/dev/tcp/127.0.0.1/${p.http}
  printf 'GET /.well-known/acme-challenge/%s HTTP/1.0\\r\\nHost: %s\\r\\n\\r\\n' "$token" "$name" >&3
  got=$(cat <&3 | tail -n 1)
  exec 3<&-
  [ "$got" = "$token.proof" ] || { echo "@@ certbot: the challenge was not served on port 80 (got: $got)"; return 1; }
  echo "@@ certbot: challenge served for $name"
  mkdir -p "${dir}/etc/letsencrypt/live/$name"
  "${openssl}" req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj "/CN=$name" \\
    -keyout "${dir}/etc/letsencrypt/live/$name/privkey.pem" -out "${dir}/etc/letsencrypt/live/$name/fullchain.pem" 2>/dev/null
  echo "@@ certbot: certificate in /etc/letsencrypt/live/$name"
}
cd "${dir}/work"
`;
}

/** Runs the doc's blocks (paths moved into `dir`) after the stand-ins; the "@@" lines and all output. */
async function runSteps(dir: string, p: Ports, steps: string[]): Promise<{ exitCode: number; marks: string[]; out: string }> {
  const doc = swap("docs/deploy.md", steps.join("\n"), [[/^DOMAIN=relay\.example\.com$/m, `DOMAIN=${DOMAIN}`]]);
  const script = prelude(dir, p) + localize(doc, dir);
  writeFileSync(join(dir, "steps.sh"), script);
  const proc = Bun.spawn(["bash", join(dir, "steps.sh")], { stdout: "pipe", stderr: "pipe" });
  const [out, err, exitCode] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  const marks = out
    .split("\n")
    .filter((l) => l.startsWith("@@ "))
    .map((l) => l.slice(3));
  return { exitCode, marks, out: out + err };
}

/** Waits for a TLS handshake on the proxy's port (a reload or Caddy's internal certificate takes a moment), then publishes over wss. */
async function publishThrough(p: Ports, what: string, log: () => string): Promise<void> {
  for (const deadline = Date.now() + 10_000; ; await Bun.sleep(50)) {
    const up = await new Promise<boolean>((r) => {
      const s = tls.connect({ host: "127.0.0.1", port: p.https, servername: DOMAIN, rejectUnauthorized: false });
      s.once("secureConnect", () => (s.destroy(), r(true))).once("error", () => (s.destroy(), r(false)));
    });
    if (up) break;
    if (Date.now() > deadline) throw new Error(`${what}: no TLS on ${p.https}:\n${log()}`);
  }
  let ws: WebSocket | undefined;
  for (const deadline = Date.now() + 10_000; !ws; await Bun.sleep(100)) {
    // nginx -s reload is asynchronous: until the new workers run, the old config answers.
    const attempt = new WebSocket(`wss://127.0.0.1:${p.https}/`, {
      tls: { rejectUnauthorized: false, serverName: DOMAIN },
      headers: { Host: `${DOMAIN}:${p.https}` },
    } as unknown as string[]);
    const opened = await new Promise<boolean>((r) => ((attempt.onopen = () => r(true)), (attempt.onerror = () => r(false))));
    if (opened) ws = attempt;
    else if (Date.now() > deadline) throw new Error(`${what}: the websocket did not open:\n${log()}`);
  }
  try {
    const frames: unknown[][] = [];
    ws.onmessage = (m) => frames.push(JSON.parse(String(m.data)));
    const e = signer().sign({ kind: 1, content: `through ${what}, set up as docs/deploy.md says` });
    ws.send(JSON.stringify(["EVENT", e]));
    for (const deadline = Date.now() + 5000; !frames.some((f) => f[0] === "OK") && Date.now() < deadline; ) await Bun.sleep(10);
    expect(frames.find((f) => f[0] === "OK")).toEqual(["OK", e.id, true, ""]);
  } finally {
    ws.close();
  }
}

/** Signals the process whose pid `file` holds (one this test started), and waits for it to go. */
async function stopPid(file: string, signal: NodeJS.Signals): Promise<void> {
  if (!existsSync(file)) return;
  const pid = Number(readFileSync(file, "utf8").trim());
  if (!pid) return;
  try {
    process.kill(pid, signal);
  } catch {
    return; // already gone
  }
  for (const deadline = Date.now() + 5000; Date.now() < deadline; await Bun.sleep(50)) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
  }
  process.kill(pid, "SIGKILL");
}

let relay: TestRelay;

beforeAll(async () => {
  // bunstr's side as the doc gives it: the [network] block of "## Reverse proxy" is the shipped
  // packaging/config.toml's, and the test relay runs with those proxy settings.
  const docNetwork = (parse(blocks(section("## Reverse proxy"), "toml")[0]!) as { network: Record<string, unknown> }).network;
  const shipped = (await loadConfigFile(join(root, "packaging/config.toml"))).config.network;
  expect(docNetwork).toEqual({
    host: shipped.host,
    port: shipped.port,
    remote_ip_header: shipped.remote_ip_header,
    trusted_proxies: shipped.trusted_proxies,
  });
  relay = await startTestRelay({ network: { remote_ip_header: shipped.remote_ip_header, trusted_proxies: shipped.trusted_proxies } });
});

afterAll(async () => {
  await relay?.stop();
});

describe.skipIf(!haveNginx)("docs/deploy.md, nginx: the steps as written, in their order", () => {
  let dir: string;
  let ports: Ports;
  const log = () =>
    ["nginx-error.log", "nginx-start.log"].map((f) => (existsSync(join(dir, f)) ? readFileSync(join(dir, f), "utf8") : "")).join("");

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "bunstr-deploy-doc-"));
    ports = { http: freePort(), https: freePort(), relay: relay.server.port! };
    makeHost(dir, ports);
  });

  afterAll(async () => {
    if (dir) await stopPid(join(dir, "nginx.pid"), "SIGQUIT");
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("the TLS server alone fails nginx -t before the certificate exists (why the order matters)", () => {
    const probe = mkdtempSync(join(tmpdir(), "bunstr-deploy-doc-probe-"));
    try {
      makeHost(probe, ports);
      writeFileSync(join(probe, "etc/nginx/conf.d/bunstr.conf"), readFileSync(join(probe, "work/packaging/nginx.conf")));
      const t = Bun.spawnSync([nginx!, "-t", "-p", `${probe}/`, "-e", join(probe, "err.log"), "-c", join(probe, "etc/nginx/nginx.conf")], {
        stderr: "pipe",
      });
      expect(t.exitCode).not.toBe(0);
      expect(t.stderr.toString()).toContain(`cannot load certificate "${probe}/etc/letsencrypt/live/relay.example.com/fullchain.pem"`);
    } finally {
      rmSync(probe, { recursive: true, force: true });
    }
  });

  test("port-80 server, certbot, TLS server: nginx -t passes at each step, and a websocket client publishes through it", async () => {
    const steps = blocks(section("### nginx"), "sh");
    expect(steps.length).toBe(3);
    const run = await runSteps(dir, ports, steps);
    if (run.exitCode !== 0) throw new Error(`the doc's nginx steps failed (exit ${run.exitCode}):\n${run.out}\n${log()}`);
    expect(run.marks).toEqual([
      "apt-get install nginx certbot",
      "nginx -t exit 0",
      "systemctl reload nginx",
      `certbot: challenge served for ${DOMAIN}`,
      `certbot: certificate in /etc/letsencrypt/live/${DOMAIN}`,
      "nginx -t exit 0",
      "systemctl reload nginx",
    ]);
    // What the doc's commands installed is the shipped files with the host name put in (and this
    // test's ports and paths).
    for (const [installed, shipped] of [
      ["bunstr-http.conf", "nginx-http.conf"],
      ["bunstr.conf", "nginx.conf"],
    ])
      expect(readFileSync(join(dir, "etc/nginx/conf.d", installed!), "utf8")).toBe(
        readFileSync(join(dir, "work/packaging", shipped!), "utf8").replaceAll("relay.example.com", DOMAIN),
      );
    await publishThrough(ports, "nginx", log);
    // And the port-80 server now sends browsers to HTTPS.
    const plain = await fetch(`http://127.0.0.1:${ports.http}/`, { redirect: "manual", headers: { Host: DOMAIN } });
    expect(plain.status).toBe(301);
    expect(plain.headers.get("location")).toBe(`https://${DOMAIN}/`);
  });
});

describe.skipIf(!haveCaddy)("docs/deploy.md, Caddy: the steps as written", () => {
  let dir: string;
  let ports: Ports;
  const log = () => (existsSync(join(dir, "caddy.log")) ? readFileSync(join(dir, "caddy.log"), "utf8") : "");

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "bunstr-deploy-doc-"));
    ports = { http: freePort(), https: freePort(), relay: relay.server.port! };
    makeHost(dir, ports);
  });

  afterAll(async () => {
    if (dir) await stopPid(join(dir, "caddy.pid"), "SIGTERM");
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("the Caddyfile installed, validated and loaded; a websocket client publishes through it", async () => {
    const steps = blocks(section("### Caddy"), "sh");
    expect(steps.length).toBe(1);
    const run = await runSteps(dir, ports, steps);
    if (run.exitCode !== 0) throw new Error(`the doc's Caddy steps failed (exit ${run.exitCode}):\n${run.out}\n${log()}`);
    expect(run.marks).toEqual(["apt-get install caddy", "caddy validate exit 0", "systemctl reload caddy"]);
    expect(readFileSync(join(dir, "etc/caddy/Caddyfile"), "utf8")).toBe(
      readFileSync(join(dir, "work/packaging/Caddyfile"), "utf8").replaceAll("relay.example.com", DOMAIN),
    );
    await publishThrough(ports, "Caddy", log);
  });
});

describe("docs/deploy.md, Install from a release binary: the config its steps write", () => {
  // The root block as written, with the system-changing tools stood in for (useradd, install of
  // the binary) and `bunstr` run from this checkout; /etc/ moved into a temporary directory. The
  // maintenance commands (`runuser -u bunstr -- bunstr stats --config /etc/bunstr/config.toml`)
  // run in the caller's working directory, not the unit's, so the database must be named by an
  // absolute path: the unit's state directory, which operations.md's `--data-dir` names too.
  test("data_directory is the unit's StateDirectory, absolute, as packaging/config.toml and operations.md have it", async () => {
    const steps = blocks(section("## Install from a release binary"), "sh");
    const install = steps.find((b) => b.includes("bunstr config init >"));
    if (!install) throw new Error("docs/deploy.md's install steps have no `bunstr config init >` block: update this test");
    const dir = mkdtempSync(join(tmpdir(), "bunstr-deploy-install-"));
    try {
      mkdirSync(join(dir, "work"));
      const script = `set -euo pipefail
useradd() { echo "@@ useradd $*"; }
install() { if [ "$1" = -d ]; then mkdir -p "\${@: -1}"; else echo "@@ install $*"; fi; }
bunstr() { "${process.execPath}" "${join(root, "src/main.ts")}" "$@"; }
cd "${dir}/work"
${localize(install, dir)}`;
      const r = Bun.spawnSync(["bash", "-c", script], { stdout: "pipe", stderr: "pipe" });
      if (r.exitCode !== 0) throw new Error(`the install steps failed (exit ${r.exitCode}):\n${r.stdout}\n${r.stderr}`);
      expect(r.stdout.toString()).toContain(`${dir}/etc/bunstr/config.toml: ok`);
      const unit = readFileSync(join(root, "packaging/bunstr.service"), "utf8");
      const stateDir = `/var/lib/${/^StateDirectory=(\S+)$/m.exec(unit)![1]}`;
      const written = (await loadConfigFile(join(dir, "etc/bunstr/config.toml"))).config.database.data_directory;
      expect(written).toBe(stateDir);
      expect((await loadConfigFile(join(root, "packaging/config.toml"))).config.database.data_directory).toBe(stateDir);
      const ops = readFileSync(join(root, "docs/operations.md"), "utf8");
      const dataDirs = new Set([...ops.matchAll(/--data-dir (\/\S+)/g)].map((m) => m[1])); // its absolute ones: the server's
      expect([...dataDirs]).toEqual([stateDir]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
