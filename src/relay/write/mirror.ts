// [mirror] relays: `bunstr stream` inside `bunstr serve`. The subscription, reconnection and
// batching are ops/stream.ts's; the events go through the pipeline (admit/admit.ts) with the
// storage policies of an import and then the relay's own writer queue, whose commit fans them
// out to this relay's live subscribers like any published event.
import { log } from "../../log.ts";
import { ConfigError } from "../../config/load.ts";
import { admit, type Source } from "../../admit/admit.ts";
import { countOutcome, newCounts, problemOf } from "../../admit/outcome.ts";
import { mirrorPolicies } from "../../policy/defaults.ts";
import { followRelay, type Ingest, type Streamer } from "../../ops/stream.ts";
import { parseSyncFilter } from "../../ops/sync.ts";
import type { RelayContext } from "../context.ts";
import { policyContext } from "./policy-context.ts";

interface Mirrors {
  stop(): void;
}

/**
 * A follower's line: its connection's news at info, each event this relay refused at debug (a
 * mirrored relay may send thousands that this relay's policies refuse).
 */
function mirrorLine(line: string): void {
  if (line.includes(": refused an event: ")) log.debug(line);
  else log.info(line);
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
    followRelay({ config: ctx.config, url, filter, log: (t) => mirrorLine(`mirror ${url}: ${t}`) }, ingestInto(ctx)),
  );
  return {
    stop() {
      for (const f of followers) f.stop();
    },
  };
}

/**
 * A burst from a mirror through the pipeline (admit/admit.ts) into this relay's writer queue;
 * also the web of trust's follow lists fetched from other relays (relay/wot-refresh.ts).
 */
export function ingestInto(ctx: RelayContext): Ingest {
  return async (events) => {
    const r = { ...newCounts(), problems: [] as { reason: string }[] };
    const src: Source = { policies: mirrorPolicies, policy: policyContext(ctx) };
    await Promise.all(
      events.map(async (raw) => {
        r.lines++;
        const o = await admit(ctx, raw, src);
        countOutcome(r, o);
        const problem = problemOf(o);
        if (problem !== undefined) r.problems.push({ reason: problem });
      }),
    );
    return r;
  };
}
