// [mirror] relays: `bunstr stream` inside `bunstr serve`. The subscription, reconnection and
// batching are ops/stream.ts's; the events go through the import's checks (shape, the storage
// policies of an import, id, duplicate, signature) and then the relay's own writer queue, whose
// commit fans them out to this relay's live subscribers like any published event.
import { ConfigError } from "../config/load.ts";
import { serializeEvent, type NostrEvent } from "../protocol/event.ts";
import { isEphemeral } from "../protocol/kinds.ts";
import { admitEvent } from "../policy/defaults.ts";
import { importPolicies } from "../ops/import.ts";
import { followRelay, type Ingest, type Streamer } from "../ops/stream.ts";
import { parseSyncFilter } from "../ops/sync.ts";
import type { RelayContext } from "./context.ts";
import { policyContext } from "./policy-context.ts";

export interface Mirrors {
  stop(): void;
}

/** Starts one follower per [mirror] relays URL; none when the list is empty. */
export function startMirrors(ctx: RelayContext): Mirrors {
  const { relays, filter: filterText } = ctx.config.mirror;
  if (relays.length === 0) return { stop() {} };
  let filter;
  try {
    filter = parseSyncFilter(filterText || undefined, "a mirror");
  } catch (e) {
    throw new ConfigError(`[mirror] filter: ${(e as Error).message}`);
  }
  const followers: Streamer[] = relays.map((url) =>
    followRelay({ config: ctx.config, url, filter, log: (t) => console.log(`mirror ${url}: ${t}`) }, ingestInto(ctx)),
  );
  return {
    stop() {
      for (const f of followers) f.stop();
    },
  };
}

function ingestInto(ctx: RelayContext): Ingest {
  return async (events) => {
    const r = { lines: 0, accepted: 0, duplicate: 0, older: 0, deleted: 0, refused: 0, ephemeral: 0, badJson: 0, badEvent: 0, badId: 0, badSig: 0, problems: [] as { reason: string }[] };
    const policyCtx = policyContext(ctx);
    await Promise.all(
      events.map(async (raw: NostrEvent) => {
        r.lines++;
        const e = admitEvent(raw, importPolicies, policyCtx);
        // A request to vanish refused for its author's standing: carried out, not stored (NIP-62).
        if ("fate" in e && e.vanish && !ctx.closing && (await ctx.verifier.verify(e.vanish)))
          await ctx.writer.enqueue({ event: e.vanish, json: serializeEvent(e.vanish), vanishOnly: e.reason });
        if ("fate" in e) return void (r[e.fate]++, r.problems.push({ reason: e.reason }));
        const ephemeral = isEphemeral(e.kind);
        if (!ephemeral && (await ctx.store.has(e.id))) return void r.duplicate++;
        if (!(await ctx.verifier.verify(e))) return void (r.badSig++, r.problems.push({ reason: "invalid: signature verification failed" }));
        const json = serializeEvent(e);
        if (ephemeral) {
          r.ephemeral++;
          return ctx.ephemeral(e, json);
        }
        if (ctx.closing) return;
        const o = await ctx.writer.enqueue({ event: e, json });
        if (o.stored) r.accepted++;
        else if (o.duplicate) r.duplicate++;
        else if (o.reason.startsWith("blocked:")) r.deleted++;
        else if (o.reason.startsWith("duplicate:")) r.older++;
        else r.refused++, r.problems.push({ reason: o.reason });
      }),
    );
    return r;
  };
}
