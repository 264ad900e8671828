// NIP-29 over the wire: a relay with groups on, clients AUTHed as a signer, a group created and
// joined, moderation events signed, and the relay's latest 39000-39005 of a group.
import { expect } from "bun:test";
import { rmSync } from "node:fs";
import type { NostrEvent } from "../src/protocol/event.ts";
import { Client, now, startTestRelay, type ConfigPatch, type Signer, type TestRelay } from "./helpers.ts";

/** startTestRelay with `[groups] enabled = true, creators = ["anyone"]` (and the patch's own [groups] keys). */
export function groupRelay(patch: ConfigPatch = {}, opts: { dir?: string } = {}): Promise<TestRelay> {
  return startTestRelay({ ...patch, groups: { enabled: true, creators: ["anyone"], ...patch.groups } }, opts);
}

/**
 * A restart: closes `r`, starts a groups relay again on its folder (the store kept), runs `check`
 * against it, then stops it and removes the folder.
 */
export async function afterRestart(r: TestRelay, check: (again: TestRelay) => Promise<void>): Promise<void> {
  const dir = r.dir;
  await r.close();
  const again = await groupRelay({}, { dir });
  try {
    await check(again);
  } finally {
    await again.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Resolves when the start's purge of what deleted groups and 9005s left stored has run. */
export const purged = (r: TestRelay): Promise<void> => (r.ctx.groupRelay as unknown as { purged: Promise<void> }).purged;

/** The pubkeys each client has AUTHed as (a second AUTH as the same one is not sent). */
const authedAs = new WeakMap<Client, Set<string>>();

/** NIP-42 on `c` as `s` (once per client and signer). */
export async function authAs(c: Client, s: Signer, relayUrl: string): Promise<void> {
  const done = authedAs.get(c) ?? new Set<string>();
  authedAs.set(c, done);
  if (done.has(s.pubkey)) return;
  const ok = await c.auth(s, relayUrl);
  expect(ok[2]).toBe(true);
  done.add(s.pubkey);
}

/** A client connected to `relay`, AUTHed as `s` when given. */
export async function connectAs(relay: TestRelay, s?: Signer): Promise<Client> {
  const c = await Client.connect(relay.url);
  if (s) await authAs(c, s, relay.url);
  return c;
}

/** A group event of `kind` by `author`: `["h", id]` first, then `tags`. */
export const mod = (kind: number, author: Signer, id: string, tags: string[][] = [], created_at = now()): NostrEvent =>
  author.sign({ kind, created_at, tags: [["h", id], ...tags] });

/**
 * AUTH as `owner` (on `relay`'s URL), 9007, then a 9002 with `flags` (e.g. [["private"], ["closed"]])
 * when given; each must be accepted.
 */
export async function createGroup(c: Client, relay: TestRelay, owner: Signer, id: string, flags: string[][] = []): Promise<void> {
  await authAs(c, owner, relay.url);
  const created = mod(9007, owner, id);
  expect(await c.publish(created)).toEqual(["OK", created.id, true, ""]);
  if (flags.length === 0) return;
  const edit = mod(9002, owner, id, flags);
  expect(await c.publish(edit)).toEqual(["OK", edit.id, true, ""]);
}

/** A 9021 by `user` (with an invite code when given): the OK frame. */
export function join(c: Client, user: Signer, id: string, code?: string): Promise<[string, string, boolean, string]> {
  return c.publish(mod(9021, user, id, code === undefined ? [] : [["code", code]]));
}

/** The relay's latest 39000, 39001, 39002, 39003, 39005 of group `id`, signed by `self` (NIP-11 self: relay.ctx.relayKey.pubkey). */
export async function relayEvents(c: Client, id: string, self: string): Promise<Map<number, NostrEvent>> {
  const sub = `g-${Math.random().toString(36).slice(2, 10)}`;
  const { events } = await c.req(sub, { kinds: [39000, 39001, 39002, 39003, 39005], authors: [self], "#d": [id] });
  c.send(["CLOSE", sub]);
  const latest = new Map<number, NostrEvent>();
  for (const e of events) if ((latest.get(e.kind)?.created_at ?? -1) < e.created_at) latest.set(e.kind, e);
  return latest;
}
