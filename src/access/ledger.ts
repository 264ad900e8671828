// Balances of pubkeys that pay per event (admitted only by payment while cost_per_event > 0).
// Held in memory, loaded from the `balances` table at start; the admit pipeline reserves the cost
// after an event's signature is checked (a forged event never touches a balance) and settles once
// its outcome is known: charged when stored, released otherwise. Reservations are counted per
// pubkey, so a burst of events in flight cannot overdraw. Charges and credits reach the store as
// deltas every 5 s and at shutdown (additive, so several nodes can flush): a crash loses at most
// 5 s of charges, in the user's favour.
import type { Refusal } from "../protocol/reasons.ts";

export interface BalanceStore {
  balances(): Promise<{ pubkey: string; sats: number }[]>;
  addBalances(deltas: { pubkey: string; sats: number }[]): Promise<void>;
}

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
  /** Changes not yet written, per pubkey. */
  private readonly deltas = new Map<string, number>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private flushing: Promise<void> | undefined;

  constructor(
    private readonly store: BalanceStore,
    private readonly opts: LedgerOptions,
  ) {}

  async load(): Promise<void> {
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

  /** The balance less what events in flight hold. */
  available(pubkey: string): number {
    return this.balance(pubkey) - (this.held.get(pubkey) ?? 0) * this.opts.cost();
  }

  /** Whether `pubkey` pays for its events now. */
  charges(pubkey: string): boolean {
    return this.opts.cost() > 0 && this.opts.payer(pubkey);
  }

  /** Holds one event's cost: a refusal when what is left after the events in flight does not cover it. */
  reserve(pubkey: string): Refusal | undefined {
    if (!this.charges(pubkey)) return undefined;
    const cost = this.opts.cost();
    if (this.available(pubkey) < cost) return this.opts.short(pubkey, this.balance(pubkey), cost);
    this.held.set(pubkey, (this.held.get(pubkey) ?? 0) + 1);
    return undefined;
  }

  /** The reserved event's outcome: charged when stored, else released. A pubkey with nothing reserved is left alone. */
  settle(pubkey: string, stored: boolean): void {
    const held = this.held.get(pubkey);
    if (!held) return;
    if (held === 1) this.held.delete(pubkey);
    else this.held.set(pubkey, held - 1);
    if (stored) this.add(pubkey, -this.opts.cost());
  }

  /** A paid top-up. */
  credit(pubkey: string, sats: number): void {
    this.add(pubkey, sats);
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
        console.error("payments: balances not written, kept for the next flush:", err);
      })
      .finally(() => {
        this.flushing = undefined;
      });
    return this.flushing;
  }
}
