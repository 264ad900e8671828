// Signature verification off the event loop: a batch of jobs in, a batch of booleans out.
import { verifySchnorr, type VerifyJob } from "../protocol/schnorr.ts";

declare const self: Worker;

self.onmessage = (msg: MessageEvent) => {
  const { n, jobs } = msg.data as { n: number; jobs: VerifyJob[] };
  self.postMessage({ n, ok: jobs.map(verifySchnorr) });
};
