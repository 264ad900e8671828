// Paid admission: invoices made with the payment node, and pubkeys admitted once the node itself
// says an invoice is paid. Three things lead to that question, all through `check` (coalesced per
// invoice): the webhook (only a hint: its body is never read for a status, so a forged or replayed
// one admits nobody), /join/status (the page turns "paid" without a webhook) and the poller (a
// payment whose webhook never came). Every path into the node is bounded: invoice creations per
// address group (and its /48, and over everyone), open invoices, webhook hints per second, checks
// per invoice, the poller's page. What a payment buys (the admission row, a top-up's credit) is
// written with the invoice's settle, in one store step: no crash leaves a paid invoice without it.
import { paidRow, type InvoiceRow, type PaidEffect } from "../store/types.ts";
import { RateLimiter } from "../policy/rate-limit.ts";
import { log, LogLimiter } from "../log.ts";
import { encodeNpub } from "../nips/nip19.ts";
import type { Ledger } from "./ledger.ts";
import type { AccessMetrics } from "./metrics.ts";
import { HASH, NodeFaults, type NodeCallName, type NodeStatus, type PaymentNode } from "./lightning.ts";

export type Purpose = InvoiceRow["purpose"];

/** What payments need of the store (`Store.admission`). */
export type InvoiceStore = Pick<
  import("../store/types.ts").AdmissionStore,
  "putInvoice" | "invoice" | "openInvoice" | "openInvoices" | "dueInvoices" | "checkedInvoice" | "settleInvoice" | "reconcilePaid"
>;

/** What payments need of the registry. */
export interface Admitter {
  /**
   * Whether `pubkey` needs no admission invoice: admitted by payment, or free by the config allow
   * list. Never the other bases: /join/status and /join/invoice answer anyone, and must not tell
   * who is a member, trusted or verified.
   */
  admitted(pubkey: string): boolean;
  /** Shows a paid admission already stored (with its invoice's settle): the registry's Map. */
  admitPaid(pubkey: string, evidence: { payment_hash: string; amount_sats: number; paid_at: number }): Promise<void>;
}

/** The [pay_to_relay] keys payments read, at each use (a reload changes the reloadable ones). */
export interface PayKeys {
  admission_cost: number;
  sign_ups: boolean;
  invoice_expiry_seconds: number;
  poll_seconds: number;
  max_open_invoices: number;
  join_attempts_per_hour: number;
}

export interface PaymentsOptions {
  node: PaymentNode;
  store: InvoiceStore;
  admitter: Admitter;
  ledger: Ledger;
  keys: () => PayKeys;
  /** Where the node posts its webhook, read at each invoice; undefined: none (CLN, or no relay_url). */
  webhookUrl?: () => string | undefined;
  /** The /metrics counters (registry.metrics). */
  metrics?: AccessMetrics;
  now?: () => number;
  /** Milliseconds, for the spacing of checks (tests move it). */
  nowMs?: () => number;
  /** False while another node polls (Store.leader, relay/admission.ts): this one skips its pass. */
  leader?: () => boolean;
}

export type InvoiceAnswer =
  | { kind: "admitted" }
  | { kind: "invoice"; invoice: string; payment_hash: string; amount_sats: number }
  | { kind: "closed" }
  | { kind: "no-top-up" }
  | { kind: "limited"; retryAfterS: number }
  | { kind: "full" }
  | { kind: "node-error" };

/** An invoice with less than this left (or a quarter of invoice_expiry_seconds) is replaced rather than handed out again. */
export const MIN_LEFT_S = 60;
/** How long after its expiry an unpaid invoice is still asked about (a payment made at the last second). */
export const EXPIRY_GRACE_S = 120;
/** One node check per invoice at most this often, whoever asks. */
export const CHECK_EVERY_MS = 2_000;
/** Webhook hints turned into checks, per second, over all senders. */
export const WEBHOOK_CHECKS_PER_S = 20;
/** The poller's page and how many of its checks run at once. */
export const POLL_PAGE = 100;
export const POLL_CONCURRENCY = 4;
/** Address groups remembered by the join bucket (least recently used dropped). */
export const JOIN_GROUPS = 10_000;
/** An IPv6 /48 (65,536 /64 groups, often one holder) may make this many times join_attempts_per_hour. */
export const WIDE_JOIN_FACTOR = 4;
/**
 * New invoices per minute over every asker: the bound that holds when the address groups are
 * many (a /32 of IPv6 is 65,536 /48s). At most 3,600 an hour, so with the default 1 h expiry the
 * open invoices stay under max_open_invoices' 10,000.
 */
export const INVOICES_PER_MINUTE = 60;

/** The coarser group of an address group: an IPv6 /64 -> its /48; an IPv4 address stays itself. */
export function wideGroup(group: string): string {
  const v6 = /^([0-9a-f]{1,4}):([0-9a-f]{1,4}):([0-9a-f]{1,4}):[0-9a-f]{1,4}::\/64$/i.exec(group);
  return v6 ? `${v6[1]}:${v6[2]}:${v6[3]}::/48` : group;
}
/** /join/status asks per address group and minute (each may start a node check, coalesced per invoice). */
export const STATUS_PER_MINUTE = 60;

export class Payments {
  readonly faults: NodeFaults;
  private readonly creating = new Map<string, Promise<InvoiceAnswer>>();
  private readonly checking = new Map<string, Promise<NodeStatus["state"] | undefined>>();
  private readonly checkedAt = new Map<string, number>();
  /** Invoice creations: per address group, per /48, and over everyone (keys "n …", "w …", "all"). */
  private readonly joins = new RateLimiter({ maxKeys: 2 * JOIN_GROUPS + 1 });
  private readonly hints = new RateLimiter({ maxKeys: 1 });
  private readonly statusAsks = new RateLimiter({ maxKeys: JOIN_GROUPS });
  private readonly lines = new LogLimiter();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private polling: Promise<void> | undefined;
  private stopped = false;
  private loaded = false;
  private readonly now: () => number;
  private readonly nowMs: () => number;

  constructor(private readonly o: PaymentsOptions) {
    this.now = o.now ?? (() => Math.floor(Date.now() / 1000));
    this.nowMs = o.nowMs ?? Date.now;
    this.faults = new NodeFaults(o.node.name, (call) => o.metrics && o.metrics.nodeErrors[call]++);
  }

  /** Writers paying per event are refused "loading" until the balances are read. */
  get ready(): boolean {
    return this.loaded;
  }

  /**
   * The balances read (writers paying per event wait for them), then paid admissions that an
   * earlier bunstr settled without writing the admission with them (it did so in a second step a
   * crash could skip) admitted.
   */
  async load(): Promise<void> {
    await this.o.ledger.load();
    this.loaded = true;
    for (const i of await this.o.store.reconcilePaid(this.now())) {
      log.warn(`payments: invoice ${i.payment_hash} was paid but its admission was missing: admitted now`);
      await this.o.admitter.admitPaid(i.pubkey, {
        payment_hash: i.payment_hash,
        amount_sats: i.amount_sats,
        paid_at: i.paid_at ?? this.now(),
      });
    }
  }

  /** Sats left for a pubkey that pays per event (less what its events in flight hold); else undefined (also when only the database knows). */
  balance(pubkey: string): number | undefined {
    return this.o.ledger.charges(pubkey) ? this.o.ledger.available(pubkey) : undefined;
  }

  /** Polls every poll_seconds until stop(). */
  start(): void {
    this.stopped = false;
    this.o.ledger.start();
    const next = () => {
      if (this.stopped) return;
      this.timer = setTimeout(() => {
        this.polling = (this.o.leader?.() === false ? Promise.resolve() : this.poll())
          .catch((err) => {
            if (this.lines.take("poll")) log.error("payments: the poller could not read the invoices:", err);
          })
          .finally(() => {
            this.polling = undefined;
            next();
          });
      }, this.o.keys().poll_seconds * 1000);
      this.timer.unref?.();
    };
    next();
  }

  /** Stops polling, waits for the calls in flight, writes the balances. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.polling;
    await Promise.allSettled([...this.checking.values(), ...this.creating.values()]);
    await this.o.ledger.stop();
  }

  /**
   * The invoice a pubkey pays: for admission (at admission_cost) when not admitted, or a top-up of
   * `amount` sats when admitted (with `amount`) and charged per event (else it could never be
   * spent). `group` is the asker's address group (policy/ip.ts): a new invoice, and the replacement
   * of one about to expire, take from its bucket of join_attempts_per_hour, its /48's and everyone's.
   */
  invoiceFor(pubkey: string, group: string, amount?: number): Promise<InvoiceAnswer> {
    const admitted = this.o.admitter.admitted(pubkey);
    if (admitted && amount === undefined) return Promise.resolve({ kind: "admitted" });
    if (admitted && !this.o.ledger.charges(pubkey)) return Promise.resolve({ kind: "no-top-up" });
    if (!admitted && !this.o.keys().sign_ups) return Promise.resolve({ kind: "closed" });
    const purpose: Purpose = admitted ? "topup" : "admission";
    const sats = admitted ? amount! : this.o.keys().admission_cost;
    const key = `${purpose}:${pubkey}:${sats}`;
    let p = this.creating.get(key);
    if (!p) {
      p = this.make(pubkey, purpose, sats, group).finally(() => this.creating.delete(key));
      this.creating.set(key, p);
    }
    return p;
  }

  private async make(pubkey: string, purpose: Purpose, sats: number, group: string): Promise<InvoiceAnswer> {
    const now = this.now();
    const open = await this.o.store.openInvoice(pubkey, purpose, now);
    const keep = Math.min(MIN_LEFT_S, Math.floor(this.o.keys().invoice_expiry_seconds / 4));
    if (open && open.amount_sats === sats && open.expires_at - now > keep) return shown(open);
    // Anything else costs a join attempt first: a node call, or (admission_cost 0) an admission row.
    const limited = this.takeJoin(group);
    if (limited) return limited;
    // An open invoice about to expire is replaced; it is asked about once more first (paid at the
    // last minute?), through the coalesced check (one node call per invoice per CHECK_EVERY_MS).
    if (open && open.amount_sats === sats) {
      const state = await this.check(open.payment_hash);
      if (state === "paid") return purpose === "admission" ? { kind: "admitted" } : this.make(pubkey, purpose, sats, group);
    }
    if (sats === 0) {
      await this.o.admitter.admitPaid(pubkey, { payment_hash: "", amount_sats: 0, paid_at: now });
      return { kind: "admitted" };
    }
    if ((await this.o.store.openInvoices(now)) >= this.o.keys().max_open_invoices) return { kind: "full" };
    const expiry = this.o.keys().invoice_expiry_seconds;
    const npub = encodeNpub(pubkey);
    const memo = `bunstr ${purpose === "admission" ? "admission" : "top-up"} ${npub.slice(0, 12)}…${npub.slice(-6)}`;
    let made: { bolt11: string; payment_hash: string };
    try {
      made = await this.o.node.create(sats, memo, this.o.webhookUrl?.(), expiry);
    } catch (err) {
      this.fault("create", err);
      return { kind: "node-error" };
    }
    const row: InvoiceRow = {
      payment_hash: made.payment_hash,
      pubkey,
      purpose,
      amount_sats: sats,
      bolt11: made.bolt11,
      status: "unpaid",
      created_at: now,
      expires_at: now + expiry,
      paid_at: null,
      checked_at: null,
    };
    await this.o.store.putInvoice(row);
    this.count("invoices", "created");
    return shown(row);
  }

  /** A join attempt from `group`: undefined when taken, else the wait (join_attempts_per_hour, its /48's, everyone's). */
  private takeJoin(group: string): InvoiceAnswer | undefined {
    const perHour = this.o.keys().join_attempts_per_hour;
    const wide = WIDE_JOIN_FACTOR * perHour;
    const waitMs = this.joins.take([
      { key: `n ${group}`, rate: { perMinute: perHour / 60, burst: perHour } },
      { key: `w ${wideGroup(group)}`, rate: { perMinute: wide / 60, burst: wide } },
      { key: "all", rate: { perMinute: INVOICES_PER_MINUTE, burst: INVOICES_PER_MINUTE } },
    ]);
    if (waitMs <= 0) return undefined;
    if (this.o.metrics) this.o.metrics.joinLimited++;
    const held = this.lines.take("join-limited");
    if (held)
      log.warn(`payments: join attempts limited for an address group${held.count ? ` (${held.count} more since the last line)` : ""}`);
    return { kind: "limited", retryAfterS: Math.ceil(waitMs / 1000) };
  }

  /**
   * Asks the node about an invoice of the store and acts on the answer; coalesced (one call in
   * flight per invoice, at most one per CHECK_EVERY_MS unless `force`). Resolves with the state
   * acted on, or undefined when skipped, unknown to the store, or the node failed.
   */
  check(hash: string, force = false): Promise<NodeStatus["state"] | undefined> {
    if (!HASH.test(hash)) return Promise.resolve(undefined);
    const inflight = this.checking.get(hash);
    if (inflight) return inflight;
    const at = this.nowMs();
    if (!force && at - (this.checkedAt.get(hash) ?? 0) < CHECK_EVERY_MS) return Promise.resolve(undefined);
    this.checkedAt.set(hash, at);
    if (this.checkedAt.size > 4 * JOIN_GROUPS) for (const [h, t] of this.checkedAt) if (at - t >= CHECK_EVERY_MS) this.checkedAt.delete(h);
    const p = this.ask(hash).finally(() => this.checking.delete(hash));
    this.checking.set(hash, p);
    return p;
  }

  private async ask(hash: string): Promise<NodeStatus["state"] | undefined> {
    const row = await this.o.store.invoice(hash);
    if (!row) return undefined;
    if (row.status !== "unpaid") return row.status;
    let status: NodeStatus;
    try {
      status = await this.o.node.check(hash);
    } catch (err) {
      this.fault("check", err);
      return undefined;
    }
    const now = this.now();
    if (status.state === "paid") {
      if (status.receivedSats !== undefined && status.receivedSats < row.amount_sats) {
        const held = this.lines.take("short");
        if (held) log.warn(`payments: invoice ${hash} paid ${status.receivedSats} of ${row.amount_sats} sats: not admitted`);
        await this.o.store.checkedInvoice(hash, this.now());
        return "unpaid";
      }
      if (await this.o.store.settleInvoice(hash, "paid", now, effectOf(row, now))) await this.paid(row, now);
      return "paid";
    }
    // Not paid by its expiry: no payment can arrive any more (the grace only let a last-second payment be seen).
    const lapsed = status.state === "expired" || now > row.expires_at;
    if (lapsed) {
      if (await this.o.store.settleInvoice(hash, "expired", now)) this.count("invoices", "expired");
      return "expired";
    }
    // Still unpaid: to the back of the poller's queue.
    await this.o.store.checkedInvoice(hash, now);
    return status.state;
  }

  /** The settle wrote what it bought; shown in memory now (a failure here is mended by the next start's load). */
  private async paid(row: InvoiceRow, now: number): Promise<void> {
    this.count("invoices", "paid");
    if (row.purpose === "topup") this.o.ledger.credited(row.pubkey, row.amount_sats);
    else await this.o.admitter.admitPaid(row.pubkey, { payment_hash: row.payment_hash, amount_sats: row.amount_sats, paid_at: now });
  }

  /** Seconds an address group must wait before its next /join/status; 0: it may ask now. */
  statusWait(group: string): number {
    const ms = this.statusAsks.take([{ key: group, rate: { perMinute: STATUS_PER_MINUTE, burst: STATUS_PER_MINUTE } }]);
    return Math.ceil(ms / 1000);
  }

  /**
   * /join/status: whether `pubkey` may write; when not, its open admission invoice is checked
   * (coalesced), so a payment shows without a webhook.
   */
  async status(pubkey: string): Promise<boolean> {
    if (this.o.admitter.admitted(pubkey)) return true;
    const open = await this.o.store.openInvoice(pubkey, "admission", this.now());
    if (!open) return false;
    return (await this.check(open.payment_hash)) === "paid" && this.o.admitter.admitted(pubkey);
  }

  /**
   * POST /lnbits: the body's payment_hash, if any, names an invoice to ask the node about; nothing
   * else of the body is read. The caller answers 200 {} at once whatever happens here.
   */
  webhook(body: string): void {
    let hash: unknown;
    try {
      hash = (JSON.parse(body) as { payment_hash?: unknown })?.payment_hash;
    } catch {
      hash = undefined;
    }
    if (typeof hash !== "string" || !HASH.test(hash)) {
      this.count("webhooks", "unknown");
      return;
    }
    if (this.hints.take([{ key: "webhook", rate: { perMinute: WEBHOOK_CHECKS_PER_S * 60, burst: WEBHOOK_CHECKS_PER_S } }]) > 0) {
      this.count("webhooks", "dropped");
      return;
    }
    void this.check(hash).then(
      (state) => this.count("webhooks", state === undefined ? "unknown" : "checked"),
      () => this.count("webhooks", "unknown"),
    );
  }

  /** One pass of the poller: the unpaid invoices checked longest ago, POLL_CONCURRENCY at a time. */
  async poll(): Promise<void> {
    const rows = await this.o.store.dueInvoices(this.now(), EXPIRY_GRACE_S, POLL_PAGE);
    let i = 0;
    const worker = async () => {
      while (i < rows.length && !this.stopped) await this.check(rows[i++]!.payment_hash, true).catch(() => undefined);
    };
    await Promise.all(Array.from({ length: POLL_CONCURRENCY }, worker));
  }

  private count<F extends "invoices" | "webhooks">(family: F, key: keyof AccessMetrics[F]): void {
    if (this.o.metrics) (this.o.metrics[family][key] as number)++;
  }

  /** A NodeError, or a bug in a client: counted and logged the same way, never thrown at the asker. */
  private fault(call: NodeCallName, err: unknown): void {
    this.faults.record(call, err);
  }
}

/** What a paid invoice buys, written with its settle. */
const effectOf = (row: InvoiceRow, now: number): PaidEffect =>
  row.purpose === "topup" ? { credit: { pubkey: row.pubkey, sats: row.amount_sats } } : { admission: paidRow(row, now) };

const shown = (row: InvoiceRow): InvoiceAnswer => ({
  kind: "invoice",
  invoice: row.bolt11,
  payment_hash: row.payment_hash,
  amount_sats: row.amount_sats,
});
