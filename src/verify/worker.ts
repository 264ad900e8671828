// Signature verification off the event loop: a batch of jobs in, a batch of answers out, each
// one string.
import type { VerifyJob } from "../protocol/schnorr.ts";
import { loadNativeVerifier } from "./native.ts";

declare const self: Worker;

type Verify = (job: VerifyJob) => boolean;
/** The pure JS verifier, loaded only when needed (a native worker never pays for it). */
const noble = async (): Promise<Verify> => (await import("../protocol/schnorr.ts")).verifySchnorr;

let verify: Promise<Verify> | undefined;

/** A job's width in the batch string: id (64), pubkey (64), sig (128). */
const JOB = 256;

self.onmessage = async (msg: MessageEvent) => {
  const data = msg.data as { native?: string } | string;
  if (typeof data !== "string") {
    // The main thread checked the library loads before asking for it.
    const native = data.native ? loadNativeVerifier(data.native) : undefined;
    verify = native ? Promise.resolve(native) : noble();
    await verify;
    self.postMessage({ ready: true });
    return;
  }
  // "<n>,<id pubkey sig>..." (pool.ts dispatch); answered "<n>,<'1' valid or '0', a job>".
  // Messages are handled in order: each awaits the same settled promise.
  const check = await verify!;
  const comma = data.indexOf(",");
  let ok = "";
  for (let at = comma + 1; at + JOB <= data.length; at += JOB)
    ok += check({ id: data.slice(at, at + 64), pubkey: data.slice(at + 64, at + 128), sig: data.slice(at + 128, at + JOB) }) ? "1" : "0";
  self.postMessage(`${data.slice(0, comma)},${ok}`);
};
