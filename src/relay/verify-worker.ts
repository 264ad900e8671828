// Signature verification off the event loop: a batch of jobs in, a batch of booleans out.
import { verifySchnorr, type VerifyJob } from "../protocol/schnorr.ts";
import { loadNativeVerifier } from "./secp256k1-native.ts";

declare const self: Worker;

let verify: (job: VerifyJob) => boolean = verifySchnorr;

self.onmessage = (msg: MessageEvent) => {
  const data = msg.data as { native: boolean } | { n: number; jobs: VerifyJob[] };
  if ("native" in data) {
    // The main thread checked the library loads before asking for it.
    if (data.native) verify = loadNativeVerifier() ?? verifySchnorr;
    return;
  }
  self.postMessage({ n: data.n, ok: data.jobs.map(verify) });
};
