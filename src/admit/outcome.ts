// What became of an event: admit()'s typed outcome, the OK answer built from it (one place, so
// the wire text is the same whichever entry point answers), and the counts that import, sync,
// stream and the mirrors report.
import type { NostrEvent } from "../protocol/event.ts";
import { refusalText, type Refusal } from "../protocol/reasons.ts";

/** Why an event was not taken, by the step that refused it. */
export type RefusedFate =
  /** Not a NIP-01 event (shape), or a line too long to be one. */
  | "badEvent"
  /** A policy (or the relay's state: shutting down, overloaded), or the writer for a reason of its own. */
  | "refused"
  | "badId"
  | "badSig"
  /** A newer version of this replaceable or addressable event is stored (the writer's "duplicate:"). */
  | "older"
  /** Its author deleted it (NIP-09) or asked to vanish (NIP-62) (the writer's "blocked:"). */
  | "deleted";

export type Outcome =
  /** Stored; or an ephemeral event fanned out (or, with nobody to fan out to, dropped); or already stored. */
  | { event: NostrEvent; fate: "accepted" | "ephemeral" | "duplicate" }
  /** `event`: undefined when it had no event's shape. */
  | { event: NostrEvent | undefined; fate: RefusedFate; refusal: Refusal }
  /** The write-policy plugin's answer, its text passed through as strfry does (a shadow reject is OK true). */
  | { event: NostrEvent; fate: "plugin"; accepted: boolean; message: string }
  /** A request the relay answered itself (NIP-43 join and leave, Source.relayRequest): never stored nor fanned out. */
  | { event: NostrEvent; fate: "answered"; accepted: boolean; message: string };

const DUPLICATE = "duplicate: already have this event";

/** The OK message's accepted flag. */
export function okAccepted(o: Outcome): boolean {
  if ("refusal" in o) return false;
  return o.fate === "plugin" || o.fate === "answered" ? o.accepted : true;
}

/** The OK message's text: "" when stored, else the NIP-01 prefixed reason. */
export function okMessage(o: Outcome): string {
  if ("refusal" in o) return refusalText(o.refusal);
  if (o.fate === "plugin" || o.fate === "answered") return o.message;
  return o.fate === "duplicate" ? DUPLICATE : "";
}

/** How many events fared how: what import, sync, stream and the mirrors count. */
export interface Counts {
  /** Non-empty lines read (or events received). */
  lines: number;
  /** Stored. */
  accepted: number;
  /** Already stored (or twice in the input). */
  duplicate: number;
  /** A newer version of this replaceable or addressable event is stored. */
  older: number;
  /** Refused because its author deleted it (NIP-09) or asked to vanish (NIP-62). */
  deleted: number;
  /** Refused by the config: expired (NIP-40), kind or pubkey lists, size limits, kind 22242. */
  refused: number;
  /** Kinds 20000–29999 are never stored. */
  ephemeral: number;
  badJson: number;
  /** JSON, but not a NIP-01 event (a field missing or of the wrong type), or a line too long. */
  badEvent: number;
  badId: number;
  badSig: number;
}

const COUNT_KEYS = [
  "lines",
  "accepted",
  "duplicate",
  "older",
  "deleted",
  "refused",
  "ephemeral",
  "badJson",
  "badEvent",
  "badId",
  "badSig",
] as const satisfies readonly (keyof Counts)[];

export function newCounts(): Counts {
  return {
    lines: 0,
    accepted: 0,
    duplicate: 0,
    older: 0,
    deleted: 0,
    refused: 0,
    ephemeral: 0,
    badJson: 0,
    badEvent: 0,
    badId: 0,
    badSig: 0,
  };
}

/** Adds `from` into `into`. */
export function addCounts(into: Counts, from: Counts): void {
  for (const k of COUNT_KEYS) into[k] += from[k];
}

/** Counts one outcome (not its line: the reader counts what it read). */
export function countOutcome(c: Counts, o: Outcome): void {
  c[o.fate === "plugin" || o.fate === "answered" ? (o.accepted ? "accepted" : "refused") : o.fate]++;
}

/** What to report about an outcome that is a problem (a refusal; not an older version of a replaceable event), else undefined. */
export function problemOf(o: Outcome): string | undefined {
  if (!("refusal" in o) || o.fate === "older") return undefined;
  return refusalText(o.refusal);
}
