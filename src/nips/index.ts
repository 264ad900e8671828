// What is wired, advertised in NIP-11 `supported_nips`: a NIP is listed only while it is on.
import type { Config } from "../config/schema.ts";

export function supportedNips(config: Config): number[] {
  const n = config.nips;
  const dmProtection = config.authorization.restricted_read_kinds.length > 0;
  const nips = [
    [1, true],
    [9, n.nip09],
    [11, true],
    [13, true], // difficulty is checked whenever min_pow_difficulty > 0
    [17, dmProtection],
    [40, n.nip40],
    [42, true],
    [45, n.nip45],
    [50, n.nip50],
    [59, dmProtection],
    [62, n.nip62],
    // Relay-based groups; the relay key signs their metadata.
    [29, config.groups.enabled],
    // NIP-43 relay membership (issue 33): members, invites, the relay's member list.
    [43, config.membership.enabled],
    [70, n.nip70],
    [77, n.nip77],
    // The management API (and its NIP-98 auth) is open once someone may use it.
    [86, config.admin.pubkeys.length > 0],
    [98, config.admin.pubkeys.length > 0],
  ] as const;
  return nips.filter(([, on]) => on).map(([nip]) => nip);
}
