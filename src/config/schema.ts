// The one config schema: every key's type, default, doc and whether a reload may change it.
// Types, defaults, validation, the commented default file and NIP-11 `limitation` all derive
// from this table. Aliases map nostr-rs-relay's keys onto ours so its config.toml loads.

import { LOG_FORMATS, LOG_LEVELS } from "../log.ts";
import { DURATION, DURATION_60S } from "./duration.ts";

type Kind = "string" | "int" | "bool" | "string[]" | "int[]";

interface KeySpec<K extends Kind = Kind> {
  type: K;
  default: TypeOf<K>;
  doc: string;
  reloadable: boolean;
  /** Allowed values for a string key. */
  oneOf?: readonly string[];
  /** Inclusive bounds for an int key, or for each item of an int[] key. */
  min?: number;
  max?: number;
  /** Each string (or item of a string[]) must match, e.g. 64 lowercase hex for pubkeys. */
  pattern?: RegExp;
  /** What `pattern` means, for error messages. */
  patternDoc?: string;
  /** A string[] key that also takes a bare string, read as a one-item list (`creators = "anyone"`). */
  scalarOk?: true;
}

const HEX64 = { pattern: /^[0-9a-f]{64}$/, patternDoc: "64 lowercase hex characters" } as const;
const OCTET = "(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)";
const LABEL = "[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?";
/** An IPv4 address, an IPv6 address (with a zone), or a host name whose last label is not all digits; no port. */
const HOST = {
  pattern: new RegExp(
    `^(?:${OCTET}(?:\\.${OCTET}){3}|(?=[^:]*:[^:]*:)[0-9a-fA-F:.]+(?:%[\\w.-]+)?|(?:${LABEL}\\.)*(?=[a-zA-Z0-9-]*[a-zA-Z])${LABEL}\\.?)$`,
  ),
  patternDoc: "an IP address or a host name, without a port",
} as const;
// No upper bound: nostr-rs-relay's sample config lists kind 70202, and a list entry that no event can
// have is harmless.
const KIND = { min: 0 } as const;

type TypeOf<K extends Kind> = K extends "string"
  ? string
  : K extends "int"
    ? number
    : K extends "bool"
      ? boolean
      : K extends "string[]"
        ? string[]
        : number[];

const key = <K extends Kind>(spec: KeySpec<K>): KeySpec<K> => spec;
const KiB = 1024;
const RATE_NOTE =
  "Token buckets per IP (an IPv6 /64 counts as one IP) and per NIP-42 authenticated pubkey: each refills at its *_per_minute up to its *_burst. " +
  "Past it an EVENT or AUTH gets OK false, a REQ or COUNT CLOSED, a NEG-OPEN NEG-ERR (all `rate-limited:`), a new connection HTTP 429 with Retry-After. " +
  "Connections authenticated as an [admin] pubkey are exempt, and so (see exempt_private_addresses) are loopback and private addresses from the per-IP buckets of connections, EVENTs, REQs, COUNTs, NEG-OPENs and AUTHs. ";
/** A [rate_limits] refill rate; `note` explains the section once, on its first key. */
const perMinute = (n: number, what: string, note = "") =>
  key({ type: "int", default: n, min: 0, doc: `${note}${what} allowed per minute, on average (0 = unlimited).`, reloadable: true });
/** A [rate_limits] bucket size: what may come at once after a quiet spell. */
const burst = (n: number, what: string) =>
  key({
    type: "int",
    default: n,
    min: 1,
    doc: `Most ${what} allowed at once (the bucket size; refilled at the rate above).`,
    reloadable: true,
  });
const MiB = 1024 * KiB;

export const schema = {
  info: {
    relay_url: key({
      type: "string",
      default: "",
      doc: "Public websocket URL of this relay (wss://…), used by NIP-11 and NIP-42.",
      reloadable: true,
    }),
    name: key({ type: "string", default: "bunstr", doc: "Relay name shown to clients (NIP-11), under 30 characters.", reloadable: true }),
    description: key({
      type: "string",
      default: "A Nostr relay running bunstr.",
      doc: "Plain-text description (NIP-11).",
      reloadable: true,
    }),
    pubkey: key({ type: "string", default: "", ...HEX64, doc: "Administrative contact pubkey, 64 hex (NIP-11).", reloadable: true }),
    self: key({
      type: "string",
      default: "",
      ...HEX64,
      doc: "The relay's own pubkey, 64 hex (NIP-11 `self`). Empty: the relay key's pubkey (relay_key_file), which NIP-11 always advertises; a different value is a start error.",
      reloadable: true,
    }),
    relay_secret_key: key({
      type: "string",
      default: "",
      ...HEX64,
      doc: "The relay's own secret key, 64 hex: it signs what the relay publishes itself (NIP-29 group metadata and moderation). Wins over relay_key_file; prefer the file, which keeps the secret out of the config.",
      reloadable: false,
    }),
    relay_key_file: key({
      type: "string",
      default: "",
      doc: "File holding the relay's secret key (64 hex), created with mode 0600 on first start and refused when others may read it. Empty: <data_directory>/relay.key (SQLite; `bunstr backup` copies it beside the backup) or a row in the database (Postgres, shared by every node).",
      reloadable: false,
    }),
    contact: key({ type: "string", default: "", doc: "Alternative contact URI, e.g. mailto:… (NIP-11).", reloadable: true }),
    icon: key({ type: "string", default: "", doc: "URL of a square icon (NIP-11).", reloadable: true }),
    banner: key({ type: "string", default: "", doc: "URL of a banner image (NIP-11).", reloadable: true }),
    terms_of_service: key({ type: "string", default: "", doc: "URL of the terms of service (NIP-11).", reloadable: true }),
    privacy_policy: key({ type: "string", default: "", doc: "URL of the privacy policy (NIP-11).", reloadable: true }),
    posting_policy: key({ type: "string", default: "", doc: "URL of the posting policy (NIP-11).", reloadable: true }),
  },
  network: {
    host: key({
      type: "string",
      default: "0.0.0.0",
      ...HOST,
      doc: "Address to listen on: 0.0.0.0 (every IPv4 address), :: (IPv6 too), 127.0.0.1 behind a reverse proxy on the same machine, or one address (or name) of this machine. The port goes in port.",
      reloadable: false,
    }),
    port: key({ type: "int", default: 7447, min: 0, max: 65535, doc: "TCP port (0 picks a free one).", reloadable: false }),
    path: key({ type: "string", default: "/", doc: "HTTP path of the websocket and NIP-11 endpoint.", reloadable: false }),
    remote_ip_header: key({
      type: "string",
      default: "",
      doc: "Header carrying the client IP behind a proxy (e.g. x-forwarded-for); empty = socket address.",
      reloadable: true,
    }),
    trusted_proxies: key({
      type: "string[]",
      default: [],
      doc: "Peer addresses (e.g. 127.0.0.1, ::1) whose remote_ip_header is believed; from anyone else the header is ignored.",
      reloadable: true,
    }),
    idle_timeout_seconds: key({
      type: "int",
      default: 120,
      min: 0,
      max: 960,
      doc: "Close websockets idle this long; pings are sent automatically (0 = never).",
      reloadable: true,
    }),
    header_timeout_seconds: key({
      type: "int",
      default: 5,
      min: 1,
      max: 60,
      doc: "Linux: a connection that is not a websocket (a request whose headers are still arriving, an idle keep-alive) is closed after about this long. Elsewhere Bun's own limit applies: ~10 s for unfinished headers. See docs/deploy.md, Open files.",
      reloadable: true,
    }),
    compression: key({
      type: "string",
      default: "off",
      oneOf: ["off", "shared", "3KB", "4KB", "8KB", "16KB", "32KB", "64KB", "128KB", "256KB"],
      doc: "permessage-deflate for clients that offer it (browsers do): EVENT frames of REQ answers and fanout are sent compressed. shared: one compressor for all connections, no memory per connection; 3KB..256KB: a compressor of its own per connection, with that much memory each, which also compresses what repeats between frames. Off by default: it costs 6-9x the CPU per live delivery; see docs/deploy.md, Compression.",
      reloadable: false,
    }),
    reuse_port: key({
      type: "bool",
      default: true,
      doc: "Listen with SO_REUSEPORT, so a new bunstr serving the same database can bind the same host and port while this one drains (zero-downtime restart, see docs/operations.md); a relay with another database, or another program, on the port still makes a new one refuse to start. Off: a second relay on the port fails to start.",
      reloadable: false,
    }),
  },
  database: {
    engine: key({
      type: "string",
      default: "sqlite",
      oneOf: ["sqlite", "postgres"],
      doc: "Storage engine: sqlite (one file, nothing else to run) or postgres (several bunstr nodes on one database; see docs/scaling.md).",
      reloadable: false,
    }),
    postgres_url: key({
      type: "string",
      default: "",
      doc: 'engine = "postgres": the connection URL, e.g. postgres://bunstr:secret@127.0.0.1:5432/bunstr (the environment variable DATABASE_URL is used when this is empty).',
      reloadable: false,
    }),
    postgres_pool: key({
      type: "int",
      default: 10,
      min: 1,
      max: 200,
      doc: 'engine = "postgres": most connections this node opens (writes use one at a time; the rest serve REQ/COUNT/NEG queries).',
      reloadable: false,
    }),
    bus_url: key({
      type: "string",
      default: "",
      doc: "engine = \"postgres\" with several nodes: Redis URL (redis://127.0.0.1:6379) of the bus that carries each accepted event to the other nodes' live subscribers at once. Empty = no bus: other nodes' events reach live subscribers here, and their admin changes apply here, within about a second (polling).",
      reloadable: false,
    }),
    data_directory: key({
      type: "string",
      default: "./data",
      doc: "Directory of the SQLite database (created if missing). A relative path is read from the working directory of each process: the service's, but yours for `bunstr stats`, `backup`, `import` (give a server an absolute one, e.g. /var/lib/bunstr).",
      reloadable: false,
    }),
    file: key({ type: "string", default: "", doc: "Database file; empty = <data_directory>/bunstr.sqlite.", reloadable: false }),
    in_memory: key({
      type: "bool",
      default: false,
      doc: "Keep everything in memory (lost on exit; for tests and demos).",
      reloadable: false,
    }),
    synchronous: key({
      type: "string",
      default: "normal",
      oneOf: ["normal", "full"],
      doc: "SQLite synchronous mode: normal survives process crashes (kill -9); full also survives power loss, at a cost per commit.",
      reloadable: false,
    }),
    reader_workers: key({
      type: "int",
      default: 2,
      min: 1,
      max: 16,
      doc: "Worker threads answering REQ/COUNT/NEG queries, so a heavy query never blocks the event loop or every other query. Started with the relay and kept (each holds a database connection). Reads run in slices of a few ms, taken in turn by client address, so a heavy query only delays the client that sent it.",
      reloadable: false,
    }),
    query_timeout_ms: key({
      type: "int",
      default: 5000,
      min: 100,
      doc: "Worker time (ms) one REQ/COUNT/NEG-OPEN may use; past it the query is stopped (between two slices of a few ms) and answered with CLOSED (NEG-ERR) error:.",
      reloadable: false,
    }),
  },
  options: {
    verify_signatures: key({
      type: "bool",
      default: true,
      doc: "Verify event signatures (turn off only for trusted imports and benchmarks).",
      reloadable: false,
    }),
    verifier: key({
      type: "string",
      default: "auto",
      oneOf: ["auto", "noble", "native"],
      doc: "Schnorr verifier: native = the system's libsecp256k1 (~15x faster), noble = pure JS (always works), auto = native when installed.",
      reloadable: false,
    }),
    verify_workers: key({
      type: "int",
      default: 0,
      min: 0,
      max: 64,
      doc: "Signature-verification worker threads; 0 = one per core. Started with the relay and kept.",
      reloadable: false,
    }),
    auth: key({
      type: "string",
      default: "when-needed",
      oneOf: ["when-needed", "writes", "always"],
      doc: "NIP-42: when-needed = only for restricted reads (DMs) and protected events; writes = also for every EVENT; always = before any EVENT, REQ or COUNT.",
      reloadable: true,
    }),
    auth_relay_url_check: key({
      type: "bool",
      default: true,
      doc: "NIP-42: the AUTH event's relay tag must name this relay: info.relay_url (same scheme, host, port and path; host case, default port, trailing slash and query do not matter), else ws:// or wss:// with the request's Host and [network] path. Behind a proxy that changes the path, set info.relay_url.",
      reloadable: true,
    }),
    min_pow_difficulty: key({
      type: "int",
      default: 0,
      min: 0,
      max: 256,
      doc: "NIP-13: refuse events whose id has fewer leading zero bits (or whose committed target is lower); 0 = off.",
      reloadable: true,
    }),
    expiration_sweep_seconds: key({
      type: "int",
      default: 60,
      min: 1,
      doc: "NIP-40: how often expired events are deleted (they are never served after expiring, swept or not).",
      reloadable: true,
    }),
    write_policy_plugin: key({
      type: "string",
      default: "",
      doc: "strfry-compatible write-policy plugin (strfry: relay.writePolicy.plugin): a command run with /bin/sh -c that judges each new, valid event before it is stored; a path without spaces is restarted when the file changes. Empty = none. See docs/plugins.md.",
      reloadable: true,
    }),
    write_policy_timeout_ms: key({
      type: "int",
      default: 5000,
      min: 10,
      max: 600000,
      doc: "How long the write-policy plugin may take to answer; then the event gets OK false error: and the plugin is restarted.",
      reloadable: true,
    }),
    watch_config: key({
      type: "bool",
      default: false,
      doc: "Reload the --config file when it changes (as on SIGHUP), half a second after the last write.",
      reloadable: true,
    }),
  },
  limits: {
    max_message_bytes: key({
      type: "int",
      default: 128 * KiB,
      min: 1024,
      max: 64 * MiB,
      doc: "Largest websocket message decoded (NIP-11 max_message_length). Larger EVENTs get OK false (REQs CLOSED); messages over 2x this (at least 256 KiB) close the connection with 1009.",
      reloadable: true,
    }),
    max_subscriptions: key({
      type: "int",
      default: 50,
      min: 1,
      max: 10000,
      doc: "Open subscriptions per connection; one more gets CLOSED.",
      reloadable: true,
    }),
    max_filters: key({ type: "int", default: 20, min: 1, max: 1000, doc: "Filters per REQ or COUNT.", reloadable: true }),
    max_filter_values: key({
      type: "int",
      default: 1000,
      min: 1,
      max: 100000,
      doc: "Values in one filter list (ids, authors, kinds, a tag).",
      reloadable: true,
    }),
    max_limit: key({
      type: "int",
      default: 5000,
      min: 1,
      max: 100000,
      doc: "Clamp for a filter's limit (NIP-11 max_limit).",
      reloadable: true,
    }),
    default_limit: key({
      type: "int",
      default: 500,
      min: 1,
      max: 100000,
      doc: "Limit used when a filter has none (NIP-11 default_limit).",
      reloadable: true,
    }),
    max_subid_length: key({ type: "int", default: 64, min: 1, max: 256, doc: "Longest subscription id.", reloadable: true }),
    max_event_tags: key({ type: "int", default: 2000, min: 1, doc: "Most tags in one event.", reloadable: true }),
    max_content_length: key({ type: "int", default: 64 * KiB, min: 1, doc: "Longest content, in characters.", reloadable: true }),
    max_pending_bytes: key({
      type: "int",
      default: 4 * MiB,
      min: 64 * KiB,
      doc: "Output a slow reader may leave unsent before it is disconnected.",
      reloadable: true,
    }),
    created_at_lower_limit: key({
      type: "int",
      default: 0,
      min: 0,
      doc: "Refuse events whose created_at is more than this many seconds in the past (0 = no limit).",
      reloadable: true,
    }),
    created_at_upper_limit: key({
      type: "int",
      default: 900,
      min: 0,
      doc: "Refuse events whose created_at is more than this many seconds in the future (0 = no limit).",
      reloadable: true,
    }),
    max_negentropy_items: key({
      type: "int",
      default: 100000,
      min: 1,
      doc: "NIP-77: most stored events the negentropy sessions of one connection may cover together; more gets NEG-ERR blocked: (clients sync large sets in time windows).",
      reloadable: true,
    }),
    max_negentropy_items_per_ip: key({
      type: "int",
      default: 200000,
      min: 0,
      doc: "NIP-77: the same for all connections from one IP (an IPv6 /64) together (each item held costs ~72 bytes); 0 = no limit.",
      reloadable: true,
    }),
    max_negentropy_items_total: key({
      type: "int",
      default: 1000000,
      min: 0,
      doc: "NIP-77: the same for all connections together, whatever their addresses (~72 MB at the default); 0 = no limit.",
      reloadable: true,
    }),
    negentropy_idle_seconds: key({
      type: "int",
      default: 60,
      min: 0,
      doc: "NIP-77: a session with no NEG-MSG for this long is closed (NEG-ERR closed:) and its items freed; 0 = never.",
      reloadable: true,
    }),
    max_filter_value_length: key({
      type: "int",
      default: 1024,
      min: 64,
      max: 65536,
      doc: "Longest string in a filter list (a tag value); longer gets CLOSED invalid:. Real tag values (ids, URLs, slugs) are far shorter.",
      reloadable: true,
    }),
    max_filter_bytes_per_connection: key({
      type: "int",
      default: 2 * MiB,
      min: 4 * KiB,
      doc: "Bytes of memory the filters of one connection's live subscriptions may hold, as measured on the heap (each filter ~400 bytes, each value ~160 bytes plus 2 a character, a search ~200 plus ~64 a word: 1,000 authors ~290 KB); a REQ that would hold more gets CLOSED rate-limited:.",
      reloadable: true,
    }),
    max_filter_bytes_per_ip: key({
      type: "int",
      default: 8 * MiB,
      min: 0,
      doc: "The same for all connections from one IP (an IPv6 /64) together; 0 = no limit.",
      reloadable: true,
    }),
    max_values_per_connection: key({
      type: "int",
      default: 20000,
      min: 1,
      doc: "Filter values (ids, authors, kinds, tag values) all live subscriptions of one connection may hold; bounds the live index per connection.",
      reloadable: true,
    }),
    max_counts_per_connection: key({
      type: "int",
      default: 16,
      min: 1,
      doc: "NIP-45: COUNTs one connection may have running at once; more get CLOSED rate-limited: before they take any memory or query time.",
      reloadable: true,
    }),
    max_counts_per_ip: key({
      type: "int",
      default: 48,
      min: 0,
      doc: "NIP-45: the same for all connections from one IP (an IPv6 /64) together; 0 = no limit.",
      reloadable: true,
    }),
    max_auth_pubkeys: key({
      type: "int",
      default: 16,
      min: 1,
      doc: "NIP-42: pubkeys one connection may authenticate as.",
      reloadable: true,
    }),
    max_events_per_req: key({
      type: "int",
      default: 10000,
      min: 1,
      doc: "Most stored events one REQ returns over all its filters (per-filter limits are scaled down to fit).",
      reloadable: true,
    }),
    query_ms_per_second: key({
      type: "int",
      default: 500,
      min: 1,
      doc: "Query time (worker ms, and main-thread ms of NIP-77 reconciliation) a connection may use per second, with bursts up to 20x; past it REQ/COUNT/NEG-OPEN/NEG-MSG get rate-limited:, and a query running when it is spent is stopped.",
      reloadable: true,
    }),
    max_connections: key({
      type: "int",
      default: 0,
      min: 0,
      doc: "Simultaneous websocket connections in all; more are refused with HTTP 503. 0 = the open-files limit less three reserves of limit/16 (64 to 1,024 each: the relay's own files, HTTP connections, headroom); a larger value is lowered to that, with a warning.",
      reloadable: true,
    }),
    max_connections_per_ip: key({
      type: "int",
      default: 1000,
      min: 1,
      doc: "Simultaneous websocket connections from one IP; more are refused with HTTP 429.",
      reloadable: true,
    }),
    max_http_connections_per_ip: key({
      type: "int",
      default: 32,
      min: 1,
      doc: "Linux: connections from one address (IPv6: one /64) that are not websockets (requests still arriving, HTTP requests, idle keep-alives); past it the oldest are closed within about a second. trusted_proxies are exempt.",
      reloadable: true,
    }),
    max_write_queue_bytes: key({
      type: "int",
      default: 16 * MiB,
      min: 64 * KiB,
      doc: "Events waiting for the writer or in its batches in flight, in bytes of their JSON, over all senders; past it an EVENT gets `error:` at once (each is also held parsed: 2-3x this in memory).",
      reloadable: true,
    }),
    max_write_queue_bytes_per_ip: key({
      type: "int",
      default: 2 * MiB,
      min: 0,
      doc: "The same for the events of one IP (an IPv6 /64); past it that IP's EVENTs get `rate-limited:` while others' are still taken. The queue takes its batches round-robin by IP. Addresses not charged to [rate_limits] (exempt_private_addresses) share the whole queue. 0 = no share.",
      reloadable: true,
    }),
    max_queued_message_bytes_per_connection: key({
      type: "int",
      default: 4 * MiB,
      min: 0,
      doc: "Messages of one connection waiting for its address's turn on the main thread (an address whose messages took more than a few ms in this event-loop turn waits, so others' are handled between). Past it its messages are refused (`rate-limited:`; an EVENT gets its OK false, a REQ CLOSED). 0 = no bound.",
      reloadable: true,
    }),
    max_queued_message_bytes_per_ip: key({
      type: "int",
      default: 16 * MiB,
      min: 0,
      doc: "The same for all connections of one IP (an IPv6 /64). 0 = no bound.",
      reloadable: true,
    }),
    max_queued_message_bytes: key({
      type: "int",
      default: 64 * MiB,
      min: 0,
      doc: "The same for all addresses together; past it the messages that would wait are refused (`rate-limited:`). Messages of an address within its turn never wait. 0 = no bound.",
      reloadable: true,
    }),
    message_timeout_seconds: key({
      type: "int",
      default: 15,
      min: 0,
      max: 600,
      doc: "Linux: a websocket message that has begun to arrive (a frame dripped byte by byte, fragments that never end) and has not completed after about this long closes its connection (1008). Bun assembles messages out of sight; the relay sees them through the kernel's count of bytes received. 0 = no timeout. See docs/deploy.md, Unfinished messages.",
      reloadable: true,
    }),
    max_partial_bytes_per_ip: key({
      type: "int",
      default: 4 * MiB,
      min: 0,
      doc: "Linux: bytes of unfinished websocket messages the connections of one address (IPv6: one /64) may hold together; past it those holding the most are closed (1009) within about a second. 0 = no limit.",
      reloadable: true,
    }),
    max_partial_bytes: key({
      type: "int",
      default: 64 * MiB,
      min: 0,
      doc: "Linux: the same for all connections together, whatever their addresses; past it the connections holding the most are closed. 0 = no limit.",
      reloadable: true,
    }),
    inflated_bytes_per_ip_per_second: key({
      type: "int",
      default: 1 * MiB,
      min: 0,
      doc: "[network] compression: bytes the compressed messages of one address (IPv6: one /64) may inflate to per second, with bursts of 8 s worth. Past it the address's compressed connections are closed (1008) and its new connections are not offered compression for 10 minutes: Bun inflates a message before the relay sees it, so a frame of 1 KB can cost a megabyte. 0 = no limit.",
      reloadable: true,
    }),
    max_pending_events: key({
      type: "int",
      default: 1000,
      min: 1,
      doc: "EVENTs one connection may have in flight (verifying or writing); more get rate-limited.",
      reloadable: true,
    }),
  },
  authorization: {
    pubkey_allowlist: key({
      type: "string[]",
      default: [],
      ...HEX64,
      doc: "If not empty, only these pubkeys (hex) may publish. While an admission model is on ([pay_to_relay], [verified_users] mode = enabled, [web_of_trust], [membership]) they are admitted free (the manual basis) beside those the models admit, and the list no longer makes the relay allow-only.",
      reloadable: true,
    }),
    pubkey_denylist: key({ type: "string[]", default: [], ...HEX64, doc: "Pubkeys (hex) that may not publish.", reloadable: true }),
    kind_allowlist: key({ type: "int[]", default: [], ...KIND, doc: "If not empty, only these kinds are accepted.", reloadable: true }),
    kind_denylist: key({ type: "int[]", default: [], ...KIND, doc: "Kinds that are refused.", reloadable: true }),
    restricted_read_kinds: key({
      type: "int[]",
      default: [4, 1059, 21059],
      ...KIND,
      doc: "NIP-17/59/04: events of these kinds are served (stored or live) only to a connection authenticated as their author or a p-tagged recipient.",
      reloadable: true,
    }),
    read: key({
      type: "string",
      default: "everyone",
      oneOf: ["everyone", "members"],
      doc: "Who may read: everyone, or members: only connections authenticated (NIP-42) as an admitted pubkey (any enabled admission model, the allow lists, [admin] pubkeys). A REQ for restricted_read_kinds alone is still answered to their recipients.",
      reloadable: false,
    }),
    accept_dms_to_members: key({
      type: "bool",
      default: true,
      doc: "While an admission model is on, events of restricted_read_kinds (DMs, gift wraps) that p-tag an admitted pubkey are accepted from anyone (gift wraps come from throwaway keys): the relay is its members' inbox. Not to the relay's key or [admin] pubkeys (public), nor p-tagging their own author, nor with more than 2 p tags.",
      reloadable: true,
    }),
  },
  nips: {
    nip09: key({ type: "bool", default: true, doc: "Deletion requests (kind 5) delete the author's referenced events.", reloadable: true }),
    nip40: key({ type: "bool", default: true, doc: "Expiration tags: expired events are refused, hidden and swept.", reloadable: true }),
    nip45: key({ type: "bool", default: true, doc: "COUNT, with HyperLogLog for tag filters.", reloadable: true }),
    nip50: key({ type: "bool", default: true, doc: "Full-text search (the filter's search field).", reloadable: true }),
    nip50_max_terms: key({
      type: "int",
      default: 32,
      min: 1,
      max: 64,
      doc: "Most words in one search; a search with more is refused (invalid:). Every word is another index a search reads.",
      reloadable: true,
    }),
    nip62: key({
      type: "bool",
      default: true,
      doc: "Requests to vanish (kind 62) naming this relay delete all of a pubkey's events.",
      reloadable: true,
    }),
    nip70: key({
      type: "bool",
      default: true,
      doc: 'Protected events: accepted from their authenticated author. Off: every event with ["-"] is refused.',
      reloadable: true,
    }),
    nip77: key({ type: "bool", default: true, doc: "Negentropy set reconciliation (NEG-OPEN / NEG-MSG / NEG-CLOSE).", reloadable: true }),
  },
  admin: {
    pubkeys: key({
      type: "string[]",
      default: [],
      ...HEX64,
      doc: "NIP-86: pubkeys (hex) that may call the management API (HTTP POST on the relay URL, Content-Type application/nostr+json+rpc, signed with NIP-98) and use the /admin page. Empty = every call is refused (401).",
      reloadable: true,
    }),
    ban_deletes_events: key({
      type: "bool",
      default: true,
      doc: "NIP-86 banpubkey also takes the pubkey's stored events away: hidden at once, deleted after ban_retention (off: they stay served, only new ones are refused).",
      reloadable: true,
    }),
    ban_retention: key({
      type: "string",
      default: "30 days",
      pattern: DURATION,
      patternDoc: 'a duration, e.g. "30 days", "1 week", "0s"',
      doc: "What banpubkey (with ban_deletes_events) and banevent take away is hidden from every read (REQ, COUNT, NIP-77, search, export) for this long, then deleted; unbanpubkey or allowevent before then serves it all again. 0s: deleted at once.",
      reloadable: true,
    }),
    auth_window_seconds: key({
      type: "int",
      default: 60,
      min: 5,
      max: 3600,
      doc: "NIP-98: how far a token's created_at may be from now; a token is accepted once.",
      reloadable: true,
    }),
  },
  metrics: {
    enabled: key({ type: "bool", default: true, doc: "Serve Prometheus metrics at /metrics.", reloadable: true }),
    token: key({
      type: "string",
      default: "",
      doc: "If set, /metrics requires the header Authorization: Bearer <token> (from any address).",
      reloadable: true,
    }),
    public: key({
      type: "bool",
      default: false,
      doc: "Serve /metrics without a token to anyone. Off (and no token): only to loopback peers (127.0.0.0/8, ::1) whose request came through no proxy (no Forwarded, X-Forwarded-For, X-Real-IP or remote_ip_header); others get 403.",
      reloadable: true,
    }),
  },
  log: {
    level: key({
      type: "string",
      default: "info",
      oneOf: LOG_LEVELS,
      doc: "Least severe lines written: error, warn, info (start, stop, reloads, refusals, changes) or debug (also each admin call that succeeded and the figures of periodic checks). --log-level wins.",
      reloadable: true,
    }),
    format: key({
      type: "string",
      default: "text",
      oneOf: LOG_FORMATS,
      doc: 'text: lines for a person. json: one object a line, {"time", "level", "msg", ...}, for journald and Loki (docs/operations.md, Logs). --log-format wins.',
      reloadable: true,
    }),
  },
  rate_limits: {
    connections_per_minute: perMinute(120, "New websocket connections from one IP", RATE_NOTE),
    connections_burst: burst(60, "new connections from one IP"),
    events_per_minute: perMinute(600, "EVENTs from one IP"),
    events_burst: burst(200, "EVENTs from one IP"),
    reqs_per_minute: perMinute(1200, "REQs from one IP"),
    reqs_burst: burst(400, "REQs from one IP"),
    counts_per_minute: perMinute(600, "COUNTs (NIP-45) from one IP"),
    counts_burst: burst(200, "COUNTs from one IP"),
    neg_opens_per_minute: perMinute(120, "NEG-OPENs (NIP-77) from one IP"),
    neg_opens_burst: burst(60, "NEG-OPENs from one IP"),
    auths_per_minute: perMinute(
      240,
      "NIP-42 AUTH messages from one IP (per IP only: an AUTH's pubkey is not trusted before its signature is checked). A client AUTHs once per connection, or once per pubkey it signs in as; " +
        "each AUTH costs a signature check, so a flood of them is refused before its event is even read, and a connection with 64 such refusals is closed (1008)",
    ),
    auths_burst: burst(120, "AUTH messages from one IP"),
    query_ms_per_minute: perMinute(
      60_000,
      "Milliseconds of query time (reader workers running REQ, COUNT, NEG-OPEN) for all connections from one IP (an IPv6 /64) together, on top of each connection's [limits] query_ms_per_second; a query still running when it is spent is stopped. 60,000 = one core",
    ),
    query_ms_burst: burst(20_000, "milliseconds of query time from one IP"),
    negentropy_ms_per_minute: perMinute(
      3_000,
      "Milliseconds of main-thread NIP-77 work for one IP: parsing NEG-OPEN and NEG-MSG frames, handing them to the reader worker that keeps the session and sending its replies (with Postgres, also building the index and reconciling). Past it NEG-OPEN and NEG-MSG get NEG-ERR rate-limited:",
    ),
    negentropy_ms_burst: burst(100, "milliseconds of reconciliation from one IP"),
    pubkey_events_per_minute: perMinute(300, "EVENTs from connections authenticated (NIP-42) as one pubkey, over all its IPs"),
    pubkey_events_burst: burst(100, "EVENTs per authenticated pubkey"),
    pubkey_reqs_per_minute: perMinute(1200, "REQs from connections authenticated as one pubkey"),
    pubkey_reqs_burst: burst(400, "REQs per authenticated pubkey"),
    pubkey_counts_per_minute: perMinute(600, "COUNTs from connections authenticated as one pubkey"),
    pubkey_counts_burst: burst(200, "COUNTs per authenticated pubkey"),
    pubkey_neg_opens_per_minute: perMinute(120, "NEG-OPENs from connections authenticated as one pubkey"),
    pubkey_neg_opens_burst: burst(60, "NEG-OPENs per authenticated pubkey"),
    exempt_private_addresses: key({
      type: "bool",
      default: true,
      doc:
        "Client addresses that are loopback (127.0.0.0/8, ::1), private (10/8, 172.16/12, 192.168/16, fc00::/7) or link-local (169.254/16, fe80::/10) " +
        "are not charged to the per-IP buckets of connections, EVENTs, REQs, COUNTs, NEG-OPENs and AUTHs: behind a reverse proxy without remote_ip_header every client " +
        "has the proxy's address, and one bucket would throttle the whole relay. Behind a trusted proxy with [network] remote_ip_header the client's own address " +
        "is the one charged. Per-pubkey buckets, query time and negentropy per address, and the [limits] per-IP caps apply to every address. Off: private addresses are limited like any other.",
      reloadable: true,
    }),
  },
  groups: {
    enabled: key({
      type: "bool",
      default: false,
      doc: "NIP-29 relay-based groups: events with an h tag belong to a group whose members, roles and flags this relay keeps and enforces, and whose metadata (kinds 39000-39005) it signs with the relay key. Off: h tags mean nothing here.",
      reloadable: false,
    }),
    creators: key({
      type: "string[]",
      default: ["anyone"],
      pattern: /^(anyone|admins|[0-9a-f]{64})$/,
      patternDoc: '"anyone", "admins" or 64 lowercase hex pubkeys',
      scalarOk: true,
      doc: 'Who may create a group (kind 9007; authenticated as its author): "anyone", "admins" (the [admin] pubkeys) or listed pubkeys (hex); a single string is a one-item list.',
      reloadable: true,
    }),
    max_groups: key({
      type: "int",
      default: 100_000,
      min: 0,
      doc: "Most groups this relay hosts, deleted ones included (their ids stay taken, in memory too); a create past it is refused (blocked:).",
      reloadable: true,
    }),
    max_groups_per_pubkey: key({
      type: "int",
      default: 10,
      min: 0,
      doc: "Most groups one pubkey may have: those it created that live, plus those it deleted (9008), so a create-and-delete loop stops here.",
      reloadable: true,
    }),
    creates_per_address_per_hour: key({
      type: "int",
      default: 10,
      min: 0,
      doc: "Groups (kind 9007) one client address (an IPv6 /64) may create per hour, on average, in a burst of as many; past it `rate-limited:`. Fresh keys cost nothing, so max_groups_per_pubkey alone lets one address fill max_groups with private groups. Addresses [rate_limits] does not charge (exempt_private_addresses), [admin] pubkeys and the relay's own key are not limited. 0 = unlimited.",
      reloadable: true,
    }),
    max_members_per_group: key({
      type: "int",
      default: 10_000,
      min: 1,
      doc: "Most members of one group; a join or put-user past it is refused (blocked: group is full). Also the most removed pubkeys (9001) a group keeps: a removal past it is refused (blocked:) until a 9000 puts some back.",
      reloadable: true,
    }),
    default_kinds: key({
      type: "int[]",
      default: [],
      ...KIND,
      doc: "Kinds a group without a supported_kinds tag accepts; empty = every kind.",
      reloadable: true,
    }),
    late_publication_seconds: key({
      type: "int",
      default: 3600,
      min: 0,
      doc: "A group event (h tag) whose created_at is more than this many seconds in the past is refused (invalid:); 0 = off.",
      reloadable: true,
    }),
    previous_window: key({
      type: "int",
      default: 100,
      min: 50,
      max: 100_000,
      doc: "Event ids kept per group for checking timeline references (previous tags).",
      reloadable: true,
    }),
    max_invites_per_group: key({
      type: "int",
      default: 100,
      min: 0,
      doc: "Most invite codes (kind 9009) one group keeps.",
      reloadable: true,
    }),
    max_pins: key({ type: "int", default: 50, min: 0, doc: "Most pins (kind 9010) one group keeps.", reloadable: true }),
    max_members_listed: key({
      type: "int",
      default: 1000,
      min: 1,
      doc: "Most members the relay's member list (kind 39002) names: admins and moderators first, then the newest members (NIP-29 allows a subset).",
      reloadable: true,
    }),
    former_relay_keys: key({
      type: "string[]",
      default: [],
      ...HEX64,
      doc: "Pubkeys (hex) of relay keys this relay used before: a rebuild also trusts the moderation events they signed (a group moved here, a key replaced).",
      reloadable: true,
    }),
  },
  mirror: {
    relays: key({
      type: "string[]",
      default: [],
      pattern: /^wss?:\/\/\S+$/,
      patternDoc: "ws:// or wss:// URLs",
      doc: "Relays whose new events this relay subscribes to and stores as they arrive (as `bunstr stream` does, with the import's checks and signature verification), also sent to its own live subscribers. Reconnects with backoff after a drop. Empty = none.",
      reloadable: false,
    }),
    filter: key({
      type: "string",
      default: "",
      doc: "NIP-01 filter (JSON, without limit) of what is mirrored from every relay in `relays`; empty = everything.",
      reloadable: false,
    }),
  },
  pay_to_relay: {
    enabled: key({
      type: "bool",
      default: false,
      doc: "Paid admission: a pubkey pays admission_cost sats over Lightning (the /join page) before it may publish. Needs node_url and api_secret (LNBits) or rune_path (ClnRest).",
      reloadable: false,
    }),
    processor: key({
      type: "string",
      default: "LNBits",
      oneOf: ["LNBits", "ClnRest"],
      doc: "The Lightning node's API.",
      reloadable: false,
    }),
    admission_cost: key({ type: "int", default: 4200, min: 0, doc: "Sats a pubkey pays once to be admitted.", reloadable: true }),
    cost_per_event: key({
      type: "int",
      default: 0,
      min: 0,
      doc: "Sats charged per stored event of a pubkey admitted only by payment, from a balance topped up at /join (0 = none).",
      reloadable: true,
    }),
    node_url: key({
      type: "string",
      default: "",
      pattern: /^(https?:\/\/\S+)?$/,
      patternDoc: "an http:// or https:// URL",
      doc: "Base URL of the Lightning node's API (LNbits or CLN's clnrest).",
      reloadable: false,
    }),
    api_secret: key({
      type: "string",
      default: "",
      doc: "LNbits: the wallet's invoice/read key (never logged or shown).",
      reloadable: false,
    }),
    rune_path: key({
      type: "string",
      default: "",
      doc: "ClnRest: a file holding the CLN rune (read at start).",
      reloadable: false,
    }),
    terms_message: key({
      type: "string",
      default: 'This service (and supporting services) are provided "as is", without warranty of any kind, express or implied.',
      doc: "Terms shown on the /join page.",
      reloadable: true,
    }),
    sign_ups: key({
      type: "bool",
      default: true,
      doc: "New admissions are taken (false: only those already admitted may publish).",
      reloadable: true,
    }),
    invoice_expiry_seconds: key({
      type: "int",
      default: 3600,
      min: 60,
      max: 86_400,
      doc: "How long an invoice may be paid.",
      reloadable: true,
    }),
    poll_seconds: key({
      type: "int",
      default: 30,
      min: 1,
      max: 3600,
      doc: "How often open invoices are checked with the node (a paid invoice is found without a webhook).",
      reloadable: true,
    }),
    webhook_url: key({
      type: "string",
      default: "",
      doc: "URL the node calls when an invoice is paid; empty = info.relay_url (http form) + lnbits.",
      reloadable: true,
    }),
    node_timeout_ms: key({
      type: "int",
      default: 10_000,
      min: 100,
      max: 60_000,
      doc: "Time allowed for one call to the Lightning node.",
      reloadable: true,
    }),
    max_open_invoices: key({
      type: "int",
      default: 10_000,
      min: 1,
      doc: "Most unpaid invoices at once; past it /join answers 503.",
      reloadable: true,
    }),
    join_attempts_per_hour: key({
      type: "int",
      default: 20,
      min: 1,
      doc: "Invoices one address group may have created per hour (past it 429).",
      reloadable: true,
    }),
  },
  verified_users: {
    mode: key({
      type: "string",
      default: "disabled",
      oneOf: ["disabled", "passive", "enabled"],
      doc: "NIP-05 verified writers: enabled = only pubkeys whose kind 0 names a NIP-05 address that checks out may publish; passive = check and record only; disabled = nothing.",
      reloadable: false,
    }),
    domain_whitelist: key({
      type: "string[]",
      default: [],
      ...HOST,
      doc: "If not empty, only NIP-05 addresses of these domains are verified.",
      reloadable: true,
    }),
    domain_blacklist: key({
      type: "string[]",
      default: [],
      ...HOST,
      doc: "NIP-05 addresses of these domains are never verified.",
      reloadable: true,
    }),
    verify_expiration: key({
      type: "string",
      default: "1 week",
      pattern: DURATION_60S,
      patternDoc: 'a duration of at least 60 s, e.g. "1 week", "24 hours"',
      doc: "A verification admits for this long after its last successful check.",
      reloadable: true,
    }),
    verify_update_frequency: key({
      type: "string",
      default: "24 hours",
      pattern: DURATION_60S,
      patternDoc: 'a duration of at least 60 s, e.g. "1 week", "24 hours"',
      doc: "How often a verified address is checked again.",
      reloadable: true,
    }),
    max_consecutive_failures: key({
      type: "int",
      default: 20,
      min: 1,
      doc: "Checks that failed in a row before an address is no longer checked (until a new kind 0).",
      reloadable: true,
    }),
    http_loopback: key({
      type: "bool",
      default: false,
      doc: "For tests only: addresses at 127.0.0.1, localhost or [::1] are fetched over http (and loopback addresses allowed).",
      reloadable: true,
    }),
    fetch_timeout_ms: key({
      type: "int",
      default: 5000,
      min: 100,
      max: 30_000,
      doc: "Time allowed for one nostr.json fetch (headers and body).",
      reloadable: true,
    }),
    max_response_bytes: key({
      type: "int",
      default: 64 * KiB,
      min: KiB,
      max: MiB,
      doc: "Largest nostr.json read; a longer one fails the check.",
      reloadable: true,
    }),
    domain_interval_ms: key({
      type: "int",
      default: 1000,
      min: 0,
      doc: "Least time between two fetches from one domain.",
      reloadable: true,
    }),
  },
  web_of_trust: {
    enabled: key({
      type: "bool",
      default: false,
      doc: "Only the owner's web of trust may publish: the seeds and whom they follow (kind 3), to depth.",
      reloadable: false,
    }),
    seeds: key({
      type: "string[]",
      default: [],
      ...HEX64,
      doc: "Pubkeys (hex) the web starts from; empty = info.pubkey.",
      reloadable: true,
    }),
    depth: key({ type: "int", default: 1, min: 1, max: 2, doc: "1: whom the seeds follow; 2: and whom they follow.", reloadable: true }),
    min_followers: key({
      type: "int",
      default: 1,
      min: 1,
      doc: "Depth 2: followers in the web a pubkey needs to be in it.",
      reloadable: true,
    }),
    refresh_seconds: key({
      type: "int",
      default: 3600,
      min: 60,
      doc: "How often the web is rebuilt (and fetched from relays).",
      reloadable: true,
    }),
    relays: key({
      type: "string[]",
      default: [],
      pattern: /^wss?:\/\/\S+$/,
      patternDoc: "ws:// or wss:// URLs",
      doc: "Relays the follow lists are also fetched from.",
      reloadable: true,
    }),
    max_pubkeys: key({
      type: "int",
      default: 200_000,
      min: 1000,
      max: 2_000_000,
      doc: "Most pubkeys in the web (depth 1 first).",
      reloadable: true,
    }),
  },
  membership: {
    enabled: key({
      type: "bool",
      default: false,
      doc: "NIP-43: only members may publish; members join with an invite code (kind 28934) and the relay publishes its member list (13534).",
      reloadable: false,
    }),
    invites_per_member: key({
      type: "int",
      default: 0,
      min: 0,
      doc: "Invite codes each member may issue (0 = only admins issue them).",
      reloadable: true,
    }),
    invite_expiry_seconds: key({ type: "int", default: 604_800, min: 60, doc: "How long an invite code may be used.", reloadable: true }),
    request_window_seconds: key({
      type: "int",
      default: 600,
      min: 1,
      doc: "A join or leave request must be created within this many seconds of now.",
      reloadable: true,
    }),
    max_members_listed: key({
      type: "int",
      default: 1000,
      min: 1,
      doc: "Most members the relay's member list (13534) names.",
      reloadable: true,
    }),
  },
} as const satisfies Record<string, Record<string, KeySpec>>;

type Schema = typeof schema;
export type Config = {
  -readonly [S in keyof Schema]: { -readonly [K in keyof Schema[S]]: Schema[S][K] extends KeySpec<infer T> ? TypeOf<T> : never };
};
export type { KeySpec };

/** nostr-rs-relay keys that mean the same as ours. */
export const aliases: Record<string, string> = {
  "network.address": "network.host",
  "info.relay_icon": "info.icon",
  "limits.max_ws_message_bytes": "limits.max_message_bytes",
  "limits.event_kind_blacklist": "authorization.kind_denylist",
  "limits.event_kind_allowlist": "authorization.kind_allowlist",
  "authorization.pubkey_whitelist": "authorization.pubkey_allowlist",
  "options.reject_future_seconds": "limits.created_at_upper_limit",
  "database.connection": "database.postgres_url",
};

export function defaults(): Config {
  const out: Record<string, Record<string, unknown>> = {};
  for (const [section, keys] of Object.entries(schema)) {
    out[section] = {};
    for (const [name, spec] of Object.entries(keys)) out[section][name] = structuredClone((spec as KeySpec).default);
  }
  return out as Config;
}

/** Config lists as sets, built once per list (a reload replaces the array, and so the set). */
const sets = new WeakMap<readonly unknown[], Set<unknown>>();
export function setOf<T>(list: readonly T[]): Set<T> {
  let s = sets.get(list);
  if (!s) sets.set(list, (s = new Set(list)));
  return s as Set<T>;
}
