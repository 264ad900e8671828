// Fuzzing, stage 1 (unit level; no relay): random and mutated client frames (gen.ts) go through
// parseClientMessage, compileFilter (REQ, COUNT and NEG-OPEN filters), validateEventShape /
// hasValidId (EVENT and AUTH payloads) and the matcher; the only thing any of them may throw is
// ProtocolError (SubscriptionError is one), and no call may take long.
// Run, replay, run longer: see gen.ts.
import { beforeAll, expect, test } from "bun:test";
import { hasValidId, serializeEvent, validateEventShape } from "../../src/protocol/event.ts";
import { canonicalFilterKey, compileFilter, matchFilter, type CompiledFilter } from "../../src/protocol/filter.ts";
import { parseClientMessage, SubscriptionError } from "../../src/protocol/messages.ts";
import { ProtocolError } from "../../src/protocol/reasons.ts";
import { filterLimits } from "../../src/policy/visibility.ts";
import { failOnRelayErrors, testConfig } from "../helpers.ts";
import {
  buildPool,
  CALL_BUDGET_MS,
  caseRng,
  genFrame,
  SECONDS,
  SEED,
  show,
  testTimeout,
  UNIT_CASES,
  type GenState,
  type Pool,
} from "./gen.ts";

// A console.error, uncaught exception or unhandled rejection fails the test too.
failOnRelayErrors();

let pool: Pool;
beforeAll(() => {
  pool = buildPool();
  console.log(`fuzz: FUZZ_SEED=${SEED}`);
});

test(
  "unit: parser, filter compiler and event validator throw nothing but ProtocolError, quickly",
  () => {
    const config = testConfig();
    const msgLimits = { maxSubIdLength: config.limits.max_subid_length, maxFilters: config.limits.max_filters };
    const fLimits = filterLimits(config);
    const samples = [...pool.plain, ...pool.events];
    let n = 0;
    const counts = { cases: 0, parsed: 0, protocolErrors: 0, filters: 0, filtersCompiled: 0, events: 0, eventsShapeOk: 0, idOk: 0 };
    const deadline = Date.now() + (SECONDS ?? 0) * 1000;
    const failures: string[] = [];
    let frame: string | Uint8Array = "";
    let i = 0;

    /** Runs one call; a non-ProtocolError throw or a slow call is a failure. */
    function guard<T>(what: string, fn: () => T): T | undefined {
      const t0 = performance.now();
      try {
        return fn();
      } catch (err) {
        if (err instanceof SubscriptionError && (typeof err.subId !== "string" || err.subId === ""))
          failures.push(`case ${i}: ${what}: SubscriptionError without a subscription id; frame ${show(frame)}`);
        if (err instanceof ProtocolError) {
          counts.protocolErrors++;
          if (!/^(invalid|error|rate-limited|blocked|restricted|auth-required|pow|duplicate|mute): /.test(err.text))
            failures.push(`case ${i}: ${what}: bad prefix ${JSON.stringify(err.text)}`);
          return undefined;
        }
        failures.push(`case ${i}: ${what} threw ${String((err as Error)?.stack ?? err).slice(0, 400)}; frame ${show(frame)}`);
        return undefined;
      } finally {
        const ms = performance.now() - t0;
        if (ms > CALL_BUDGET_MS) failures.push(`case ${i}: ${what} took ${ms.toFixed(0)} ms; frame ${show(frame)}`);
      }
    }

    const checkFilter = (raw: unknown) => {
      counts.filters++;
      const f = guard("compileFilter", () => compileFilter(raw, fLimits));
      if (!f) return;
      counts.filtersCompiled++;
      guard("matchFilter", () => {
        for (const e of samples) matchFilter(f as CompiledFilter, e);
      });
      guard("canonicalFilterKey", () => canonicalFilterKey(f));
    };
    const checkEvent = (raw: unknown) => {
      counts.events++;
      const e = guard("validateEventShape", () => validateEventShape(raw));
      if (!e) return;
      counts.eventsShapeOk++;
      if (guard("hasValidId", () => hasValidId(e))) counts.idOk++;
      guard("serializeEvent", () => JSON.parse(serializeEvent(e)));
    };

    const st: GenState = { nextId: () => `u${n++}`, openNeg: ["u1", "u2"], doneSubs: ["u3"] };
    for (i = 0; i < UNIT_CASES; i++) {
      if (UNIT_CASES === Infinity && Date.now() >= deadline) break;
      const rng = caseRng(1, i);
      const g = genFrame(rng, pool, st, true);
      frame = g;
      counts.cases++;
      const text = typeof g === "string" ? g : Buffer.from(g).toString("utf8");
      const msg = guard("parseClientMessage", () => parseClientMessage(text, msgLimits));
      // Also the payloads as they are, whatever the verb says: the validators see raw JSON values.
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        value = undefined;
      }
      if (Array.isArray(value)) {
        for (const x of value.slice(1, 4)) {
          checkEvent(x);
          checkFilter(x);
        }
      }
      if (msg) {
        counts.parsed++;
        if (msg.type === "REQ" || msg.type === "COUNT") msg.filters.forEach(checkFilter);
        if (msg.type === "NEG-OPEN") checkFilter(msg.filter);
        if (msg.type === "EVENT" || msg.type === "AUTH") checkEvent(msg.event);
      }
      if (failures.length >= 5) break;
    }
    console.log(`fuzz unit: seed=${SEED} ${JSON.stringify(counts)}`);
    expect(failures).toEqual([]);
    expect(counts.cases).toBeGreaterThan(0);
  },
  testTimeout(SECONDS, UNIT_CASES),
);
