// Issue 33: the admission counters, kept by the registry (registry.metrics) and incremented by the
// engines; rendered for /metrics by observe/metrics.ts (renderAccess), which reads them at a scrape.
// Plain numbers on fixed slots: nothing is built per event.

/** bunstr_admission_refusals_total{basis}: the model whose text was sent. */
type RefusedBasis = "paid" | "verified" | "trusted" | "member";

export class AccessMetrics {
  readonly refusals: Record<RefusedBasis, number> = { paid: 0, verified: 0, trusted: 0, member: 0 };
  /** bunstr_invoices_total{event}: invoices created at the node, paid, expired. */
  readonly invoices = { created: 0, paid: 0, expired: 0 };
  /** bunstr_payment_node_errors_total{call}. */
  readonly nodeErrors = { create: 0, check: 0 };
  /** bunstr_webhooks_total{result}: a check queued, an unknown or settled hash, dropped past the bucket. */
  readonly webhooks = { checked: 0, unknown: 0, dropped: 0 };
  /** bunstr_join_limited_total: invoice creations refused 429. */
  joinLimited = 0;
  /** bunstr_nip05_checks_total{result}. */
  readonly nip05Checks = { verified: 0, mismatch: 0, failed: 0, refused: 0 };
  /** bunstr_nip05_queue: addresses waiting for a check. */
  nip05Queue = 0;
  /** bunstr_wot_graph_pubkeys, _bytes, bunstr_wot_build_seconds: the last graph built. */
  readonly wot = { pubkeys: 0, bytes: 0, buildSeconds: 0 };
  /** bunstr_member_invites_total{result}. */
  readonly memberInvites = { issued: 0, claimed: 0, invalid: 0, expired: 0 };
}
