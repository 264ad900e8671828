// Balances of pubkeys that pay per event (admitted only by payment while cost_per_event > 0). The
// admit pipeline reserves the cost after an event's signature is checked (a forged event never
// touches a balance) and settles once its outcome is known: charged when stored, released
// otherwise. A paid top-up is credited in the store with its invoice's settle (payments.ts), never
// only here. Two ways to keep them:
// - one process (SQLite): in memory, loaded at start; reservations counted per pubkey, so a burst
//   in flight cannot overdraw; charges reach the store as deltas every 5 s and at shutdown: a crash
//   loses at most 5 s of charges, in the user's favour.
// - shared by nodes (Postgres: the store has chargeBalance): the database is the balance. Each
//   reserve takes the cost there in one conditional UPDATE (no node can overdraw, every node sees
//   every credit); an event not stored gets its cost back as a delta, written at once.
import { log } from "../log.ts";
import { refuse, type Refusal } from "../protocol/reasons.ts";
import type { AdmissionStore } from "../store/types.ts";

export type BalanceStore = Pick<AdmissionStore, "balances" | "addBalances" | "chargeBalance">;

const UNCHECKED = refuse("error", "your balance could not be checked, try again");

export interface LedgerOptions {
  /** Sats per stored event now (read at each use: a reload changes it). */
  cost: () => number;
  /** Whether `pubkey` pays per event: admitted by payment and by nothing else. */
  payer: (pubkey: string) => boolean;
  /** The refusal for a balance that does not cover the cost (its text lives with the policy). */
  short: (pubkey: string, balance: number, cost: number) => Refusal;
  flushMs?: number;
}

export const LEDGER_FLUSH_MS = 5_000;

export class Ledger {
  private readonly sats = new Map<string, number>();
  /** Events reserved and not yet settled, per pubkey. */
  private readonly held = new Map<string, number>();
  /** Shared: the costs taken from the database for events not yet settled, per pubkey. */
  private readonly taken = new Map<string, number[]>();
  /** Changes not yet written, per pubkey. */
  private readonly deltas = new Map<string, number>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private flushing: Promise<void> | undefined;

  constructor(
    private readonly store: BalanceStore,
    private readonly opts: LedgerOptions,
  ) {}

  /** The balances live in the database, shared by nodes (Postgres). */
  get shared(): boolean {
    return this.store.chargeBalance !== undefined;
  }

  async load(): Promise<void> {
    if (this.shared) return;
    this.sats.clear();
    for (const { pubkey, sats } of await this.store.balances()) this.sats.set(pubkey, sats);
    for (const [pubkey, d] of this.deltas) this.sats.set(pubkey, (this.sats.get(pubkey) ?? 0) + d);
  }

  start(): void {
    this.timer ??= setInterval(() => void this.flush(), this.opts.flushMs ?? LEDGER_FLUSH_MS);
    this.timer.unref?.();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.flush();
  }

  balance(pubkey: string): number {
    return this.sats.get(pubkey) ?? 0;
  }

  /** The balance less what events in flight hold; undefined when shared (only the database knows: reserve asks it). */
  available(pubkey: string): number | undefined {
    if (this.shared) return undefined;
    return this.balance(pubkey) - (this.held.get(pubkey) ?? 0) * this.opts.cost();
  }

  /** Whether `pubkey` pays for its events now. */
  charges(pubkey: string): boolean {
    return this.opts.cost() > 0 && this.opts.payer(pubkey);
  }

  /** Holds one event's cost: a refusal when what is left after the events in flight does not cover it. */
  reserve(pubkey: string): Refusal | undefined | Promise<Refusal | undefined> {
    if (!this.charges(pubkey)) return undefined;
    const cost = this.opts.cost();
    if (this.shared) return this.take(pubkey, cost);
    if (this.balance(pubkey) - (this.held.get(pubkey) ?? 0) * cost < cost) return this.opts.short(pubkey, this.balance(pubkey), cost);
    this.held.set(pubkey, (this.held.get(pubkey) ?? 0) + 1);
    return undefined;
  }

  /** Shared: the cost taken from the database now, or the refusal with the balance it has. */
  private async take(pubkey: string, cost: number): Promise<Refusal | undefined> {
    let r: { charged: boolean; sats: number };
    try {
      r = await this.store.chargeBalance!(pubkey, cost);
    } catch (err) {
      log.error("payments: a balance could not be charged:", err);
      return UNCHECKED;
    }
    if (!r.charged) return this.opts.short(pubkey, r.sats, cost);
    this.taken.set(pubkey, [...(this.taken.get(pubkey) ?? []), cost]);
    return undefined;
  }

  /** The reserved event's outcome: charged when stored, else released. A pubkey with nothing reserved is left alone. */
  settle(pubkey: string, stored: boolean): void {
    const taken = this.taken.get(pubkey);
    if (taken) {
      const cost = taken.pop()!;
      if (taken.length === 0) this.taken.delete(pubkey);
      if (!stored) {
        this.deltas.set(pubkey, (this.deltas.get(pubkey) ?? 0) + cost);
        void this.flush(); // the cost back at once: it was never spent
      }
      return;
    }
    const held = this.held.get(pubkey);
    if (!held) return;
    if (held === 1) this.held.delete(pubkey);
    else this.held.set(pubkey, held - 1);
    if (stored) this.add(pubkey, -this.opts.cost());
  }

  /** A paid top-up, already credited in the store with its invoice's settle: shown here too (one process). */
  credited(pubkey: string, sats: number): void {
    if (!this.shared) this.sats.set(pubkey, this.balance(pubkey) + sats);
  }

  private add(pubkey: string, sats: number): void {
    if (sats === 0) return;
    this.sats.set(pubkey, this.balance(pubkey) + sats);
    this.deltas.set(pubkey, (this.deltas.get(pubkey) ?? 0) + sats);
  }

  /** Writes the deltas; on failure they are kept for the next flush. */
  flush(): Promise<void> {
    if (this.flushing) return this.flushing.then(() => this.flush());
    if (this.deltas.size === 0) return Promise.resolve();
    const batch = [...this.deltas].map(([pubkey, sats]) => ({ pubkey, sats }));
    this.deltas.clear();
    this.flushing = this.store
      .addBalances(batch)
      .catch((err) => {
        for (const { pubkey, sats } of batch) this.deltas.set(pubkey, (this.deltas.get(pubkey) ?? 0) + sats);
        log.error("payments: balances not written, kept for the next flush:", err);
      })
      .finally(() => {
        this.flushing = undefined;
      });
    return this.flushing;
  }
}
