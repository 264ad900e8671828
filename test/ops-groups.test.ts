// NIP-29 groups through the operator commands: a group relay exported and imported into a fresh
// data directory with the same relay key file has the same groups, members and relay-signed
// 39000-39005; `bunstr sync` from the running relay likewise; a 39000 signed by another key in
// the input is refused, as `bunstr stream` refuses the 39xxx of a relay whose key is not this
// one's. The commands run as real processes.
import { afterAll, describe, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NostrEvent } from "../src/protocol/event.ts";
import { createGroup, connectAs, groupRelay, join as joinGroup, mod, relayEvents } from "./groups-helpers.ts";
import { Client, signer, type Signer, type TestRelay } from "./helpers.ts";
import { bunstr, importFile, writeLines } from "./ops-helpers.ts";
import { spawnBunstr } from "./relay-process.ts";

const root = mkdtempSync(join(tmpdir(), "bunstr-ops-groups-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A config file turning groups on (the relay key is the data directory's relay.key). */
function groupsConfig(): string {
  const path = join(root, "groups.toml");
  writeFileSync(path, '[groups]\nenabled = true\ncreators = "anyone"\n');
  return path;
}

/** A fresh data directory holding a copy of `from`'s relay key (0600, as backup writes it). */
function dataDirWithKey(name: string, from: TestRelay): string {
  const dir = mkdtempSync(join(root, `${name}-`));
  copyFileSync(join(from.dir, "relay.key"), join(dir, "relay.key"));
  return dir;
}

interface Fixture {
  owner: Signer;
  members: Signer[];
}

/** Group "pub" (open: two joins, one with the moderator role) and "priv" (private, closed: a join by invite, one removed). */
async function populate(relay: TestRelay): Promise<Fixture> {
  const owner = signer();
  const members = [signer(), signer(), signer()];
  const c = await connectAs(relay, owner);
  await createGroup(c, relay, owner, "pub");
  await createGroup(c, relay, owner, "priv", [["private"], ["closed"], ["name", "Private room"]]);
  for (const m of members.slice(0, 2)) expect((await joinGroup(c, m, "pub"))[2]).toBe(true);
  const roles = mod(9000, owner, "pub", [["p", members[0]!.pubkey, "moderator"]]);
  expect((await c.publish(roles))[2]).toBe(true);
  for (const code of ["letmein", "letmein2", "unused"]) expect((await c.publish(mod(9009, owner, "priv", [["code", code]])))[2]).toBe(true);
  expect((await joinGroup(c, members[2]!, "priv", "letmein"))[2]).toBe(true);
  expect((await joinGroup(c, members[1]!, "priv", "letmein2"))[2]).toBe(true);
  const removal = mod(9001, owner, "priv", [["p", members[1]!.pubkey]]);
  expect((await c.publish(removal))[2]).toBe(true);
  expect((await c.publish(mod(9, members[0]!, "pub")))[2]).toBe(true);
  c.close();
  return { owner, members };
}

/** What must survive: the group list, each group's members and roles, the relay's 39xxx (as stored). */
async function snapshot(relay: TestRelay, ids: string[]): Promise<Record<string, unknown>> {
  const groups = relay.ctx.groups!;
  const c = await Client.connect(relay.url);
  // The relay key reads every group (it is no member of "priv": read as its owner would).
  const out: Record<string, unknown> = {
    list: groups
      .list()
      .filter((g) => ids.includes(g.id))
      .sort((a, b) => a.id.localeCompare(b.id)),
  };
  for (const id of ids) {
    out[`members:${id}`] = groups.members(id)?.sort((a, b) => a.pubkey.localeCompare(b.pubkey));
    const latest = await relayEvents(c, id, relay.ctx.relayKey.pubkey);
    out[`relay:${id}`] = [...latest.values()].sort((a, b) => a.kind - b.kind).map((e: NostrEvent) => [e.kind, e.tags]);
  }
  c.close();
  return out;
}

describe("groups through export, import and sync", () => {
  test("export, then import into a fresh data directory with the same key: same groups, members and 39xxx; a foreign 39000 is refused", async () => {
    const source = await groupRelay();
    let target: TestRelay | undefined;
    let closed = false;
    try {
      const { owner } = await populate(source);
      const before = await snapshot(source, ["pub", "priv"]);
      expect((before.list as unknown[]).length).toBe(2);
      expect((before["relay:pub"] as unknown[]).length).toBeGreaterThanOrEqual(3); // 39000, 39001, 39002 (39003)
      await source.close();
      closed = true;

      const exported = await bunstr(["export", "--db", source.dbPath]);
      expect(exported.code).toBe(0);
      // An archive may hold a 39000 for a group signed by someone else: never taken.
      const forged = owner.sign({
        kind: 39000,
        created_at: Math.floor(Date.now() / 1000),
        tags: [
          ["d", "pub"],
          ["name", "mine now"],
        ],
        content: "",
      });
      const file = writeLines(join(root, "export.jsonl"), [...exported.stdout.trim().split("\n"), forged]);

      const dir = dataDirWithKey("import", source);
      const summary = await importFile(["--config", groupsConfig(), "--data-dir", dir], file);
      expect(summary.refused).toBe(1);
      expect(summary.accepted).toBe(exported.stdout.trim().split("\n").length);

      target = await groupRelay({}, { dir });
      expect(target.ctx.relayKey.pubkey).toBe(source.ctx.relayKey.pubkey);
      expect(await snapshot(target, ["pub", "priv"])).toEqual(before);
      const c = await Client.connect(target.url);
      const { events } = await c.req("forged", { kinds: [39000], authors: [owner.pubkey] });
      expect(events).toEqual([]);
      c.close();
    } finally {
      await target?.stop();
      if (closed) rmSync(source.dir, { recursive: true, force: true });
      else await source.stop();
    }
  });

  test("bunstr sync from the running relay into a fresh data directory with the same key: the same open group", async () => {
    const source = await groupRelay();
    let target: TestRelay | undefined;
    try {
      await populate(source);
      // Private groups' events are for their members: an anonymous sync downloads the open group.
      const before = await snapshot(source, ["pub"]);
      const dir = dataDirWithKey("sync", source);
      const r = await bunstr(["sync", source.url, "--dir", "down", "--json", "--config", groupsConfig(), "--data-dir", dir]);
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout).imported.refused).toBe(0);
      target = await groupRelay({}, { dir });
      expect(await snapshot(target, ["pub"])).toEqual(before);
    } finally {
      await target?.stop();
      await source.stop();
    }
  });
});

test("bunstr stream into a data directory with another relay key: the source relay's 39xxx are refused, the users' group events stored", async () => {
  const source = await groupRelay();
  const dir = mkdtempSync(join(root, "stream-"));
  const stream = await spawnBunstr(["stream", source.url, "--json", "--config", groupsConfig(), "--data-dir", dir], root, false);
  try {
    await stream.waitFor("subscribed to", 15_000);
    const owner = signer();
    const c = await connectAs(source, owner);
    await createGroup(c, source, owner, "streamed");
    c.close();
    // The 9007 stored here; the relay's 39000-39003 answering it came before its OK, so with it.
    const deadline = Date.now() + 15_000;
    for (let stored = 0; stored < 1 && Date.now() < deadline; await Bun.sleep(200))
      stored = JSON.parse((await bunstr(["stats", "--json", "--data-dir", dir])).stdout).events;
    await Bun.sleep(500);
  } finally {
    stream.proc.kill("SIGINT");
    expect(await stream.proc.exited).toBe(0);
    await source.stop();
  }
  const summary = JSON.parse(
    stream
      .output()
      .split("\n")
      .find((l) => l.startsWith("{"))!,
  );
  expect(summary).toMatchObject({ accepted: 1, refused: 4 });
});
