// src/config: the rendered default file, loading (ours and nostr-rs-relay's config.toml),
// error messages, CLI > file > default, and the CLI commands as a subprocess.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse } from "smol-toml";
import pkg from "../package.json" with { type: "json" };
import { parseServeFlags } from "../src/cli/args.ts";
import { loadConfig } from "../src/cli/options.ts";
import { ConfigError, loadConfigFile, loadConfigText, override } from "../src/config/load.ts";
import { describeChanges, diffConfig } from "../src/config/reload.ts";
import { renderDefaultConfig } from "../src/config/render.ts";
import { configErrors, configWarnings } from "../src/config/warnings.ts";
import { aliases, defaults, schema, type Config } from "../src/config/schema.ts";
import { spawnBunstr } from "./relay-process.ts";
import { spawnRelay } from "./process-helpers.ts";

/** What `bunstr serve` starts from: its flags, then the config they name (CLI > file > default). */
async function resolveConfig(argv: string[]): Promise<Config> {
  const flags = parseServeFlags(argv);
  return loadConfig(flags.config, flags.overrides, { lenient: flags.lenient });
}

const ROOT = join(import.meta.dir, "..");
let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "bunstr-config-"));
});
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Writes a file in the temp directory and returns its path. */
const file = (name: string, text: string): string => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

/** 1-based line of the first line of `text` that starts with `prefix` (after indentation). */
const lineNo = (text: string, prefix: string): number => {
  const i = text.split("\n").findIndex((l) => l.trimStart().startsWith(prefix));
  if (i < 0) throw new Error(`test bug: "${prefix}" not in text`);
  return i + 1;
};

/** Runs fn, returns the ConfigError it throws (fails if it throws nothing or something else). */
function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return e as ConfigError;
  }
  throw new Error("expected a ConfigError, nothing was thrown");
}

const sectionsOf = schema as unknown as Record<string, Record<string, { default: unknown }>>;
const allKeys = Object.entries(sectionsOf).flatMap(([s, keys]) => Object.keys(keys).map((k) => [s, k] as const));

/** The rendered file with every `#key = value` line uncommented (doc comments stay). */
const uncomment = (text: string): string => text.replace(/^#(?=[A-Za-z_][A-Za-z0-9_]* = )/gm, "");

describe("renderDefaultConfig", () => {
  const text = renderDefaultConfig();

  test("the schema is not trivially small", () => {
    expect(allKeys.length).toBeGreaterThan(30);
  });

  test("as rendered (all commented out) it loads to the defaults", () => {
    const { config, ignored } = loadConfigText(text, "default.toml");
    expect(config).toEqual(defaults());
    expect(ignored).toEqual([]);
  });

  test("uncommented, it parses to exactly defaults() and loads back to defaults()", () => {
    const live = uncomment(text);
    // Every key line got uncommented (one per schema key), and nothing else.
    expect(live.split("\n").filter((l) => /^[A-Za-z_]\w* = /.test(l)).length).toBe(allKeys.length);
    // The TOML itself carries exactly the defaults: no key missing, none extra, right values.
    expect(parse(live) as unknown).toEqual(defaults() as unknown);
    const { config, ignored } = loadConfigText(live, "default.toml");
    expect(config).toEqual(defaults());
    expect(ignored).toEqual([]);
  });

  test("every schema key appears, under its own section, with its doc", () => {
    const lines = text.split("\n");
    for (const [section, key] of allKeys) {
      const header = lines.indexOf(`[${section}]`);
      expect(header).toBeGreaterThanOrEqual(0);
      const next = lines.findIndex((l, i) => i > header && /^\[/.test(l));
      const body = lines.slice(header + 1, next < 0 ? undefined : next);
      const at = body.findIndex((l) => l.startsWith(`#${key} = `));
      if (at < 0) throw new Error(`[${section}] ${key} is missing from the rendered config`);
      const doc = (schema as any)[section][key].doc as string;
      expect(body[at - 1]).toStartWith(`# ${doc}`);
      expect(body[at - 1]!.endsWith(" (reloadable)")).toBe((schema as any)[section][key].reloadable);
    }
  });

  test("defaults() returns fresh copies", () => {
    const a = defaults();
    a.authorization.kind_denylist.push(1);
    expect(defaults().authorization.kind_denylist).toEqual([]);
  });
});

// A nostr-rs-relay config.toml, modelled on its sample config (values changed from their
// defaults where we map them, so that a mapping that does nothing is caught).
const RS_PUBKEY = "0c2d168a4ae8ca58c9f1ab237b5df682599c6c7ab74307ea8b05684b60405d41";
const RS_ALLOWED = [
  "35d26e4690cbe1a898af61cc3515661eb5fa763b57bd0b42e45099c8b32fd50f",
  "887645fef0ce0c3c1218d2f5d8e6132a19304cdc57cd20281d082f38cfea0072",
];
const NOSTR_RS_RELAY = `# Nostr-rs-relay configuration

[info]
# The advertised URL for the Nostr websocket.
relay_url = "wss://nostr.example.com/"

# Relay information for clients.  Put your unique server name here.
name = "nostr-rs-relay"

# Description
description = "A newly created nostr-rs-relay.\\n\\nCustomize this with your own info."

# Administrative contact pubkey (32-byte hex, not npub)
pubkey = "${RS_PUBKEY}"

# Administrative contact URI
contact = "mailto:contact@example.com"

# Favicon location.  Relative to the current directory.  Assumes an
# ICO format.
favicon = "favicon.ico"

# URL of Relay's icon.
relay_icon = "https://example.test/img.png"

[diagnostics]
# Enable tokio tracing (for use with tokio-console)
tracing = false

[database]
# Database engine (sqlite/postgres).  Defaults to sqlite.
engine = "sqlite"

# Directory for SQLite files.  Defaults to the current directory.
data_directory = "/var/lib/nostr-rs-relay"

# Use an in-memory database instead of 'nostr.db'.
in_memory = false

# Database connection pool settings for subscribers:
# Minimum number of SQLite reader connections
min_conn = 4

# Maximum number of SQLite reader connections.
max_conn = 8

[network]
# Bind to this network address
address = "127.0.0.1"

# Listen on this port
port = 8080

# If present, read this HTTP header for logging client IP addresses.
remote_ip_header = "x-forwarded-for"

# Websocket ping interval in seconds, defaults to 5 minutes
ping_interval = 300

[options]
# Reject events that have timestamps greater than this many seconds in
# the future.  Defaults to rejecting anything greater than 30 minutes
# from the current time.
reject_future_seconds = 1800

[limits]
# Limit events created per second, averaged over one minute.
messages_per_sec = 5

# Limit client subscriptions created, averaged over one minute.
subscriptions_per_min = 90

# Limit the maximum size of an EVENT message.  Defaults to 128 KB.
max_event_bytes = 131072

# Maximum WebSocket message in bytes.  Defaults to 128 KB.
max_ws_message_bytes = 262144

# Maximum WebSocket frame size in bytes.  Defaults to 128 KB.
max_ws_frame_bytes = 131072

# Broadcast buffer size, in number of events.
broadcast_buffer = 16384

# Event persistence buffer size, in number of events.
event_persist_buffer = 4096

# Event kind blacklist. Events with these kinds will be discarded.
event_kind_blacklist = [
    70202,
]

# Event kind allowlist. Events other than these kinds will be discarded.
event_kind_allowlist = [0, 1, 2, 3, 7, 40, 41, 42, 43, 44, 30023]

# Rejects imprecise requests (kind only and author only etc)
limit_scrapers = false

[authorization]
# Pubkey addresses in this array are whitelisted for event publishing.
pubkey_whitelist = [
  "${RS_ALLOWED[0]}",
  "${RS_ALLOWED[1]}",
]

# Enable NIP-42 authentication
nip42_auth = false

# Send DMs (kind 4 and 44) and gift wraps (kind 1059) only to their authenticated recipients.
nip42_dms = false

[verified_users]
# NIP-05 verification of users.  Can be "enabled" to require NIP-05
# metadata for event authors, "passive" to perform validation but
# never block publishing, or "disabled" to do nothing.
mode = "disabled"

# Domain names that will be prevented from publishing events.
#domain_blacklist = ["wellorder.net"]

# Domain names that are allowed to publish events.
domain_whitelist = ["example.com"]

# Consider an pubkey "verified" if we have a successful validation
# from the NIP-05 domain within this amount of time.
verify_expiration = "1 week"

# How long to wait between verification attempts for a specific author.
verify_update_frequency = "24 hours"

# How many consecutive failed checks before we give up on verifying
# this author.
max_consecutive_failures = 20

[pay_to_relay]
# Enable pay to relay
enabled = false

# The cost to be admitted to relay
admission_cost = 4200

# The cost in sats per post
cost_per_event = 0

# Url of lightning node api
node_url = "https://demo.lnbits.com"

# LNBits api secret
api_secret = "<ln bits api>"

# Terms of service
terms_message = """
This service (and supporting services) are provided "as is", without warranty of any kind, express or implied.
"""

# Whether or not new sign ups should be allowed
sign_ups = false

# optional if nostr key for payments
secret_key = "<nostr nsec>"

# Payment processor: LNBits or ClnRest
processor = "LNBits"
`;

describe("loading nostr-rs-relay's config.toml", () => {
  test("mapped keys land on ours, the rest are listed in ignored", () => {
    const { config, ignored } = loadConfigText(NOSTR_RS_RELAY, "config.toml");
    const want = defaults();
    want.info.relay_url = "wss://nostr.example.com/";
    want.info.name = "nostr-rs-relay";
    want.info.description = "A newly created nostr-rs-relay.\n\nCustomize this with your own info.";
    want.info.pubkey = RS_PUBKEY;
    want.info.contact = "mailto:contact@example.com";
    want.info.icon = "https://example.test/img.png"; // info.relay_icon
    want.database.engine = "sqlite";
    want.database.data_directory = "/var/lib/nostr-rs-relay";
    want.database.in_memory = false;
    want.network.host = "127.0.0.1"; // network.address
    want.network.port = 8080;
    want.network.remote_ip_header = "x-forwarded-for";
    want.limits.created_at_upper_limit = 1800; // options.reject_future_seconds
    // limits.max_ws_message_bytes = 262144, limits.max_event_bytes = 131072: one limit here, the smaller.
    want.limits.max_message_bytes = 131072;
    want.rate_limits.events_per_minute = 300; // limits.messages_per_sec = 5
    want.rate_limits.reqs_per_minute = 90; // limits.subscriptions_per_min
    want.authorization.kind_denylist = [70202]; // limits.event_kind_blacklist
    want.authorization.kind_allowlist = [0, 1, 2, 3, 7, 40, 41, 42, 43, 44, 30023]; // limits.event_kind_allowlist
    want.authorization.pubkey_allowlist = RS_ALLOWED; // authorization.pubkey_whitelist
    // Issue 33: its [verified_users] and [pay_to_relay] keys are ours now.
    want.verified_users.domain_whitelist = ["example.com"];
    want.pay_to_relay.node_url = "https://demo.lnbits.com";
    want.pay_to_relay.api_secret = "<ln bits api>";
    want.pay_to_relay.terms_message =
      'This service (and supporting services) are provided "as is", without warranty of any kind, express or implied.\n';
    want.pay_to_relay.sign_ups = false;
    expect(config).toEqual(want);
    expect([...ignored].sort()).toEqual(
      [
        "info.favicon",
        "diagnostics.tracing",
        "database.min_conn",
        "database.max_conn",
        "network.ping_interval",
        "limits.max_ws_frame_bytes",
        "limits.broadcast_buffer",
        "limits.event_persist_buffer",
        "limits.limit_scrapers",
        "authorization.nip42_auth",
        "authorization.nip42_dms",
        "pay_to_relay.secret_key", // its DMs to payers: the /join page replaces them
      ].sort(),
    );
  });

  test("keys with a meaning in another unit or rule are converted, whatever their order; NIP-42 switches set to true are what bunstr does", () => {
    const text = `[limits]
max_event_bytes = 65536
messages_per_sec = 2.5
max_ws_message_bytes = 131072
[authorization]
nip42_auth = true
nip42_dms = true
[database]
engine = "postgres"
connection = "postgresql://postgres:nostr@localhost:7500/nostr"
`;
    const { config, ignored } = loadConfigText(text, "config.toml");
    expect(config.limits.max_message_bytes).toBe(65536);
    expect(config.rate_limits.events_per_minute).toBe(150);
    expect(config.database.engine).toBe("postgres");
    expect(config.database.postgres_url).toBe("postgresql://postgres:nostr@localhost:7500/nostr");
    expect(ignored).toEqual([]);
    // The larger of the two message limits does not raise ours past the other.
    expect(
      loadConfigText("[limits]\nmax_ws_message_bytes = 65536\nmax_event_bytes = 1048576\n", "c.toml").config.limits.max_message_bytes,
    ).toBe(65536);
    expect(() => loadConfigText('[limits]\nmessages_per_sec = "fast"\n', "c.toml")).toThrow(
      'c.toml:2: [limits] messages_per_sec = "fast": expected a number that gives [rate_limits] events_per_minute',
    );
  });

  test("every alias points at a real key of ours and is applied", () => {
    const specs = schema as unknown as Record<string, Record<string, { type: string }>>;
    const sample: Record<string, unknown> = { string: "x.example", int: 4096, bool: true, "string[]": ["ab".repeat(32)], "int[]": [5, 6] };
    for (const [from, to] of Object.entries(aliases)) {
      const [fs, fk] = from.split(".") as [string, string];
      const [ts, tk] = to.split(".") as [string, string];
      const spec = specs[ts]?.[tk];
      if (!spec) throw new Error(`alias ${from} -> ${to}: no such key`);
      const v = sample[spec.type];
      const { config, ignored } = loadConfigText(`[${fs}]\n${fk} = ${JSON.stringify(v)}\n`, "alias.toml");
      expect(ignored).toEqual([]);
      expect((config as any)[ts][tk]).toEqual(v);
    }
  });

  test("an alias with a wrong type is reported under the name the file used", () => {
    const text = `[limits]\nmessages_per_sec = 5\nevent_kind_blacklist = [1, "2", 3]\n`;
    const e = configError(() => loadConfigText(text, "/etc/nostr/config.toml"));
    expect(e.message).toStartWith("/etc/nostr/config.toml:3:");
    expect(e.message).toContain("event_kind_blacklist");
    expect(e.message).toContain("expected an array of integers");
  });
});

describe("config errors", () => {
  const cases: { name: string; text: string; key: string; expected: string }[] = [
    {
      name: "port as a string",
      text: `[info]\nname = "x"\n\n[network]\nhost = "::"\nport = "abc"\n`,
      key: "port",
      expected: "an integer (0..65535)",
    },
    { name: "port out of range", text: `[network]\n  port = 70000 # too big\n`, key: "port", expected: "an integer (0..65535)" },
    { name: "port as a float", text: `[network]\nport = 80.5\n`, key: "port", expected: "an integer" },
    {
      name: "verify_signatures as a string",
      text: `# comment\n[options]\nauth = "always"\nverify_signatures = "yes"\n`,
      key: "verify_signatures",
      expected: "true or false",
    },
    {
      name: "kind list with strings",
      text: `[authorization]\nkind_denylist = ["1", "7"]\n`,
      key: "kind_denylist",
      expected: "an array of integers",
    },
    {
      name: "pubkey list with a number",
      text: `[authorization]\npubkey_allowlist = [\n  "ab",\n  1,\n]\n`,
      key: "pubkey_allowlist",
      expected: "an array of strings",
    },
    {
      name: "string instead of list",
      text: `[authorization]\nkind_allowlist = "1,7"\n`,
      key: "kind_allowlist",
      expected: "an array of integers",
    },
    {
      name: "unknown enum value",
      text: `[database]\nsynchronous = "sometimes"\n`,
      key: "synchronous",
      expected: 'one of "normal", "full"',
    },
    { name: "below minimum", text: `[limits]\nmax_filters = 0\n`, key: "max_filters", expected: "an integer (1..1000)" },
    { name: "number for a string", text: `[info]\nname = 5\n`, key: "name", expected: "a string" },
    { name: "int for a bool", text: `[database]\nin_memory = 1\n`, key: "in_memory", expected: "true or false" },
  ];
  for (const c of cases)
    test(`${c.name}: names the file, the line and the key, and says what was expected`, () => {
      const e = configError(() => loadConfigText(c.text, "relay.toml"));
      const line = lineNo(c.text, c.key);
      expect(e.message).toStartWith(`relay.toml:${line}: `);
      expect(e.message).toContain(c.key);
      expect(e.message).toContain(`expected ${c.expected}`);
    });

  test("the same key name in another section does not confuse the line number", () => {
    const text = `[info]\nname = "ok"\n\n[limits]\nmax_filters = 10\n\n[network]\nport = true\n`;
    expect(configError(() => loadConfigText(text, "a.toml")).message).toStartWith("a.toml:8: ");
  });

  test("a TOML syntax error names file:line:column", () => {
    const text = `[network]\nhost = "127.0.0.1"\nport = = 7447\n`;
    const e = configError(() => loadConfigText(text, "broken.toml"));
    expect(e.message).toMatch(/^broken\.toml:3:\d+: \S/);
    // The common slips in plain words (more in "config check finds every mistake").
    const e2 = configError(() => loadConfigText(`[info]\nname = "unterminated\n`, "b2.toml"));
    expect(e2.message).toStartWith("b2.toml:2: [info] name: unterminated string");
    const e3 = configError(() => loadConfigText(`[network]\nport = 1\nport = 2\n`, "dup.toml"));
    expect(e3.message).toBe("dup.toml:3: [network] port is set twice (first on line 2); keep one");
    // Exactly one line: the code frame smol-toml appends is dropped.
    expect(e.message.includes("\n")).toBe(false);
  });

  test("loadConfigFile: a missing file and a bad file name the path", async () => {
    const missing = join(dir, "nope.toml");
    await expect(loadConfigFile(missing)).rejects.toThrow(`${missing}: no such file`);
    const bad = file("bad-load.toml", `[network]\nport = "x"\n`);
    await expect(loadConfigFile(bad)).rejects.toThrow(`${bad}:2: `);
    const good = file("good-load.toml", `[network]\nport = 1234\n`);
    expect((await loadConfigFile(good)).config.network.port).toBe(1234);
  });
});

describe("override: CLI > file > default", () => {
  const text = `[network]\nhost = "127.0.0.1"\nport = 8080\n\n[options]\nverify_signatures = false\n`;

  test("a flag beats the file, the file beats the default", () => {
    const { config } = loadConfigText(text, "f.toml");
    override(config, "network.port", 9000);
    expect(config.network.port).toBe(9000); // CLI
    expect(config.network.host).toBe("127.0.0.1"); // file
    expect(config.options.verify_signatures).toBe(false); // file
    expect(config.network.path).toBe(defaults().network.path); // default
    override(config, "options.verify_signatures", true);
    expect(config.options.verify_signatures).toBe(true);
    override(config, "authorization.kind_denylist", [1, 2]);
    expect(config.authorization.kind_denylist).toEqual([1, 2]);
  });

  test("validates like the file and leaves the config untouched on error", () => {
    const config = defaults();
    const e = configError(() => override(config, "network.port", "notanumber"));
    expect(e.message).toContain("network.port");
    expect(e.message).toContain("expected an integer (0..65535)");
    configError(() => override(config, "network.port", 65536));
    configError(() => override(config, "network.port", 1.5));
    configError(() => override(config, "options.require_auth", "true"));
    configError(() => override(config, "database.synchronous", "off"));
    expect(configError(() => override(config, "network.nope", 1)).message).toContain("network.nope");
    expect(configError(() => override(config, "nosection.port", 1)).message).toContain("nosection.port");
    expect(config).toEqual(defaults());
  });

  test("resolveConfig: flags over --config file over defaults", async () => {
    const f = file("resolve.toml", text + `\n[info]\nname = "from file"\n`);
    const c: Config = await resolveConfig(["--config", f, "--port", "9001", "--auth", "--path", "relay"]);
    expect(c.network.port).toBe(9001);
    expect(c.network.host).toBe("127.0.0.1");
    expect(c.info.name).toBe("from file");
    expect(c.options.auth).toBe("always");
    expect(c.options.verify_signatures).toBe(false);
    expect(c.network.path).toBe("/relay");
    expect(c.limits.max_limit).toBe(defaults().limits.max_limit);
    await expect(resolveConfig(["--port", "notanumber"])).rejects.toThrow("network.port");
    await expect(resolveConfig(["--config", f, "--port", "99999"])).rejects.toThrow("network.port");
  });
});

// ---------------------------------------------------------------------------------------------
// The CLI as a subprocess, run by the bun binary that runs these tests.

async function cli(args: string[], timeoutMs = 15_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  // cwd is the temp directory: should a command wrongly start serving, its ./data lands there.
  const proc = Bun.spawn([process.execPath, join(ROOT, "src/main.ts"), ...args], {
    cwd: dir,
    stdout: "pipe",
    stderr: "pipe",
    stdin: "ignore",
  });
  // A command that should exit but starts a server instead must not hang the suite.
  const timer = setTimeout(() => proc.kill(), timeoutMs);
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  return { code: proc.signalCode ? null : code, stdout, stderr };
}

describe("CLI", () => {
  test("config init prints the commented default config and exits 0", async () => {
    const r = await cli(["config", "init"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(renderDefaultConfig());
    expect(r.stderr).toBe("");
  }, 20_000);

  test("config check: a good file exits 0; nostr-rs-relay's warns about ignored keys", async () => {
    const good = file("good.toml", uncomment(renderDefaultConfig()));
    const r = await cli(["config", "check", good]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`${good}: ok`);
    expect(r.stderr).toBe("");
    const rs = file("nostr-rs-relay.toml", NOSTR_RS_RELAY);
    const r2 = await cli(["config", "check", rs]);
    expect(r2.code).toBe(0);
    expect(r2.stdout).toContain(`${rs}: ok`);
    expect(r2.stderr).toContain("pay_to_relay.secret_key");
    expect(r2.stderr).not.toContain("pay_to_relay.enabled");
    expect(r2.stderr).toContain("network.ping_interval");
  }, 20_000);

  test("config check warns about what serve warns about: remote_ip_header without trusted_proxies, a proxy given by name", async () => {
    const proxied = file("proxied.toml", `[network]\nhost = "127.0.0.1"\nremote_ip_header = "x-forwarded-for"\n`);
    const r = await cli(["config", "check", proxied]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`${proxied}: ok`);
    expect(r.stderr).toBe(
      `warning: ${proxied}: [network] remote_ip_header is ignored until trusted_proxies lists your proxy's address ` +
        `(a proxy on this host: trusted_proxies = ["127.0.0.1", "::1"])\n`,
    );
    const named = file("named.toml", `[network]\nremote_ip_header = "x-real-ip"\ntrusted_proxies = ["localhost", "10.0.0.0/8", "::1"]\n`);
    const r2 = await cli(["config", "check", named]);
    expect(r2.code).toBe(0);
    expect(r2.stderr.trim().split("\n")).toEqual(
      ["localhost", "10.0.0.0/8"].map(
        (entry) =>
          `warning: ${named}: [network] trusted_proxies: "${entry}" is not an IP address and matches no peer; ` +
          `list each proxy's address as the relay sees it (e.g. "127.0.0.1", "::1"; names and ranges are not matched)`,
      ),
    );
  }, 20_000);

  test("config check warns, without refusing, about kinds above 65535 in the kind lists", async () => {
    const over = file("over.toml", `[authorization]\nkind_denylist = [1, 70202]\nkind_allowlist = [70000]\n`);
    const r = await cli(["config", "check", over]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`${over}: ok`);
    expect(r.stderr.trim().split("\n")).toEqual([
      `warning: ${over}: [authorization] kind_allowlist: 70000 is above 65535, the highest kind an event can have: ` +
        `no event matches it; with none other listed, every event is refused`,
      `warning: ${over}: [authorization] kind_denylist: 70202 is above 65535, the highest kind an event can have: no event matches it`,
    ]);
    // nostr-rs-relay's own sample config lists 70202: it still loads, with the same warning.
    const rs = file("nostr-rs-relay-kinds.toml", NOSTR_RS_RELAY);
    const r2 = await cli(["config", "check", rs]);
    expect(r2.code).toBe(0);
    expect(r2.stderr).toContain(`warning: ${rs}: [authorization] kind_denylist: 70202 is above 65535`);
  }, 20_000);

  test("serve prints at start the warnings config check prints", async () => {
    const text = `[network]\nremote_ip_header = "x-forwarded-for"\ntrusted_proxies = ["localhost"]\n`;
    const checked = file("both.toml", text);
    const r = await cli(["config", "check", checked]);
    const warnings = r.stderr.trim().split("\n");
    expect(warnings).toHaveLength(1);
    const relay = await spawnRelay(
      [process.execPath, join(ROOT, "src/main.ts")],
      ["--data-dir", join(dir, "d-warn"), "--config", checked],
      dir,
    );
    try {
      const served = relay
        .output()
        .split("\n")
        .filter((l) => l.startsWith("warning: [network]"));
      expect(served).toEqual(warnings.map((l) => l.replace(`warning: ${checked}: `, "warning: ")));
    } finally {
      relay.proc.kill();
      await relay.proc.exited;
    }
  }, 30_000);

  test("config check: a bad file exits 2 with file:line in stderr", async () => {
    const text = `[network]\nhost = "0.0.0.0"\n\n[options]\nverify_signatures = "yes"\n`;
    const bad = file("bad.toml", text);
    const r = await cli(["config", "check", bad]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${bad}:5:`);
    expect(r.stderr).toContain("verify_signatures");
    expect(r.stderr).toContain("expected true or false");
    const syntax = file("syntax.toml", `[network\nport = 1\n`);
    const r2 = await cli(["config", "check", syntax]);
    expect(r2.code).toBe(2);
    expect(r2.stderr).toBe(`error: ${syntax}:1: [network: a section header needs its closing ]\n`);
    const r3 = await cli(["config", "check", join(dir, "missing.toml")]);
    expect(r3.code).toBe(2);
    expect(r3.stderr).toContain("no such file");
  }, 30_000);

  test("config with no subcommand prints usage and exits 2", async () => {
    const r = await cli(["config"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("config init");
  }, 20_000);

  test("--version prints the package.json version", async () => {
    const r = await cli(["--version"]);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(pkg.version);
  }, 20_000);

  test("--help prints usage", async () => {
    const r = await cli(["--help"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("Usage:");
    expect(r.stdout).toContain("bunstr config init");
    expect(r.stdout).toContain("--port");
  }, 20_000);

  test("an unknown command exits 2", async () => {
    const r = await cli(["frobnicate"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("frobnicate");
    expect(r.stderr).toContain("Usage:");
  }, 20_000);

  test("a misspelt command is told the one meant, as a misspelt flag is", async () => {
    const r = await cli(["admn", "add", "npub1x"]);
    expect(r.code).toBe(2);
    expect(r.stderr.trim()).toBe('error: unknown command "admn"; did you mean "admin"? (bunstr --help lists them)');
    expect((await cli(["exprot"])).stderr).toContain('did you mean "export"?');
  }, 20_000);

  test("bunstr --port notanumber exits 2 naming network.port", async () => {
    const r = await cli(["--port", "notanumber"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("network.port");
    expect(r.stderr).toContain("notanumber");
    expect(r.stdout).not.toContain("listening");
  }, 20_000);

  test("bunstr --config with a bad file exits 2 with file:line", async () => {
    const bad = file("serve-bad.toml", `[network]\nport = "abc"\n`);
    const r = await cli(["--config", bad, "--port", "0"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${bad}:2:`);
    expect(r.stderr).toContain("port");
  }, 20_000);
});

describe("value checks beyond the type", () => {
  test.each([
    ["an npub in pubkey_allowlist", `[authorization]\npubkey_allowlist = ["npub1xyz"]\n`, "64 lowercase hex"],
    ["uppercase hex info.pubkey", `[info]\npubkey = "${"A".repeat(64)}"\n`, "64 lowercase hex"],
    ["a negative kind", `[authorization]\nkind_denylist = [-1]\n`, "(0..…)"],
    ["a known section that is not a table", `network = 5\n`, "must be a [network] table"],
  ])("%s is an error", (_name, text, expected) => {
    expect(configError(() => loadConfigText(text, "c.toml")).message).toContain(expected);
  });

  test("an empty info.pubkey is allowed (not advertised)", () => {
    expect(loadConfigText(`[info]\npubkey = ""\n`, "c.toml").config.info.pubkey).toBe("");
  });
});

describe("[groups] (NIP-29)", () => {
  const HEX = "e".repeat(64);
  test("off by default; creators defaults to anyone", () => {
    expect(defaults().groups.enabled).toBe(false);
    expect(defaults().groups.creators).toEqual(["anyone"]);
  });

  test('creators = "anyone" (a bare string) is a one-item list; a list of pubkeys and "admins" load', () => {
    expect(loadConfigText(`[groups]\nenabled = true\ncreators = "anyone"\n`, "c.toml").config.groups.creators).toEqual(["anyone"]);
    expect(loadConfigText(`[groups]\ncreators = ["${HEX}", "admins"]\n`, "c.toml").config.groups.creators).toEqual([HEX, "admins"]);
  });

  test.each([
    ["a word that is no rule", `[groups]\ncreators = "x"\n`],
    ["an npub in a list", `[groups]\ncreators = ["npub1xyz"]\n`],
    ["a number", `[groups]\ncreators = 5\n`],
  ])("creators: %s is an error that says what is expected", (_name, text) => {
    expect(configError(() => loadConfigText(text, "c.toml")).message).toContain(
      "creators = " +
        text.split("creators = ")[1]!.trim() +
        ': expected a string or an array of strings of "anyone", "admins" or 64 lowercase hex pubkeys',
    );
  });

  test("relay_secret_key must be 64 lowercase hex; it is never written to the reload log", () => {
    expect(configError(() => loadConfigText(`[info]\nrelay_secret_key = "abc"\n`, "c.toml")).message).toContain("64 lowercase hex");
    const a = defaults();
    const b = defaults();
    b.info.relay_secret_key = HEX;
    expect(describeChanges(diffConfig(a, b))).toBe("info.relay_secret_key (hidden) -> (hidden)");
  });

  test("a previous_window under the NIP's 50 is an error", () => {
    expect(configError(() => loadConfigText(`[groups]\nprevious_window = 10\n`, "c.toml")).message).toContain("(50..100000)");
  });
});

describe("admission (issue 33)", () => {
  test("every model is off by default; sign_ups is on; everyone reads", () => {
    const d = defaults();
    expect([d.pay_to_relay.enabled, d.verified_users.mode, d.web_of_trust.enabled, d.membership.enabled]).toEqual([
      false,
      "disabled",
      false,
      false,
    ]);
    expect(d.pay_to_relay.sign_ups).toBe(true);
    expect(d.authorization.read).toBe("everyone");
    expect(d.authorization.accept_dms_to_members).toBe(true);
    expect(configErrors(d)).toEqual([]);
    expect(configWarnings(d)).toEqual([]);
  });

  test("durations take nostr-rs-relay's words, at least 60 s", () => {
    const c = loadConfigText(`[verified_users]\nverify_expiration = "2 days"\nverify_update_frequency = "90 minutes"\n`, "c.toml").config;
    expect([c.verified_users.verify_expiration, c.verified_users.verify_update_frequency]).toEqual(["2 days", "90 minutes"]);
    expect(configError(() => loadConfigText(`[verified_users]\nverify_expiration = "30s"\n`, "c.toml")).message).toContain(
      'verify_expiration = "30s": expected a string of a duration of at least 60 s',
    );
    expect(configError(() => loadConfigText(`[verified_users]\nverify_update_frequency = "1 fortnight"\n`, "c.toml")).message).toContain(
      "a duration of at least 60 s",
    );
  });

  test("pay without a node, a key or a rune, and a web of trust without seeds, cannot start", () => {
    const c = defaults();
    c.pay_to_relay.enabled = true;
    c.web_of_trust.enabled = true;
    expect(configErrors(c)).toEqual([
      "[pay_to_relay] enabled needs node_url (the Lightning node's API)",
      '[pay_to_relay] processor = "LNBits" needs api_secret (the wallet\'s invoice key)',
      "[web_of_trust] enabled needs seeds or [info] pubkey (whose follows the web starts from)",
    ]);
    c.pay_to_relay.processor = "ClnRest";
    c.pay_to_relay.node_url = "https://node.example";
    c.info.pubkey = "e".repeat(64);
    expect(configErrors(c)).toEqual(['[pay_to_relay] processor = "ClnRest" needs rune_path (a file holding the rune)']);
    c.pay_to_relay.rune_path = "/etc/rune";
    expect(configErrors(c)).toEqual([]);
    c.verified_users.mode = "passive";
    c.verified_users.verify_expiration = "";
    expect(configErrors(c)).toEqual([
      '[verified_users] verify_expiration is empty: give a duration of at least 60 s (the default: "1 week")',
    ]);
  });

  test("warnings: members-only reading with nobody admitted, pay without relay_url, http_loopback", () => {
    const c = defaults();
    c.authorization.read = "members";
    c.pay_to_relay.enabled = true;
    c.verified_users.http_loopback = true;
    expect(configWarnings(c)).toEqual([
      'warning: [pay_to_relay] is enabled but [info] relay_url is not set: the node gets no webhook (payments are found by polling) and refusals say "join at /join" without the relay\'s address',
      "warning: [verified_users] http_loopback is for tests only: NIP-05 addresses on this machine are fetched over http",
    ]);
    c.pay_to_relay.enabled = false;
    expect(configWarnings(c)[0]).toBe(
      'warning: [authorization] read = "members" with no admission model on and an empty pubkey_allowlist: only admins and allow-listed pubkeys can read',
    );
  });

  test("config check says what stops serve", async () => {
    const bad = file("unpaid.toml", `[pay_to_relay]\nenabled = true\n`);
    const r = await cli(["config", "check", bad]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`error: ${bad}: [pay_to_relay] enabled needs node_url`);
  }, 20_000);
});

// ---------------------------------------------------------------------------------------------
// Issue 16 item 5: `config check` (and serve, which loads the file the same way) finds every
// mistake in one run, each with file:line, in plain words, with "did you mean" for unknown names.

/** Every problem a file has, as loadConfigText reports them (fails if it loads). */
const problemsOf = (text: string, name = "r.toml"): string[] => configError(() => loadConfigText(text, name)).message.split("\n");
const REFUSED = "unknown keys are refused; correct them, or pass --lenient to ignore them";
const UNTERMINATED =
  'unterminated string: the closing quote is missing (a "…" string must end on its line; use """…""" for text over several lines)';

describe("config check finds every mistake, with file:line", () => {
  test("a misspelt key is an error with its line and the key it is close to", () => {
    expect(problemsOf(`[info]\nname = "x"\ndescripton = "typo"\n`)).toEqual([
      `r.toml:3: [info] unknown key "descripton"; did you mean "description"?`,
      `r.toml: ${REFUSED}`,
    ]);
  });

  test("a misspelt section is an error with its line and the section it is close to", () => {
    expect(problemsOf(`[network]\nport = 7447\n\n[infos]\nname = "x"\n`)).toEqual([
      "r.toml:4: unknown section [infos]; did you mean [info]?",
      `r.toml: ${REFUSED}`,
    ]);
  });

  test("a key in the wrong section, or outside any, names the section it belongs to", () => {
    expect(problemsOf(`port = 7447\n[info]\nport = 1\nwebsocket_port = 2\n`)).toEqual([
      'r.toml:1: unknown key "port" outside any section; did you mean [network] port?',
      'r.toml:3: [info] unknown key "port"; did you mean [network] port?',
      'r.toml:4: [info] unknown key "websocket_port" (`bunstr config init` lists every key)',
      `r.toml: ${REFUSED}`,
    ]);
  });

  test("every bad value is reported, not only the first", () => {
    const text = `[network]\nport = "abc"\n\n[limits]\nmax_subscriptions = "many"\nmax_filters = 0\n\n[info]\nnaem = "x"\n`;
    expect(problemsOf(text)).toEqual([
      'r.toml:2: [network] port = "abc": expected an integer (0..65535)',
      'r.toml:5: [limits] max_subscriptions = "many": expected an integer (1..10000)',
      "r.toml:6: [limits] max_filters = 0: expected an integer (1..1000)",
      'r.toml:9: [info] unknown key "naem"; did you mean "name"?',
      `r.toml: ${REFUSED}`,
    ]);
  });

  test("an unterminated string says so, and the rest of the file is still checked", () => {
    expect(problemsOf(`[info]\nname = "My relay\ncontact = "mailto:me@example.com"\n\n[network]\nport = true\n`)).toEqual([
      `r.toml:2: [info] name: ${UNTERMINATED}`,
      "r.toml:6: [network] port = true: expected an integer (0..65535)",
    ]);
    // Inside a list that goes over several lines too.
    expect(problemsOf(`[authorization]\nkind_denylist = [\n  1,\n  "2,\n]\n`)).toEqual([`r.toml:4: ${UNTERMINATED}`]);
  });

  test("a string value without quotes says how to write it; a number expected there says so", () => {
    expect(problemsOf(`[network]\nhost = 127.0.0.1\nport = 80x\n\n[info]\nname = My relay # the name\n`)).toEqual([
      'r.toml:2: [network] host = 127.0.0.1: a string needs quotes: host = "127.0.0.1"',
      "r.toml:3: [network] port = 80x: expected an integer (0..65535)",
      'r.toml:6: [info] name = My relay: a string needs quotes: name = "My relay"',
    ]);
  });

  test("a key or a section written twice names both lines", () => {
    expect(problemsOf(`[network]\nport = 1\nport = 2\n\n[info]\nname = "a"\n\n[network]\nhost = "::"\n`)).toEqual([
      "r.toml:3: [network] port is set twice (first on line 2); keep one",
      "r.toml:8: [network] appears twice (first on line 1); put its keys under one [network]",
    ]);
  });

  test("a section header without its closing bracket; the keys under it are still checked", () => {
    expect(problemsOf(`[network\nport = "x"\n`)).toEqual([
      "r.toml:1: [network: a section header needs its closing ]",
      'r.toml:2: [network] port = "x": expected an integer (0..65535)',
    ]);
  });

  test("lenient: unknown keys and sections are warnings with file:line, the rest loads", () => {
    const text = `[info]\nname = "x"\ndescripton = "typo"\n\n[infos]\na = 1\n`;
    const { config, unknown } = loadConfigText(text, "r.toml", { lenient: true });
    expect(config.info.name).toBe("x");
    expect(unknown).toEqual([
      'r.toml:3: [info] unknown key "descripton"; did you mean "description"? (ignored: --lenient)',
      "r.toml:5: unknown section [infos]; did you mean [info]? (ignored: --lenient)",
    ]);
    // Lenient is about names only: a bad value is still an error.
    expect(configError(() => loadConfigText(`${text}[network]\nport = "x"\n`, "r.toml", { lenient: true })).message).toBe(
      'r.toml:8: [network] port = "x": expected an integer (0..65535)',
    );
  });

  test("nostr-rs-relay's keys we do not use are not unknown; a misspelling of one is", () => {
    expect(loadConfigText(NOSTR_RS_RELAY, "config.toml").unknown).toEqual([]);
    expect(problemsOf(`[verified_users]\nmdoe = "enabled"\n`)).toEqual([
      'r.toml:2: [verified_users] unknown key "mdoe"; did you mean "mode"?',
      `r.toml: ${REFUSED}`,
    ]);
  });

  test("config check: exit 2 and every problem on stderr; --lenient: exit 0 with warnings", async () => {
    const f = file("typos.toml", `[infos]\nname = "x"\n\n[info]\ndescripton = "d"\n\n[network]\nport = "abc"\n`);
    const r = await cli(["config", "check", f]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe(
      [
        `error: ${f}:1: unknown section [infos]; did you mean [info]?`,
        `error: ${f}:5: [info] unknown key "descripton"; did you mean "description"?`,
        `error: ${f}:8: [network] port = "abc": expected an integer (0..65535)`,
        `error: ${f}: ${REFUSED}`,
        "",
      ].join("\n"),
    );
    const typo = file("typo.toml", `[info]\ndescripton = "d"\n`);
    const r2 = await cli(["config", "check", "--lenient", typo]);
    expect(r2.code).toBe(0);
    expect(r2.stdout).toBe(`${typo}: ok\n`);
    expect(r2.stderr).toBe(`warning: ${typo}:2: [info] unknown key "descripton"; did you mean "description"? (ignored: --lenient)\n`);
  }, 30_000);

  test("serve refuses a file with an unknown key the same way; --lenient starts, warning with file:line", async () => {
    const typo = file("serve-typo.toml", `[info]\ndescripton = "d"\n`);
    const r = await cli(["--config", typo, "--port", "0"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`error: ${typo}:2: [info] unknown key "descripton"; did you mean "description"?\nerror: ${typo}: ${REFUSED}\n`);
    await expect(resolveConfig(["--config", typo])).rejects.toThrow(`${typo}:2: [info] unknown key "descripton"`);
    expect((await resolveConfig(["--config", typo, "--lenient"])).info.description).toBe(defaults().info.description);
    const relay = await spawnBunstr(
      ["--config", typo, "--lenient", "--host", "127.0.0.1", "--port", "0", "--data-dir", join(dir, "lenient")],
      dir,
    );
    try {
      expect(relay.output()).toContain(
        `warning: ${typo}:2: [info] unknown key "descripton"; did you mean "description"? (ignored: --lenient)\n`,
      );
    } finally {
      relay.proc.kill("SIGTERM");
      await relay.proc.exited;
    }
  }, 30_000);
});

// Issue 34 item 7: slips on the command line are told as config keys' are, and --lenient does not
// hide a file's unknown keys when a bad value in it stops the start.
describe("command-line slips (issue 34)", () => {
  test("an unknown flag of any command: `unknown flag --prot; did you mean --port?`, exit 2", async () => {
    const cases: [string[], string][] = [
      [["--prot", "7601"], "error: unknown flag --prot; did you mean --port?\n"],
      [["serve", "--lenent"], "error: unknown flag --lenent; did you mean --lenient?\n"],
      [["--log-levle", "debug"], "error: unknown flag --log-levle; did you mean --log-level?\n"],
      [["export", "--dta-dir", "x"], "error: unknown flag --dta-dir; did you mean --data-dir?\n"],
      [["import", "--no-verfy"], "error: unknown flag --no-verfy; did you mean --no-verify?\n"],
      [["stats", "--jsno"], "error: unknown flag --jsno; did you mean --json?\n"],
      [["sync", "ws://127.0.0.1:9/", "--filtr", "{}"], "error: unknown flag --filtr; did you mean --filter?\n"],
      [["config", "check", "--lenent", "x.toml"], "error: unknown flag --lenent; did you mean --lenient?\n"],
      // Nothing near: no guess.
      [["--zzzzzz"], "error: unknown flag --zzzzzz (bunstr --help lists the flags)\n"],
    ];
    for (const [args, stderr] of cases) {
      const r = await cli(args);
      expect({ args, code: r.code, stderr: r.stderr }).toEqual({ args, code: 2, stderr });
    }
  }, 60_000);

  test("--lenient with an unknown key and a bad value: the key is warned about and the value stops the start, each with file:line", async () => {
    const f = file("lenient-both.toml", `[network]\nprot = 7601\n\n[limits]\nmax_subscriptions = "many"\n`);
    const unknown = `${f}:2: [network] unknown key "prot"; did you mean "port"? (ignored: --lenient)`;
    const bad = `${f}:5: [limits] max_subscriptions = "many": expected an integer (1..10000)`;
    const err = configError(() => loadConfigText(`[network]\nprot = 7601\n\n[limits]\nmax_subscriptions = "many"\n`, f, { lenient: true }));
    expect(err.problems).toEqual([bad]);
    expect(err.warnings).toEqual([unknown]);
    const serve = await cli(["--config", f, "--lenient", "--port", "0"]);
    expect(serve.code).toBe(2);
    expect(serve.stderr).toBe(`warning: ${unknown}\nerror: ${bad}\n`);
    const check = await cli(["config", "check", "--lenient", f]);
    expect(check.code).toBe(2);
    expect(check.stderr).toBe(`warning: ${unknown}\nerror: ${bad}\n`);
  }, 30_000);
});

describe("[log] (issue 34)", () => {
  test("level and format load from the file; the flags win; a slip in a value is an error with a suggestion", async () => {
    expect(loadConfigText(`[log]\nlevel = "debug"\nformat = "json"\n`, "r.toml").config.log).toEqual({ level: "debug", format: "json" });
    expect(defaults().log).toEqual({ level: "info", format: "text" });
    expect(problemsOf(`[log]\nlevel = "warning"\nformat = "jsno"\n`)).toEqual([
      'r.toml:2: [log] level = "warning": expected one of "error", "warn", "info", "debug"; did you mean "warn"?',
      'r.toml:3: [log] format = "jsno": expected one of "text", "json"; did you mean "json"?',
    ]);
    const f = file("log.toml", `[log]\nlevel = "debug"\n`);
    expect((await resolveConfig(["--config", f])).log.level).toBe("debug");
    expect((await resolveConfig(["--config", f, "--log-level", "warn", "--log-format", "json"])).log).toEqual({
      level: "warn",
      format: "json",
    });
    await expect(resolveConfig(["--log-level", "debg"])).rejects.toThrow(
      'log.level = "debg": expected one of "error", "warn", "info", "debug"; did you mean "debug"?',
    );
  });
});
