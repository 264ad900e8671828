// Signature verification off the event loop: a batch of jobs in, a batch of booleans out.
import type { VerifyJob } from "../protocol/schnorr.ts";
import { loadNativeVerifier } from "./native.ts";

declare const self: Worker;

type Verify = (job: VerifyJob) => boolean;
/** The pure JS verifier, loaded only when needed (a native worker never pays for it). */
const noble = async (): Promise<Verify> => (await import("../protocol/schnorr.ts")).verifySchnorr;

let verify: Promise<Verify> | undefined;

self.onmessage = async (msg: MessageEvent) => {
  const data = msg.data as { native?: string } | { n: number; jobs: VerifyJob[] };
  if (!("n" in data)) {
    // The main thread checked the library loads before asking for it.
    const native = data.native ? loadNativeVerifier(data.native) : undefined;
    verify = native ? Promise.resolve(native) : noble();
    await verify;
    self.postMessage({ ready: true });
    return;
  }
  // Messages are handled in order: each awaits the same settled promise.
  const check = await verify!;
  self.postMessage({ n: data.n, ok: data.jobs.map(check) });
};
