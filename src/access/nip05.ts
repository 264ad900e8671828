// NIP-05 verified writers ([verified_users], issue 33): a committed kind 0 naming a `nip05`
// address is checked in the background against the domain's nostr.json, and a match admits the
// author on the `verified` basis until `verify_expiration`; re-checked every
// `verify_update_frequency`. The kind 0 itself is always accepted (policy/admission.ts; nostr-rs-relay
// bug #211: there, the profile that asks to be verified is refused, so nobody new gets verified).
//
// Bounded on every side, as the domains are the public's: one queue entry per pubkey (the newest
// address wins) and at most QUEUE_MAX of them per lane, FETCHES_AT_ONCE fetches in all, one per
// site (nips/nip05.ts siteOf: a wildcard domain's subdomains are one site) at a time and
// `domain_interval_ms` between two starts to a site, each fetch bounded by access/nip05-fetch.ts.
// A flood of kind 0s naming new addresses must not make verified writers lapse (issue 33 review, M2), so
// the re-checks of verified addresses have their own lane, served first, and come first in the
// schedule's page (the store orders it so); new addresses queue at most SITE_MAX per site, and
// what the queue refuses is looked at again RETRY_S later, so the page moves on. What a domain answers decides: a match admits, a mismatch (another
// pubkey, or the name not listed) withdraws the verification at once; a fault (no answer, too
// large, a redirect, an error status, garbage) only counts a failure, so a domain's bad minute
// never drops a verified writer before the verification expires, and after
// `max_consecutive_failures` in a row the address is left alone until its author sends a new kind 0.
import { durationSeconds } from "../config/duration.ts";
import type { Config } from "../config/schema.ts";
import { log, LogLimiter } from "../log.ts";
import {
  addressOfProfile,
  formatAddress,
  hostOf,
  namesMatch,
  type Nip05Address,
  isLoopbackHost,
  parseAddress,
  siteOf,
  wellKnownUrl,
} from "../nips/nip05.ts";
import type { Basis, Nip05State } from "../policy/admission.ts";
import type { NostrEvent } from "../protocol/event.ts";
import type { AdmissionStore, Leadership, Nip05Row } from "../store/types.ts";
import type { Nip05Engine } from "./registry.ts";
import { type FetchLimits, type FetchOutcome, fetchNostrJson } from "./nip05-fetch.ts";

/** Pubkeys waiting for a check, per lane; past it a kind 0 is not queued (its row is: the schedule retries it). */
export const QUEUE_MAX = 10_000;
/** New addresses of one site waiting at once: more wait in the store for the schedule. */
export const SITE_MAX = 100;
/** A due row the queue refused is looked at again this much later (its checked_at moves on), so the schedule's page does not stick. */
const RETRY_S = 600;
/** Fetches in flight over all domains. */
export const FETCHES_AT_ONCE = 8;
/** How often the schedule looks for addresses due a re-check, and how many it takes a time. */
const SCHEDULE_MS = 60_000;
const SCHEDULE_PAGE = 500;
/** Pubkeys whose state (pending, failed, refused) is kept for the refusal text; the oldest go first. */
const STATES_MAX = 100_000;

/** What a check came to (bunstr_nip05_checks_total{result}). */
export type Nip05Result = "verified" | "mismatch" | "failed" | "refused";

/** The engine's counters (access/metrics.ts AccessMetrics has them): checks by result, and the queue gauge. */
export interface Nip05Metrics {
  readonly nip05Checks: Record<Nip05Result, number>;
  nip05Queue: number;
}

/** The registry's side the engine writes (access/registry.ts AdmissionRegistry satisfies it). */
export interface VerifiedAdmissions {
  admit(pubkey: string, basis: Basis, evidence: object, until?: number): Promise<void>;
  revoke(pubkey: string, basis: Basis, reason: string): Promise<void>;
}

export interface Nip05Deps {
  config: () => Config;
  store: Pick<AdmissionStore, "nip05" | "putNip05" | "removeNip05" | "dueNip05">;
  registry: VerifiedAdmissions;
  /** True once the relay is closing: the engine stops (its store is about to close). */
  closing?: () => boolean;
  /** Where the checks are counted (the registry's AccessMetrics); the engine's own by default. */
  metrics?: Nip05Metrics;
  /**
   * Several nodes on one database (Postgres, Store.leader): only the leading one checks (it hears
   * every node's kind 0s on the commit feed) and runs the schedule, so a domain is fetched once,
   * not once per node (issue 33 review, M7). Absent: this process always leads.
   */
  leader?: Leadership;
  /** The fetch; access/nip05-fetch.ts by default. */
  fetch?: (url: string, limits: FetchLimits) => Promise<FetchOutcome>;
}

/**
 * [verified_users] mode passive or enabled: the engine built, fed the commit feed's kind 0s,
 * started, and set as the registry's `engines.nip05` (relay/wiring.ts calls this).
 */
export function startNip05Checks(
  registry: VerifiedAdmissions & {
    engines: { nip05?: Nip05Engine };
    metrics: Nip05Metrics;
    onCommitted(kinds: readonly number[], fn: (e: NostrEvent) => void): void;
    onChange(fn: (pubkey: string, basis: Basis, admitted: boolean) => void): void;
  },
  deps: Omit<Nip05Deps, "registry">,
): Nip05Checks {
  const checks = new Nip05Checks({ metrics: registry.metrics, ...deps, registry });
  registry.onCommitted([0], (e) => checks.committed(e));
  registry.onChange((pubkey, basis, admitted) => {
    if (basis === "verified" && !admitted) checks.revoked(pubkey);
  });
  registry.engines.nip05 = checks;
  checks.start();
  return checks;
}

/** At most 64 characters of a text from a profile. */
const cut = (text: string): string => (text.length > 64 ? `${text.slice(0, 63)}…` : text);

interface Task {
  pubkey: string;
  address: Nip05Address;
}

/** Re-checks of verified addresses (served first), and the rest (new addresses, retries of failures). */
type Lane = "recheck" | "fresh";
const LANES: readonly Lane[] = ["recheck", "fresh"];

export class Nip05Checks implements Nip05Engine {
  /** Nothing to load: what a restart left undone the schedule's first look finds. */
  readonly ready = true;
  /** Checks by result since start (bunstr_nip05_checks_total), pending checks (bunstr_nip05_queue). */
  readonly metrics: Nip05Metrics;
  /** Per lane, site -> its waiting checks, pubkey -> task, in arrival order; the sites in turn. */
  private readonly waiting: Record<Lane, Map<string, Map<string, Task>>> = { recheck: new Map(), fresh: new Map() };
  /** Waiting checks per lane. */
  private readonly sizes: Record<Lane, number> = { recheck: 0, fresh: 0 };
  /** Pubkey -> the lane and site it waits under (one entry per pubkey: a newer kind 0 replaces it). */
  private readonly queue = new Map<string, { lane: Lane; site: string }>();
  /** Pubkey -> the address its newest kind 0 names ("" for none) while a check or change of it is open: a result for an older one is dropped. */
  private readonly latest = new Map<string, string>();
  private readonly states = new Map<string, Nip05State>();
  /** Sites with a fetch in flight; a site -> when its last fetch started (ms). */
  private readonly busy = new Set<string>();
  /** Pubkeys with a fetch in flight. */
  private readonly running = new Set<string>();
  private readonly started = new Map<string, number>();
  /** Pubkeys the engine itself is revoking now (an operator's revoke is told apart from them). */
  private readonly revoking = new Set<string>();
  /** Per pubkey, the row's reads and writes one after the other. */
  private readonly chains = new Map<string, Promise<void>>();
  private inFlight = 0;
  private wake: ReturnType<typeof setTimeout> | undefined;
  private schedule: ReturnType<typeof setInterval> | undefined;
  private stopped = false;
  /** The leadership's first answer came (deps.leader). */
  private leaderAsked = false;
  private readonly lines = new LogLimiter();
  /** Seconds now; tests move it on to reach an expiry. Exported for tests. */
  clock: () => number = () => Math.floor(Date.now() / 1000);

  constructor(private readonly deps: Nip05Deps) {
    this.metrics = deps.metrics ?? { nip05Checks: { verified: 0, mismatch: 0, failed: 0, refused: 0 }, nip05Queue: 0 };
  }

  /** Stopped, or the relay is closing (then it stops at the next look). */
  private get closed(): boolean {
    if (!this.stopped && this.deps.closing?.()) this.stop();
    return this.stopped;
  }

  private count(result: Nip05Result): void {
    this.metrics.nip05Checks[result]++;
  }

  private get settings() {
    return this.deps.config().verified_users;
  }

  /** Passive: checks and records, never admits nor withdraws (the console shows the state). */
  private get admits(): boolean {
    return this.settings.mode === "enabled";
  }

  /** Pending checks (bunstr_nip05_queue). */
  get queued(): number {
    return this.queue.size + this.inFlight;
  }

  /** What the engine knows of `pubkey`'s address now, for the refusal text (AdmissionView.nip05). */
  state(pubkey: string): Nip05State | undefined {
    return this.states.get(pubkey);
  }

  /** Starts the schedule (and a first look for due checks: those a restart or a full queue left). */
  start(): void {
    this.schedule = setInterval(() => void this.checkDue().catch((err) => this.failed("schedule", err)), SCHEDULE_MS);
    this.schedule.unref?.();
    void this.checkDue().catch((err) => this.failed("schedule", err));
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.schedule);
    clearTimeout(this.wake);
    this.queue.clear();
    for (const lane of LANES) {
      this.waiting[lane].clear();
      this.sizes[lane] = 0;
    }
  }

  /** The commit feed's kind 0s (registry.onCommitted): the address they name is (re)checked. */
  committed(e: NostrEvent): void {
    if (e.kind !== 0 || this.closed) return;
    const leader = this.deps.leader;
    if (leader && !this.leaderAsked) {
      // Just started: whether this node leads is not known yet; the kind 0 waits for the answer.
      void leader.first.then(() => {
        this.leaderAsked = true;
        this.committed(e);
      });
      return;
    }
    if (leader && !leader.leading) return; // the leading node checks it
    const written = addressOfProfile(e.content);
    const address = written === undefined ? undefined : parseAddress(written);
    // What is not an address is kept (row, state, refusal text) cut short: a profile may carry any length.
    const shown = address ? formatAddress(address) : written === undefined ? "" : cut(written);
    const refused = address ? this.listRefusal(address) : undefined;
    const pubkey = e.pubkey;
    this.latest.set(pubkey, shown);
    this.dequeue(pubkey);
    if (written === undefined) this.setState(pubkey, undefined);
    else if (!address) this.setState(pubkey, { address: shown, state: "failed", error: "not a NIP-05 address" });
    else if (refused) {
      this.setState(pubkey, { address: shown, state: "refused", error: refused });
      this.count("refused");
    } else {
      this.setState(pubkey, { address: shown, state: "pending" });
      this.enqueue({ pubkey, address }, "fresh");
    }
    // The row follows the profile: a new address starts over (checked_at 0: due at once, so the
    // schedule finds it if the queue was full), none removes it; a verification of another
    // address than the one named now is withdrawn (the profile no longer claims it), as is one
    // of a domain the lists refuse.
    this.serial(pubkey, async () => {
      const row = await this.deps.store.nip05(pubkey);
      if (this.latest.get(pubkey) !== shown) return; // a newer kind 0's change is queued behind this one
      if (row?.verified_at != null && (row.address !== shown || refused) && this.admits)
        await this.withdraw(
          pubkey,
          "verified",
          refused ?? `the profile names ${shown ? `another address (${shown})` : "no NIP-05 address"}`,
        );
      const now = this.clock();
      if (written === undefined) {
        if (row) await this.deps.store.removeNip05(pubkey);
      } else if (!row || row.address !== shown || (refused && row.verified_at !== null)) {
        const error = !address ? "not a NIP-05 address" : (refused ?? "");
        await this.deps.store.putNip05({ pubkey, address: shown, verified_at: null, checked_at: error ? now : 0, failures: 0, error });
      }
      // A new kind 0 for the same address starts its failure count over.
      else if (row.failures > 0) await this.deps.store.putNip05({ ...row, failures: 0 });
      if (!this.queue.has(pubkey) && !this.running.has(pubkey)) this.settled(pubkey, shown);
    });
  }

  /**
   * The schedule: addresses last checked more than verify_update_frequency before `now` are
   * checked again; an expired verification is withdrawn. Exported for tests (they pass a later `now`).
   */
  async checkDue(now = this.clock()): Promise<void> {
    if (this.deps.leader && !this.deps.leader.leading) return;
    const s = this.settings;
    const before = now - durationSeconds(s.verify_update_frequency);
    const expiration = durationSeconds(s.verify_expiration);
    for (const due of await this.deps.store.dueNip05(before, SCHEDULE_PAGE)) {
      if (this.closed) return;
      if (this.latest.has(due.pubkey)) continue; // a kind 0's check is already on its way
      // Read again in the pubkey's turn: a kind 0 or an operator may have changed the row since the page was read.
      await this.serial(due.pubkey, async () => {
        const row = this.latest.has(due.pubkey) ? undefined : await this.deps.store.nip05(due.pubkey);
        if (!row || row.checked_at >= before || this.latest.has(row.pubkey)) return;
        const address = parseAddress(row.address);
        const stopped = row.failures >= s.max_consecutive_failures;
        const refused = address ? this.listRefusal(address) : "not a NIP-05 address";
        // Not checked any more: a verification goes when it expires, or at once when the lists now refuse its domain.
        if (row.verified_at !== null && (refused || ((stopped || !address) && now >= row.verified_at + expiration)))
          return this.expire(row, now, refused);
        if (address && !stopped && !refused) {
          this.latest.set(row.pubkey, row.address);
          if (this.enqueue({ pubkey: row.pubkey, address }, row.verified_at !== null ? "recheck" : "fresh")) return;
          // The queue is full (or its site's share is): looked at again RETRY_S later, so the next page holds other rows.
          this.latest.delete(row.pubkey);
          await this.deps.store.putNip05({ ...row, checked_at: before + RETRY_S });
        }
        // Left alone (given up on, or its domain now refused): its check time moves on, so it does
        // not fill the schedule's page; it is looked at again a period later.
        else await this.deps.store.putNip05({ ...row, checked_at: now });
      });
    }
  }

  /**
   * False when the lane is full, or (new addresses) its site has SITE_MAX waiting: the task is
   * dropped, and its row (checked_at 0 or old) brings it back at a later look of the schedule.
   */
  private enqueue(t: Task, lane: Lane): boolean {
    this.dequeue(t.pubkey);
    if (this.sizes[lane] >= QUEUE_MAX) return false;
    const site = siteOf(t.address.domain);
    let tasks = this.waiting[lane].get(site);
    if (lane === "fresh" && (tasks?.size ?? 0) >= SITE_MAX) return false;
    if (!tasks) this.waiting[lane].set(site, (tasks = new Map()));
    tasks.set(t.pubkey, t);
    this.sizes[lane]++;
    this.queue.set(t.pubkey, { lane, site });
    this.pump();
    return true;
  }

  private dequeue(pubkey: string): void {
    const at = this.queue.get(pubkey);
    if (at === undefined) return;
    this.queue.delete(pubkey);
    this.sizes[at.lane]--;
    const tasks = this.waiting[at.lane].get(at.site);
    tasks?.delete(pubkey);
    if (tasks?.size === 0) this.waiting[at.lane].delete(at.site);
    this.metrics.nip05Queue = this.queued;
  }

  /**
   * Starts what may start now: FETCHES_AT_ONCE in all, one per site, domain_interval_ms apart,
   * the re-check lane's sites first, then the others', each lane's sites in turn; wakes when the
   * next waiting site is free. It looks at the sites only, and stops at the first
   * FETCHES_AT_ONCE it can start: a queue of 10,000 costs a pass over the few sites busy or just
   * started, not over the queue.
   */
  private pump(): void {
    if (this.closed) return;
    const interval = this.settings.domain_interval_ms;
    const now = Date.now();
    // The domains' start times are only needed while their interval runs.
    for (const [domain, at] of this.started) if (at + interval <= now) this.started.delete(domain);
    let nextAt = Number.POSITIVE_INFINITY;
    for (const lane of LANES)
      for (const [domain, tasks] of this.waiting[lane]) {
        if (this.inFlight >= FETCHES_AT_ONCE) break;
        if (this.busy.has(domain)) continue;
        const readyAt = (this.started.get(domain) ?? Number.NEGATIVE_INFINITY) + interval;
        if (readyAt > now) {
          nextAt = Math.min(nextAt, readyAt);
          continue;
        }
        let task: Task | undefined;
        for (const t of tasks.values())
          if (!this.running.has(t.pubkey)) {
            task = t;
            break;
          }
        if (!task) continue;
        this.dequeue(task.pubkey);
        // The site goes to the back of the turn (it is busy now: this pass skips it).
        if (this.waiting[lane].delete(domain)) this.waiting[lane].set(domain, tasks);
        this.launch(domain, task);
      }
    clearTimeout(this.wake);
    if (nextAt !== Number.POSITIVE_INFINITY) this.wake = setTimeout(() => this.pump(), nextAt - now);
    this.metrics.nip05Queue = this.queued;
  }

  private launch(domain: string, task: Task): void {
    this.busy.add(domain);
    this.running.add(task.pubkey);
    this.inFlight++;
    const done = this.check(task); // the fetch is started before this returns (check's first await)
    // Read after the fetch started, never before (nor the pass's clock): a loaded box that paused
    // between the two would date the start early, and the site's next start come before its interval.
    this.started.set(domain, Date.now());
    void done.finally(() => {
      this.inFlight--;
      this.busy.delete(domain);
      this.running.delete(task.pubkey);
      this.pump();
    });
  }

  private async check(task: Task): Promise<void> {
    const s = this.settings;
    const shown = formatAddress(task.address);
    const outcome = await (this.deps.fetch ?? fetchNostrJson)(wellKnownUrl(task.address, s.http_loopback), {
      timeoutMs: s.fetch_timeout_ms,
      maxBytes: s.max_response_bytes,
      loopback: s.http_loopback,
    });
    if (this.closed) return;
    await this.serial(task.pubkey, async () => {
      // A newer kind 0 named another address (or none) while this one was fetched: it is not claimed any more.
      if (this.latest.get(task.pubkey) !== shown) return;
      try {
        await this.apply(task.pubkey, shown, task.address, outcome);
      } finally {
        if (!this.queue.has(task.pubkey)) this.settled(task.pubkey, shown);
      }
    });
  }

  /** One fetch's outcome recorded: the row, the registry, the state and the count. */
  private async apply(pubkey: string, shown: string, address: Nip05Address, outcome: FetchOutcome): Promise<void> {
    const now = this.clock();
    const s = this.settings;
    const row: Nip05Row = (await this.deps.store.nip05(pubkey)) ?? {
      pubkey,
      address: shown,
      verified_at: null,
      checked_at: 0,
      failures: 0,
      error: "",
    };
    const said = outcome.kind === "json" ? namesMatch(outcome.json, address.name, pubkey) : undefined;
    const result: Nip05Result =
      outcome.kind === "refused" ? "refused" : said === "match" ? "verified" : said === "mismatch" ? "mismatch" : "failed";
    this.count(result);
    if (result === "verified") {
      await this.deps.store.putNip05({ pubkey, address: shown, verified_at: now, checked_at: now, failures: 0, error: "" });
      if (this.admits)
        await this.deps.registry.admit(
          pubkey,
          "verified",
          { address: shown, verified_at: now, checked_at: now },
          now + durationSeconds(s.verify_expiration),
        );
      this.setState(pubkey, { address: shown, state: "verified" });
      return;
    }
    const error =
      outcome.kind !== "json"
        ? outcome.error
        : result === "failed"
          ? "the answer has no names object"
          : `${shown} does not name this pubkey`;
    if (result === "refused") {
      const held = this.lines.take("refused");
      if (held)
        log.warn(
          `warning: NIP-05 address ${shown} not checked: ${error}${s.http_loopback ? "" : " ([verified_users] http_loopback allows loopback hosts, for tests only)"}${held.count ? ` (and ${held.count} more refused since the last line)` : ""}`,
        );
    }
    const failures = row.failures + 1;
    const gaveUp = failures >= s.max_consecutive_failures;
    const shownError = gaveUp ? `${error}; not checked again until a new kind 0` : error;
    // A mismatch is the domain's answer: the verification goes now. A fault or a refusal keeps it until it expires.
    let verifiedAt = row.verified_at;
    if (verifiedAt !== null && (result === "mismatch" || now >= verifiedAt + durationSeconds(s.verify_expiration))) {
      if (this.admits) await this.withdraw(pubkey, "verified", result === "mismatch" ? error : `verification expired (${error})`);
      verifiedAt = null;
    }
    await this.deps.store.putNip05({ pubkey, address: shown, verified_at: verifiedAt, checked_at: now, failures, error: shownError });
    this.setState(pubkey, {
      address: shown,
      state: verifiedAt !== null ? "verified" : result === "refused" ? "refused" : "failed",
      error: shownError,
    });
  }

  /** The schedule's withdrawal of a verification past its expiry that is not being checked any more. */
  private async expire(row: Nip05Row, now: number, refused: string | undefined): Promise<void> {
    const error = refused ?? (row.error || "verification expired");
    if (this.admits) await this.withdraw(row.pubkey, "verified", refused ?? `verification expired (${error})`);
    await this.deps.store.putNip05({ ...row, verified_at: null, checked_at: now, error });
    this.setState(row.pubkey, { address: row.address, state: refused ? "refused" : "failed", error });
  }

  /** The registry's revoke, marked as the engine's own. */
  private async withdraw(pubkey: string, basis: "verified", reason: string): Promise<void> {
    this.revoking.add(pubkey);
    try {
      await this.deps.registry.revoke(pubkey, basis, reason);
    } finally {
      this.revoking.delete(pubkey);
    }
  }

  /**
   * A verification revoked by an operator (NIP-86 revokeadmission, the console): not given back by
   * the next check; the address is left alone until its author sends a new kind 0.
   */
  revoked(pubkey: string): void {
    if (this.revoking.has(pubkey) || this.closed) return;
    this.dequeue(pubkey);
    // An answer in flight for the address is dropped.
    this.latest.set(pubkey, "");
    const error = "revoked by an operator; not checked again until a new kind 0";
    const known = this.states.get(pubkey);
    if (known) this.setState(pubkey, { address: known.address, state: "failed", error });
    this.serial(pubkey, async () => {
      const row = await this.deps.store.nip05(pubkey);
      if (row) {
        await this.deps.store.putNip05({ ...row, verified_at: null, failures: this.settings.max_consecutive_failures, error });
        this.setState(pubkey, { address: row.address, state: "failed", error });
      }
      this.settled(pubkey, "");
    });
  }

  /** Why the domain lists refuse the address, or undefined ([verified_users] domain_blacklist, domain_whitelist; hosts without a port). */
  private listRefusal(a: Nip05Address): string | undefined {
    const host = hostOf(a.domain);
    const { domain_blacklist: black, domain_whitelist: white } = this.settings;
    if (black.some((d) => d.toLowerCase() === host)) return `${host} is on the relay's domain blacklist`;
    if (white.length > 0 && !white.some((d) => d.toLowerCase() === host)) return `${host} is not on the relay's domain whitelist`;
    // Only the default https port is fetched (access/nip05-fetch.ts): refused here, before any
    // lookup; a loopback host is left to the fetch, whose refusal warns of http_loopback.
    const port = a.domain.slice(host.length + 1);
    if (port !== "" && port !== "443" && !this.settings.http_loopback && !isLoopbackHost(host))
      return "only the default https port (443) is fetched";
    return undefined;
  }

  private setState(pubkey: string, s: Nip05State | undefined): void {
    this.states.delete(pubkey);
    if (!s) return;
    this.states.set(pubkey, s);
    if (this.states.size > STATES_MAX) this.states.delete(this.states.keys().next().value!);
  }

  /** Done with the newest address of `pubkey` (nothing queued or fetching for it). */
  private settled(pubkey: string, shown: string): void {
    if (this.latest.get(pubkey) === shown) this.latest.delete(pubkey);
  }

  /** Runs `fn` after the earlier row work of the same pubkey; a failure is logged, never thrown. */
  private serial(pubkey: string, fn: () => Promise<void>): Promise<void> {
    const before = this.chains.get(pubkey) ?? Promise.resolve();
    const next = before.then(fn).catch((err) => this.failed("store", err));
    this.chains.set(pubkey, next);
    void next.then(() => {
      if (this.chains.get(pubkey) === next) this.chains.delete(pubkey);
    });
    return next;
  }

  private failed(kind: string, err: unknown): void {
    if (this.closed) return;
    const held = this.lines.take(kind);
    if (held) log.error(`NIP-05 checks: ${kind} failed:`, err, held.count ? `(and ${held.count} more since the last line)` : "");
  }
}
