// The machine-readable prefixes of NIP-01 for OK and CLOSED messages, in one place.
export type Prefix = "duplicate" | "pow" | "blocked" | "rate-limited" | "invalid" | "restricted" | "auth-required" | "mute" | "error";

const reason = (prefix: Prefix, message: string): string => `${prefix}: ${message}`;

/** A refusal carried as data: the pipeline turns it into OK false / CLOSED. */
export interface Refusal {
  prefix: Prefix;
  message: string;
}

export const refuse = (prefix: Prefix, message: string): Refusal => ({ prefix, message });
export const refusalText = (r: Refusal): string => reason(r.prefix, r.message);

/** Thrown by the pure parsers; callers catch it once per message and answer with NOTICE/CLOSED/OK. */
export class ProtocolError extends Error {
  constructor(
    readonly prefix: Prefix,
    message: string,
  ) {
    super(message);
  }
  get text(): string {
    return reason(this.prefix, this.message);
  }
}
