// What the pages' scripts find in the browser besides the DOM.

/** A Nostr event before and after the NIP-07 signer signs it. */
interface UnsignedEvent {
  kind: number;
  created_at: number;
  tags: string[][];
  content: string;
}
interface SignedEvent extends UnsignedEvent {
  id: string;
  pubkey: string;
  sig: string;
}

interface Window {
  /** A NIP-07 browser extension (nos2x, Alby, …), when one is installed and unlocked. */
  nostr?: {
    getPublicKey(): Promise<string>;
    signEvent(event: UnsignedEvent): Promise<SignedEvent>;
  };
}
