// A client publishing through a hand-over (docs/operations.md, With systemd: bunstr@blue and
// bunstr@green): sends slice N (argv[2]) of the pre-signed events in /root/events.json's `stream`,
// one every 50 ms, on one websocket at a time. When its socket closes (1012 from the draining
// process) it reconnects and sends again what was not answered OK true (the drain's
// "error: relay is shutting down" refusals, anything unanswered). Stops publishing 1 s after
// /root/handover.done appears, then reads every event it sent back by id on a new connection.
// Prints "open" at its first connection, then one line:
//   published N, acknowledged A, stored S, connections C, closes [1012], refused R
// and exits 0 when every event it published was acknowledged and is stored, after a reconnection.
import { existsSync } from "node:fs";

const dir = process.env.HANDOVER_DIR ?? "/root"; // elsewhere, to try it outside the VM
const { stream } = JSON.parse(await Bun.file(`${dir}/events.json`).text());
const slice = Number(process.argv[2] ?? 0);
const events = stream.slice(slice * 400, slice * 400 + 400);
const url = process.env.RELAY_URL ?? "ws://127.0.0.1:7447/";
const sent = new Map(); // id -> event, every event published so far
const acked = new Set();
const pending = new Map(); // id -> event, sent on the current socket and not answered yet
const again = []; // events to send again
const closes = [];
let refused = 0;
let connections = 0;
let next = 0;
let stopAt = Infinity;
let ws;

function connect() {
  const s = new WebSocket(url);
  s.onopen = () => {
    if (++connections === 1) console.log("open");
    ws = s;
  };
  s.onmessage = (m) => {
    const [type, id, ok] = JSON.parse(String(m.data));
    if (type !== "OK" || !pending.has(id)) return;
    const e = pending.get(id);
    pending.delete(id);
    if (ok) acked.add(id);
    else refused++, again.push(e);
  };
  s.onclose = (c) => {
    if (ws === s) ws = undefined;
    if (connections > 0) closes.push(c.code);
    again.push(...pending.values());
    pending.clear();
    setTimeout(connect, 100);
  };
}

const tick = setInterval(() => {
  if (stopAt === Infinity && existsSync(`${dir}/handover.done`)) stopAt = Date.now() + 1000;
  if (!ws || ws.readyState !== WebSocket.OPEN) return;
  let e = again.shift();
  if (!e && Date.now() < stopAt && next < events.length) e = events[next++];
  if (e) {
    sent.set(e.id, e);
    pending.set(e.id, e);
    ws.send(JSON.stringify(["EVENT", e]));
  } else if (Date.now() >= stopAt && pending.size === 0 && again.length === 0) {
    clearInterval(tick);
    verify();
  }
}, 50);

/** Reads the published events back, 100 ids a REQ, on a connection of its own. */
function verify() {
  const ids = [...sent.keys()];
  const stored = new Set();
  const check = new WebSocket(url);
  let at = 0;
  const req = () => check.send(JSON.stringify(["REQ", "v", { ids: ids.slice(at, at + 100) }]));
  check.onopen = req;
  check.onmessage = (m) => {
    const f = JSON.parse(String(m.data));
    if (f[0] === "EVENT") stored.add(f[2].id);
    if (f[0] !== "EOSE") return;
    at += 100;
    if (at < ids.length) return req();
    console.log(
      `published ${sent.size}, acknowledged ${acked.size}, stored ${stored.size}, connections ${connections}, closes [${closes}], refused ${refused}` +
        (next === events.length ? " (ran out of events)" : ""),
    );
    const ok = sent.size > 0 && acked.size === sent.size && stored.size === sent.size && connections >= 2;
    process.exit(ok ? 0 : 1);
  };
}

connect();
setTimeout(() => {
  console.log(`timeout: published ${sent.size}, acknowledged ${acked.size}, connections ${connections}, closes [${closes}]`);
  process.exit(2);
}, 180_000);
