// A response body read as text up to a cap, for the engines' fetches (access/nip05-fetch.ts, a
// domain's nostr.json; access/lightning.ts, the node's answers): the public or a node may answer
// with any length, and what is past the cap is never read.

/** The body as text: undefined when longer than `max` bytes (declared or streamed; the rest is cancelled unread). */
export async function readCapped(res: Response, max: number): Promise<string | undefined> {
  const declared = Number(res.headers.get("content-length") ?? "0");
  if (declared > max) {
    await res.body?.cancel().catch(() => {});
    return undefined;
  }
  if (!res.body) return "";
  const reader = res.body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel().catch(() => {});
      return undefined;
    }
    parts.push(value);
  }
  return new TextDecoder().decode(Buffer.concat(parts));
}
