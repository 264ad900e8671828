// Client-to-relay frames (NIP-01, NIP-42, NIP-45) parsed into a tagged union.
import { ProtocolError } from "./reasons.ts";

type ClientMessage =
  | { type: "EVENT"; event: unknown }
  | { type: "REQ"; subId: string; filters: unknown[] }
  | { type: "COUNT"; subId: string; filters: unknown[] }
  | { type: "CLOSE"; subId: string }
  | { type: "AUTH"; event: unknown }
  // NIP-77: the payloads are checked by the negentropy handler, which answers NEG-ERR.
  | { type: "NEG-OPEN"; subId: string; filter: unknown; message: unknown }
  | { type: "NEG-MSG"; subId: string; message: unknown }
  | { type: "NEG-CLOSE"; subId: string };

interface MessageLimits {
  maxSubIdLength: number;
  maxFilters: number;
}

function subId(v: unknown, limits: MessageLimits): string {
  if (typeof v !== "string" || v.length === 0) throw new ProtocolError("invalid", "subscription id must be a non-empty string");
  if (v.length > limits.maxSubIdLength)
    throw new ProtocolError("invalid", `subscription id longer than ${limits.maxSubIdLength} characters`);
  return v;
}

/**
 * Parses one text frame. Throws ProtocolError for anything that is not a well-formed message;
 * `subId` is set on the error (when known) so REQ/COUNT refusals can be answered with CLOSED.
 */
export function parseClientMessage(text: string, limits: MessageLimits): ClientMessage {
  let msg: unknown;
  try {
    msg = JSON.parse(text);
  } catch {
    throw new ProtocolError("invalid", "could not parse message as JSON");
  }
  if (!Array.isArray(msg) || typeof msg[0] !== "string")
    throw new ProtocolError("invalid", "message must be a JSON array starting with a string");
  const verb = msg[0];
  switch (verb) {
    case "EVENT":
      if (msg.length !== 2) throw new ProtocolError("invalid", "EVENT takes one event");
      return { type: "EVENT", event: msg[1] };
    case "REQ":
    case "COUNT": {
      const id = subId(msg[1], limits);
      const filters = msg.slice(2);
      if (filters.length === 0) throw new SubscriptionError(id, "invalid", `${verb} needs at least one filter`);
      if (filters.length > limits.maxFilters) throw new SubscriptionError(id, "invalid", `more than ${limits.maxFilters} filters`);
      return { type: verb, subId: id, filters };
    }
    case "CLOSE":
      return { type: "CLOSE", subId: subId(msg[1], limits) };
    case "AUTH":
      if (msg.length !== 2) throw new ProtocolError("invalid", "AUTH takes one event");
      return { type: "AUTH", event: msg[1] };
    case "NEG-OPEN":
      return { type: verb, subId: subId(msg[1], limits), filter: msg[2], message: msg[3] };
    case "NEG-MSG":
      return { type: verb, subId: subId(msg[1], limits), message: msg[2] };
    case "NEG-CLOSE":
      return { type: verb, subId: subId(msg[1], limits) };
    default:
      throw new ProtocolError("invalid", `unknown message type ${JSON.stringify(verb.slice(0, 20))}`);
  }
}

/** A refusal that belongs to a subscription: answered with CLOSED rather than NOTICE. */
export class SubscriptionError extends ProtocolError {
  constructor(
    readonly subId: string,
    prefix: ProtocolError["prefix"],
    message: string,
  ) {
    super(prefix, message);
  }
}
