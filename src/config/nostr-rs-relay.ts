// nostr-rs-relay's config keys (its src/config.rs and sample config.toml) that bunstr has no use
// for: its config.toml loads, and these are reported as not used, never as unknown (a typo).
// Its keys with a meaning here are in schema.ts `aliases`, or are our own key names.

export const nostrRsRelayKeys: Record<string, readonly string[]> = {
  info: ["favicon", "relay_page"],
  diagnostics: ["tracing"],
  database: ["min_conn", "max_conn", "connection", "connection_write"],
  logging: ["folder_path", "file_prefix"],
  grpc: ["event_admission_server", "restricts_write"],
  network: ["ping_interval", "ping_interval_seconds"],
  limits: [
    "messages_per_sec",
    "subscriptions_per_min",
    "db_conns_per_client",
    "max_blocking_threads",
    "max_event_bytes",
    "max_ws_frame_bytes",
    "broadcast_buffer",
    "event_persist_buffer",
    "limit_scrapers",
  ],
  authorization: ["nip42_auth", "nip42_dms"],
  verified_users: [
    "mode",
    "domain_whitelist",
    "domain_blacklist",
    "verify_expiration",
    "verify_update_frequency",
    "max_consecutive_failures",
  ],
  pay_to_relay: [
    "enabled",
    "admission_cost",
    "cost_per_event",
    "node_url",
    "api_secret",
    "terms_message",
    "sign_ups",
    "direct_message",
    "secret_key",
    "processor",
    "rune_path",
  ],
  retention: ["max_events", "max_bytes", "persist_days", "whitelist_addresses"],
};
