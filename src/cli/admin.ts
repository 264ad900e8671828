// `bunstr admin add|remove NPUB|HEX --config FILE` and `bunstr admin list --config FILE`: who may
// use the /admin page and the NIP-86 API, edited in the operator's config file in place (comments
// and layout kept: config/edit-admins.ts), then the relay running with that file told to reload
// it (SIGHUP, as `systemctl reload bunstr` does), so the key works without a restart.
import { readFileSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { parseFlags } from "./args.ts";
import { ConfigEditError, editAdmins, listAdmins } from "../config/edit-admins.ts";
import { encodeNpub, pubkeyOf } from "../nips/nip19.ts";
import { UsageError } from "./options.ts";
import { relaysUsing, runningRelays } from "./running.ts";

const USAGE = "usage: bunstr admin add|remove NPUB|HEX --config FILE | bunstr admin list --config FILE";

/** Tells each relay running with `file` to reload it; lines saying what was done. */
function reloadRelays(file: string, pids = relaysUsing(file)): string[] {
  if (pids.length === 0)
    return [
      `no relay running with --config ${file} was found on this machine: the change applies when it starts,`,
      "or reload the one running: systemctl reload bunstr, or kill -HUP <pid> (the pid ends its `listening on` line)",
    ];
  return pids.map((pid) => {
    try {
      process.kill(pid, "SIGHUP");
      return `sent SIGHUP to the relay (pid ${pid}) running with this file: it reloads the config now (its log says "SIGHUP: config reloaded")`;
    } catch (err) {
      return `could not signal the relay (pid ${pid}): ${(err as Error).message}; run this as its user or root, or: systemctl reload bunstr`;
    }
  });
}

/**
 * After a --config that is not there (the /admin page's command names the systemd unit's file,
 * which a relay started by hand does not use): the files the relays running here serve with.
 */
function runningHint(): string {
  const relays = runningRelays();
  if (relays.length === 0) return "";
  const each = relays.slice(0, 10).map((r) => `--config ${r.file} (pid ${r.pid})`);
  const more = relays.length > 10 ? `, and ${relays.length - 10} more` : "";
  return `\n${relays.length === 1 ? "the relay running on this machine serves with" : "relays running on this machine serve with"} ${each.join(", ")}${more}: give its file`;
}

const shown = (pk: string) => `${encodeNpub(pk)} (${pk})`;

export function adminCommand(argv: string[]): number {
  try {
    return run(argv);
  } catch (err) {
    if (!(err instanceof ConfigEditError)) throw err;
    console.error(`error: ${err.message}; the file was not changed`);
    return 2;
  }
}

function run(argv: string[]): number {
  const { values, positionals } = parseFlags({ args: argv, strict: true, allowPositionals: true, options: { config: { type: "string" } } });
  const [sub, key, ...extra] = positionals;
  if (!values.config)
    throw new UsageError(`${USAGE}\n--config FILE: the config file the relay runs with (the systemd unit's is /etc/bunstr/config.toml)`);
  const file = resolve(values.config);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${(err as Error).message}${runningHint()}`);
  }
  if (sub === "list" && key === undefined) {
    const before = listAdmins(text, file);
    if (before.length === 0)
      console.log(`${file}: [admin] pubkeys is empty: no one may use /admin (bunstr admin add NPUB --config ${values.config})`);
    for (const pk of before) console.log(shown(pk));
    return 0;
  }
  if ((sub !== "add" && sub !== "remove") || key === undefined || extra.length > 0) throw new UsageError(USAGE);
  const pk = pubkeyOf(key);
  if (!pk) throw new UsageError(`${key} is not a pubkey: give an npub1… or 64 hex characters`);
  const edit = editAdmins(text, sub, pk, file);
  if (edit.text === text) {
    console.log(`${shown(pk)} is ${sub === "add" ? "already" : "not"} in [admin] pubkeys in ${file}: nothing to change`);
    return 0;
  }
  // In place (not a new file renamed over it): the file keeps its owner and mode, which the
  // relay's user needs to read it.
  writeFileSync(file, edit.text);
  console.log(
    `${sub === "add" ? "added" : "removed"} ${shown(pk)} ${sub === "add" ? "to" : "from"} [admin] pubkeys in ${file} (${edit.after.length} admin${edit.after.length === 1 ? "" : "s"} now)`,
  );
  for (const line of reloadRelays(file)) console.log(line);
  return 0;
}
