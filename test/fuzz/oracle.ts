// The wire fuzzer's oracle (wire.test.ts): what NIP-01 says a frame must get back, from the frame
// text alone, and a websocket that keeps every frame it gets for pairing.
import { HARD_LIMIT, MAX_MESSAGE, MAX_SUBID } from "./gen.ts";

/** What a frame must get back. `key` pairs it with an answer; `accept` lists the answer types. */
export interface Expectation {
  key: string;
  accept: readonly string[];
  frame: string | Uint8Array;
  idx: number;
}

export const PREFIX = /^(duplicate|pow|blocked|rate-limited|invalid|restricted|auth-required|mute|error): /;
export const NEG_PREFIX = /^(duplicate|pow|blocked|rate-limited|invalid|restricted|auth-required|mute|error|closed): /;
const validSubId = (v: unknown): v is string => typeof v === "string" && v.length > 0 && v.length <= MAX_SUBID;

export type Verdict =
  | { kind: "expect"; exp: Omit<Expectation, "frame" | "idx"> | undefined; subId?: string; negId?: string; verb?: string }
  | { kind: "close1009" }
  | { kind: "skip" };

/**
 * The NIP-01 oracle, from the frame text alone. Answers: "OK:<id>", "SUB:<id>" (REQ/COUNT),
 * "NEG:<id>", "NOTICE", "OVERSIZE_OK" (an OK for an oversize EVENT, any id), "ANY" (one frame of
 * NOTICE/OK/CLOSED/NEG-ERR: an oversize frame that is not a well-formed message).
 */
export function oracle(frame: string | Uint8Array): Verdict {
  if (typeof frame !== "string") return { kind: "expect", exp: { key: "NOTICE", accept: ["NOTICE"] } };
  const bytes = Buffer.byteLength(frame);
  if (bytes > HARD_LIMIT) return { kind: "close1009" };
  // Between 4x max_message_bytes and the hard limit either a close or an answer would do: not generated.
  if (bytes > 4 * MAX_MESSAGE) return { kind: "skip" };
  let msg: any;
  let parsed = true;
  try {
    msg = JSON.parse(frame);
  } catch {
    parsed = false;
  }
  const isMsg = parsed && Array.isArray(msg) && typeof msg[0] === "string";
  const verb: string | undefined = isMsg ? msg[0] : undefined;
  if (bytes > MAX_MESSAGE) {
    if (verb === "EVENT" && msg.length === 2) return { kind: "expect", exp: { key: "OVERSIZE_OK", accept: ["OK"] }, verb };
    if ((verb === "REQ" || verb === "COUNT") && validSubId(msg[1]))
      return { kind: "expect", exp: { key: `SUB:${msg[1]}`, accept: ["CLOSED"] }, subId: msg[1], verb };
    if ((verb === "NEG-OPEN" || verb === "NEG-MSG") && validSubId(msg[1]))
      return { kind: "expect", exp: { key: `NEG:${msg[1]}`, accept: ["NEG-ERR"] }, negId: msg[1], verb };
    // Not a well-formed message: any one refusal will do. Its id (if the relay can make one out) is
    // reserved so that no other frame of the connection uses it.
    const m = /^\s*\[\s*"(REQ|COUNT|NEG-OPEN|NEG-MSG)"\s*,\s*"((?:[^"\\]|\\.)*)"/.exec(frame.slice(0, 2000));
    let id: string | undefined;
    try {
      id = m ? (JSON.parse(`"${m[2]}"`) as string) : undefined;
    } catch {
      id = m?.[2];
    }
    const any = { key: "ANY", accept: ["NOTICE", "OK", "CLOSED", "NEG-ERR"] };
    if (id !== undefined && m![1]!.startsWith("NEG")) return { kind: "expect", exp: any, negId: id, verb: "ANY" };
    return { kind: "expect", exp: any, subId: id, verb: "ANY" };
  }
  const notice = { kind: "expect", exp: { key: "NOTICE", accept: ["NOTICE"] } } as const;
  if (!isMsg) return notice;
  const claimedId = (raw: unknown) => {
    const id = (raw as { id?: unknown } | null)?.id;
    return typeof id === "string" ? id.slice(0, 64) : "";
  };
  switch (verb) {
    case "EVENT":
    case "AUTH":
      if (msg.length !== 2) return notice;
      return { kind: "expect", exp: { key: `OK:${claimedId(msg[1])}`, accept: ["OK"] }, verb };
    case "REQ":
    case "COUNT":
      if (!validSubId(msg[1])) return notice;
      return {
        kind: "expect",
        exp: { key: `SUB:${msg[1]}`, accept: verb === "REQ" ? ["EOSE", "CLOSED"] : ["COUNT", "CLOSED"] },
        subId: msg[1],
        verb,
      };
    case "CLOSE":
      if (!validSubId(msg[1])) return notice;
      return { kind: "expect", exp: undefined, subId: msg[1], verb };
    case "NEG-OPEN":
    case "NEG-MSG":
      if (!validSubId(msg[1])) return notice;
      return { kind: "expect", exp: { key: `NEG:${msg[1]}`, accept: ["NEG-MSG", "NEG-ERR"] }, negId: msg[1], verb };
    case "NEG-CLOSE":
      if (!validSubId(msg[1])) return notice;
      return { kind: "expect", exp: undefined, negId: msg[1], verb };
    default:
      return notice;
  }
}

/** A websocket that keeps every frame it gets, for pairing. */
export class Conn {
  readonly ws: WebSocket;
  readonly inbox: string[] = [];
  closed = false;
  closeCode?: number;
  private constructor(url: string) {
    this.ws = new WebSocket(url);
    this.ws.binaryType = "arraybuffer";
    this.ws.onmessage = (m) => void this.inbox.push(typeof m.data === "string" ? m.data : `<binary>`);
    this.ws.onclose = (e) => {
      this.closed = true;
      this.closeCode = e.code;
    };
  }
  static async open(url: string): Promise<Conn> {
    const c = new Conn(url);
    await new Promise<void>((res, rej) => {
      c.ws.onopen = () => res();
      c.ws.onerror = () => rej(new Error(`cannot connect to ${url}`));
    });
    return c;
  }
}

export async function until(cond: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) return false;
    await Bun.sleep(5);
  }
  return true;
}
