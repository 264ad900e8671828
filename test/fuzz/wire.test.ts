// Fuzzing, stage 2 (over the wire): a live in-process relay gets thousands of fuzzed frames (gen.ts)
// over a few connections. Every frame is paired with the answer NIP-01 asks for (oracle.ts:
// EVENT/AUTH -> one OK; REQ -> EOSE or CLOSED; COUNT -> COUNT or CLOSED; NEG-OPEN/NEG-MSG -> NEG-MSG
// or NEG-ERR; malformed -> NOTICE; CLOSE/NEG-CLOSE -> nothing; frames over the hard size limit ->
// close 1009). A clean control client is served throughout, every acknowledged event can be read
// back intact, and the relay logs no "handler failed" (console.error) and raises no uncaught
// exception / unhandled rejection. Run, replay, run longer: see gen.ts.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { hasValidId, validateEventShape, type NostrEvent } from "../../src/protocol/event.ts";
import { failOnRelayErrors, startTestRelay, type TestRelay } from "../helpers.ts";
import {
  ANSWER_TIMEOUT_MS,
  BATCH,
  buildPool,
  caseRng,
  genFrame,
  HARD_LIMIT,
  MAX_MESSAGE,
  MAX_SUBID,
  SECONDS,
  SEED,
  serialize,
  show,
  testTimeout,
  WIRE_CONNECTIONS,
  WIRE_FRAMES,
  type GenState,
  type Pool,
} from "./gen.ts";
import { Conn, type Expectation, NEG_PREFIX, oracle, PREFIX, until, type Verdict } from "./oracle.ts";

failOnRelayErrors();

let pool: Pool;
beforeAll(() => {
  pool = buildPool();
  console.log(`fuzz: FUZZ_SEED=${SEED}`);
});

let relay: TestRelay | undefined;
const openConns: Conn[] = [];
/** The frames each connection sent last, printed if the wire test dies half-way (for reproduction). */
const lastFrames: (string | Uint8Array)[][] = [];
let wireFinished = false;
afterAll(async () => {
  if (relay && !wireFinished)
    for (const [w, frames] of lastFrames.entries())
      if (frames) console.log(`fuzz wire: connection ${w} was last sent:\n  ${frames.map((f) => show(f).slice(0, 200)).join("\n  ")}`);
  for (const c of openConns) if (!c.closed) c.ws.close();
  await relay?.stop();
});

test(
  "wire: every fuzzed frame gets its NIP-01 answer, the relay keeps serving, nothing acknowledged is lost",
  async () => {
    relay = await startTestRelay({
      limits: { max_message_bytes: MAX_MESSAGE, max_subscriptions: 100, max_subid_length: MAX_SUBID, max_event_tags: 200 },
    });
    const url = relay.url;
    const connect = async () => {
      const c = await Conn.open(url);
      openConns.push(c);
      return c;
    };
    const failures: string[] = [];
    const stats = {
      frames: 0,
      binary: 0,
      oversize: 0,
      closed1009: 0,
      skipped: 0,
      answers: {} as Record<string, number>,
      verbs: {} as Record<string, number>,
      liveEvents: 0,
      controlChecks: 0,
    };
    const acked = new Map<string, NostrEvent>(); // plain events answered OK true
    const plainById = new Map(pool.plain.map((e) => [e.id, e]));
    const start = Date.now();
    const budgetLeft = () => (WIRE_FRAMES === Infinity ? Date.now() - start < (SECONDS ?? 0) * 1000 : stats.frames < WIRE_FRAMES);
    let frameNo = 0;

    async function controlCheck(tag: string): Promise<void> {
      const c = await connect();
      const id = `control-${stats.controlChecks++}`;
      c.ws.send(JSON.stringify(["REQ", id, { kinds: [1], limit: 1 }]));
      const ok = await until(() => c.inbox.some((f) => f === `["EOSE",${JSON.stringify(id)}]`), 10_000);
      if (!ok) failures.push(`control client got no EOSE (${tag}); got ${c.inbox.join(" ").slice(0, 300)}`);
      c.ws.close();
    }

    async function worker(w: number): Promise<void> {
      let conn = await connect();
      let n = 0;
      // Answer pairing state of this connection.
      let pending = new Map<string, Expectation[]>();
      let reqIds = new Set<string>(); // ids of REQs sent (EVENT frames may name these)
      let usedSub = new Set<string>();
      let openSubs: string[] = [];
      const st: GenState = { nextId: () => `w${w}-${n++}`, openNeg: [], doneSubs: [] };
      let read = 0;

      const take = (keys: string[], type: string): Expectation | undefined => {
        for (const k of keys) {
          const list = pending.get(k);
          const i = list?.findIndex((e) => e.accept.includes(type)) ?? -1;
          if (list && i >= 0) {
            const [e] = list.splice(i, 1);
            if (!list.length) pending.delete(k);
            return e;
          }
        }
        return undefined;
      };

      /** Pairs everything received so far with what was sent. */
      const drain = () => {
        for (; read < conn.inbox.length; read++) {
          const raw = conn.inbox[read]!;
          let f: any;
          try {
            f = JSON.parse(raw);
          } catch {
            failures.push(`relay sent a frame that is not JSON: ${raw.slice(0, 200)}`);
            continue;
          }
          const type = Array.isArray(f) ? f[0] : undefined;
          stats.answers[type] = (stats.answers[type] ?? 0) + 1;
          const bad = (why: string, e?: Expectation) =>
            failures.push(`${why}: ${raw.slice(0, 300)}${e ? ` for frame #${e.idx} ${show(e.frame)}` : ""}`);
          switch (type) {
            case "AUTH":
              if (typeof f[1] !== "string") bad("bad AUTH challenge");
              break;
            case "EVENT": {
              stats.liveEvents++;
              if (!reqIds.has(f[1])) bad("EVENT for a subscription that was never opened");
              try {
                const e = validateEventShape(f[2]);
                if (!hasValidId(e)) bad("served event whose id does not match its content");
              } catch {
                bad("served event of invalid shape");
              }
              break;
            }
            case "OK": {
              // Two frames may carry the same event id; the refusal of an oversize one is told apart by its text.
              const oversize = typeof f[3] === "string" && f[3].startsWith("invalid: message is larger");
              const e = take(oversize ? ["OVERSIZE_OK", `OK:${f[1]}`, "ANY"] : [`OK:${f[1]}`, "OVERSIZE_OK", "ANY"], "OK");
              if (!e) bad("unexpected OK");
              else if (typeof f[2] !== "boolean" || typeof f[3] !== "string") bad("malformed OK", e);
              else if (f[2] === false && !PREFIX.test(f[3])) bad("OK false without a NIP-01 prefix", e);
              else if (f[2] === true && f[3] !== "" && !f[3].startsWith("duplicate:")) bad("OK true with an odd message", e);
              else if (f[2] === true && plainById.has(f[1]) && e.key === `OK:${f[1]}`) acked.set(f[1], plainById.get(f[1])!);
              if (e?.key === "OVERSIZE_OK" && (f[2] !== false || !String(f[3]).startsWith("invalid:")))
                bad("oversize EVENT not refused with invalid:", e);
              break;
            }
            case "EOSE":
            case "COUNT":
            case "CLOSED": {
              const e = take(type === "CLOSED" ? [`SUB:${f[1]}`, "ANY"] : [`SUB:${f[1]}`], type);
              if (!e) bad(`unexpected ${type}`);
              else if (type === "CLOSED" && (typeof f[2] !== "string" || !PREFIX.test(f[2]))) bad("CLOSED without a NIP-01 prefix", e);
              else if (type === "COUNT" && !(Number.isSafeInteger(f[2]?.count) && f[2].count >= 0)) bad("COUNT without a count", e);
              if (type === "EOSE") openSubs.push(f[1]);
              break;
            }
            case "NEG-MSG":
            case "NEG-ERR": {
              const e = take(type === "NEG-ERR" ? [`NEG:${f[1]}`, "ANY"] : [`NEG:${f[1]}`], type);
              if (!e) bad(`unexpected ${type}`);
              else if (type === "NEG-MSG" && (typeof f[2] !== "string" || !/^([0-9a-f]{2})*$/.test(f[2])))
                bad("NEG-MSG that is not hex", e);
              else if (type === "NEG-ERR" && (typeof f[2] !== "string" || !NEG_PREFIX.test(f[2]))) bad("NEG-ERR without a prefix", e);
              if (type === "NEG-MSG" && e && !st.openNeg.includes(f[1])) st.openNeg.push(f[1]);
              if (type === "NEG-ERR") st.openNeg = st.openNeg.filter((x) => x !== f[1]);
              break;
            }
            case "NOTICE": {
              const e = take(["NOTICE", "ANY"], "NOTICE");
              if (!e) bad("unexpected NOTICE");
              break;
            }
            default:
              bad("unknown frame type");
          }
        }
      };
      const pendingCount = () => [...pending.values()].reduce((a, l) => a + l.length, 0);

      while (budgetLeft() && failures.length === 0) {
        // One batch: generate, send, wait until every answer is in.
        const batchSubs = new Set<string>();
        const batchNeg = new Set<string>();
        const batchNegOpen = new Set<string>();
        let huge: string | undefined;
        const sent: (string | Uint8Array)[] = (lastFrames[w] = []);
        for (let k = 0; k < BATCH && budgetLeft(); k++) {
          const idx = frameNo++;
          let frame: string | Uint8Array | undefined;
          let v: Verdict | undefined;
          for (let attempt = 0; attempt < 20; attempt++) {
            let g = genFrame(caseRng(2, idx * 20 + attempt), pool, st, false);
            // What the relay will see: strings go out as UTF-8, so lone surrogates become U+FFFD.
            if (typeof g === "string") g = g.toWellFormed();
            const verdict = oracle(g);
            if (verdict.kind === "skip") continue;
            if (verdict.kind === "close1009") {
              huge ??= g as string;
              continue;
            }
            // Keep answers pairable: a subscription id is used by one REQ/COUNT only, and a CLOSE never
            // races a REQ of the same batch; a NEG id opened in this batch is used by nothing else in it.
            if (verdict.subId !== undefined && (verdict.verb === "CLOSE" ? batchSubs.has(verdict.subId) : usedSub.has(verdict.subId)))
              continue;
            const exclusive = verdict.verb === "NEG-OPEN" || verdict.verb === "ANY";
            if (verdict.negId !== undefined && (batchNegOpen.has(verdict.negId) || (exclusive && batchNeg.has(verdict.negId)))) continue;
            frame = g;
            v = verdict;
            break;
          }
          if (!frame || !v || v.kind !== "expect") {
            stats.skipped++;
            continue;
          }
          if (v.subId !== undefined) {
            usedSub.add(v.subId);
            if (v.verb !== "CLOSE") batchSubs.add(v.subId);
            if (v.verb === "REQ") reqIds.add(v.subId);
          }
          if (v.negId !== undefined) {
            batchNeg.add(v.negId);
            if (v.verb === "NEG-OPEN" || v.verb === "ANY") batchNegOpen.add(v.negId);
          }
          if (v.exp) {
            const list = pending.get(v.exp.key) ?? [];
            list.push({ ...v.exp, frame, idx });
            pending.set(v.exp.key, list);
          }
          stats.frames++;
          if (typeof frame !== "string") stats.binary++;
          else if (Buffer.byteLength(frame) > MAX_MESSAGE) stats.oversize++;
          const verb = typeof frame === "string" ? ((v as any).verb ?? "malformed") : "binary";
          stats.verbs[verb] = (stats.verbs[verb] ?? 0) + 1;
          sent.push(frame);
          conn.ws.send(frame);
        }
        const answered = await until(() => (drain(), pendingCount() === 0 || conn.closed), ANSWER_TIMEOUT_MS);
        drain();
        if (conn.closed) {
          failures.push(`connection closed by the relay (code ${conn.closeCode}) with ${pendingCount()} frames unanswered`);
          break;
        }
        if (!answered) {
          const missing = [...pending.values()].flat().slice(0, 5);
          failures.push(
            `no answer within ${ANSWER_TIMEOUT_MS} ms to ${pendingCount()} frames, e.g. ${missing.map((e) => `#${e.idx} (${e.key}, wanted ${e.accept.join("/")}) ${show(e.frame)}`).join("; ")}`,
          );
          break;
        }
        // Free the subscriptions that stay open after EOSE.
        for (const id of openSubs) conn.ws.send(JSON.stringify(["CLOSE", id]));
        st.doneSubs.push(...openSubs.slice(0, 5));
        openSubs = [];
        // Now and then a frame over the hard limit: the relay closes this connection with 1009.
        const hugeRng = caseRng(3, frameNo);
        if (!huge && hugeRng.chance(0.04)) {
          const pad = "x".repeat(HARD_LIMIT + hugeRng.int(4096));
          huge = hugeRng.pick([
            () => serialize(["EVENT", { ...hugeRng.pick(pool.events), content: pad }]),
            () => serialize(["REQ", st.nextId(), { search: pad }]),
            () => `["REQ","\\uZZZZ",${pad}`,
            () => pad,
          ])();
        }
        if (huge) {
          lastFrames[w] = [huge];
          stats.frames++;
          conn.ws.send(huge);
          const closed = await until(() => conn.closed, 5000);
          drain();
          if (!closed || conn.closeCode !== 1009)
            failures.push(
              `frame of ${Buffer.byteLength(huge)} bytes (over ${HARD_LIMIT}): expected close 1009, got ${closed ? `close ${conn.closeCode}` : "no close"}`,
            );
          stats.closed1009++;
          conn = await connect();
          read = 0;
          pending = new Map();
          reqIds = new Set();
          usedSub = new Set();
          st.openNeg = [];
          st.doneSubs = [];
        }
      }
      // Late extra answers would show up here.
      await Bun.sleep(200);
      drain();
      if (!conn.closed) conn.ws.close();
    }

    const control = (async () => {
      while (budgetLeft() && failures.length === 0) {
        await controlCheck("during the fuzz");
        await Bun.sleep(500);
      }
    })();
    await Promise.all([...Array.from({ length: WIRE_CONNECTIONS }, (_, w) => worker(w)), control]);
    await controlCheck("after the fuzz");

    // Every plain event the relay acknowledged is still there, byte for byte.
    if (failures.length === 0) {
      const c = await connect();
      const ids = [...acked.keys()];
      c.ws.send(JSON.stringify(["REQ", "readback", { ids }]));
      if (!(await until(() => c.inbox.some((f) => f.startsWith('["EOSE","readback"') || f.startsWith('["CLOSED","readback"')), 5000)))
        failures.push("read-back REQ unanswered");
      const got = new Map(
        c.inbox
          .filter((f) => f.startsWith('["EVENT","readback"'))
          .map((f) => JSON.parse(f)[2] as NostrEvent)
          .map((e) => [e.id, e]),
      );
      for (const [id, e] of acked)
        if (!Bun.deepEquals(got.get(id), e))
          failures.push(`acknowledged event ${id} read back as ${JSON.stringify(got.get(id))?.slice(0, 200)}`);
      c.ws.close();
    }

    wireFinished = true;
    const secs = ((Date.now() - start) / 1000).toFixed(1);
    console.log(`fuzz wire: seed=${SEED} ${secs}s ${JSON.stringify({ ...stats, acked: acked.size })}`);
    expect(failures.slice(0, 10)).toEqual([]);
    expect(stats.frames).toBeGreaterThan(0);
    expect(acked.size).toBeGreaterThan(0);
  },
  testTimeout(SECONDS, WIRE_FRAMES),
);
