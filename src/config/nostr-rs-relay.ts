// nostr-rs-relay's config keys (its src/config.rs and sample config.toml) that bunstr has no use
// for: its config.toml loads, and these are reported as not used, never as unknown (a typo).
// Its keys with the same meaning here are in schema.ts `aliases`, or are our own key names; those
// with a meaning in another unit or rule are converted (below).

/** One of its keys that sets one of ours, its value converted (`current`: ours as the rest of the file left it). */
interface Conversion {
  to: string;
  convert(value: number, current: unknown): number;
}

/** Applied after every other key of the file, so that `current` does not depend on the order of keys. */
export const nostrRsRelayConversions: Record<string, Conversion> = {
  // Its per-connection EVENT rate, per second averaged over a minute; ours is per IP, per minute.
  "limits.messages_per_sec": { to: "rate_limits.events_per_minute", convert: (v) => Math.round(v * 60) },
  // Its per-connection REQ rate; ours is per IP.
  "limits.subscriptions_per_min": { to: "rate_limits.reqs_per_minute", convert: (v) => v },
  // Its largest EVENT message, under its largest message (max_ws_message_bytes): ours is one limit for both, the smaller.
  "limits.max_event_bytes": {
    to: "limits.max_message_bytes",
    convert: (v, current) => (typeof current === "number" ? Math.min(v, current) : v),
  },
};

/**
 * Its switches for what bunstr always does: NIP-42 AUTH (answered on every connection) and DMs
 * readable only by their authenticated author and recipients ([authorization]
 * restricted_read_kinds). Set to true they mean what bunstr does; false is not followed (ignored).
 */
export const nostrRsRelayAlwaysOn: readonly string[] = ["authorization.nip42_auth", "authorization.nip42_dms"];

export const nostrRsRelayKeys: Record<string, readonly string[]> = {
  info: ["favicon", "relay_page"],
  diagnostics: ["tracing"],
  database: ["min_conn", "max_conn", "connection_write"],
  logging: ["folder_path", "file_prefix"],
  grpc: ["event_admission_server", "restricts_write"],
  network: ["ping_interval", "ping_interval_seconds"],
  limits: [
    "db_conns_per_client",
    "max_blocking_threads",
    "max_ws_frame_bytes",
    "broadcast_buffer",
    "event_persist_buffer",
    "limit_scrapers",
  ],
  // Its pay_to_relay DMs (the /join page replaces them): a warning when set (config/warnings.ts).
  pay_to_relay: ["direct_message", "secret_key"],
  retention: ["max_events", "max_bytes", "persist_days", "whitelist_addresses"],
};
