// What is wired, advertised in NIP-11 `supported_nips`.
import type { Config } from "../config/schema.ts";

export function supportedNips(_config: Config): number[] {
  const nips = [1, 11, 42];
  return nips.sort((a, b) => a - b);
}
