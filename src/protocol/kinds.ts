// Kind ranges of NIP-01.
/** The highest kind an event can have (NIP-01: an integer between 0 and 65535). */
export const MAX_KIND = 65535;
export const isReplaceable = (k: number): boolean => k === 0 || k === 3 || (k >= 10000 && k < 20000);
export const isEphemeral = (k: number): boolean => k >= 20000 && k < 30000;
export const isAddressable = (k: number): boolean => k >= 30000 && k < 40000;
