// NIP-70 protected events: `["-"]` means only the author may publish it.
import type { NostrEvent } from "../protocol/event.ts";

export const isProtected = (e: { tags?: unknown }): boolean =>
  Array.isArray(e.tags) && e.tags.some((t) => Array.isArray(t) && t[0] === "-");

/** A repost (kind 6 / 16) whose content embeds a protected event. */
export function embedsProtected(e: NostrEvent): boolean {
  // Parse rather than search the text: "-" may be written as "\u002d".
  if ((e.kind !== 6 && e.kind !== 16) || !e.content.trimStart().startsWith("{")) return false;
  try {
    const inner = JSON.parse(e.content) as unknown;
    return typeof inner === "object" && inner !== null && isProtected(inner);
  } catch {
    return false;
  }
}
