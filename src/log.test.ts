import { afterEach, describe, expect, spyOn, test } from "bun:test";
import { jsonLine, Logger, LogLimiter } from "./log.ts";

describe("LogLimiter", () => {
  test("one line per kind per interval; the held-back ones are counted and handed to the next line", () => {
    const l = new LogLimiter(60_000);
    expect(l.take("a", 1, 0)).toEqual({ count: 0, weight: 0 });
    for (let t = 1; t <= 100; t++) expect(l.take("a", 3, t)).toBeUndefined();
    // Another kind has its own interval.
    expect(l.take("b", 1, 50)).toEqual({ count: 0, weight: 0 });
    expect(l.take("a", 1, 60_000)).toEqual({ count: 100, weight: 300 });
    expect(l.take("a", 1, 60_001)).toBeUndefined();
  });

  test("takeHeld tells what each kind holds back, once", () => {
    const l = new LogLimiter(60_000);
    l.take("a", 1, 0);
    l.take("a", 5, 1);
    l.take("b", 1, 0);
    expect(l.takeHeld()).toEqual([["a", { count: 1, weight: 5 }]]);
    expect(l.takeHeld()).toEqual([]);
    expect(l.take("a", 1, 60_000)).toEqual({ count: 0, weight: 0 });
  });
});

describe("Logger", () => {
  // What each console method was handed, as one string a call.
  const spies = () => {
    const made = (["log", "warn", "error"] as const).map((m) => [m, spyOn(console, m).mockImplementation(() => {})] as const);
    const calls = () => Object.fromEntries(made.map(([m, s]) => [m, s.mock.calls.map((c) => c.map(String).join(" "))]));
    return { calls, restore: () => made.forEach(([, s]) => s.mockRestore()) };
  };
  let restore = () => {};
  afterEach(() => restore());

  test("a level shows its own lines and the more severe ones; info and debug to stdout, warn and error to stderr", () => {
    const s = spies();
    restore = s.restore;
    const log = new Logger();
    const all = () => (log.error("e"), log.warn("w"), log.info("i"), log.debug("d"));
    all();
    expect(s.calls()).toEqual({ log: ["i"], warn: ["warning: w"], error: ["error: e"] });
    log.configure({ level: "warn" });
    all();
    log.configure({ level: "debug" });
    all();
    expect(s.calls()).toEqual({
      log: ["i", "i", "d"],
      warn: ["warning: w", "warning: w", "warning: w"],
      error: ["error: e", "error: e", "error: e"],
    });
    expect([log.enabled("debug"), new Logger().enabled("debug"), new Logger().enabled("info")]).toEqual([true, false, true]);
  });

  test("text: info lines as written; warn and error tagged unless they say what they are; an error's detail passed on", () => {
    const s = spies();
    restore = s.restore;
    const log = new Logger();
    log.warn("warning: [limits] x does not fit");
    log.warn("note: sharing the port");
    log.error("writer thread failed:", new Error("disk full"));
    expect(s.calls()).toEqual({
      log: [],
      warn: ["warning: [limits] x does not fit", "note: sharing the port"],
      error: ["error: writer thread failed: Error: disk full"],
    });
  });

  test("json: one object a line with time, level and msg; an Error as error and stack, plain objects as fields", () => {
    const at = new Date("2026-12-06T09:00:00.000Z");
    expect(JSON.parse(jsonLine("info", "listening", [], at))).toEqual({
      time: "2026-12-06T09:00:00.000Z",
      level: "info",
      msg: "listening",
    });
    const err = new Error("disk full");
    const line = JSON.parse(jsonLine("error", "writer thread failed:", [err, { batch: 3, big: 5n }, 7], at));
    expect(line).toMatchObject({ level: "error", msg: "writer thread failed: 7", error: "disk full", batch: 3, big: 5 });
    expect(line.stack).toContain("disk full");
    expect(JSON.parse(jsonLine("warn", "m", [{ level: "x", msg: "y", n: 1 }], at))).toEqual({
      time: "2026-12-06T09:00:00.000Z",
      level: "warn",
      msg: "m",
      _level: "x",
      _msg: "y",
      n: 1,
    });
    const s = spies();
    restore = s.restore;
    const log = new Logger();
    log.configure({ format: "json", level: "debug" });
    log.debug("d");
    log.warn("warning: w");
    const lines = [...s.calls().log!, ...s.calls().warn!].map((l) => JSON.parse(l));
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      ["debug", "d"],
      ["warn", "warning: w"],
    ]);
    for (const l of lines) expect(new Date(l.time).toISOString()).toBe(l.time);
  });

  test("configure ignores what is not a level or a format (the schema refuses them before)", () => {
    const log = new Logger();
    log.configure({ level: "verbose", format: "xml" });
    expect([log.level, log.format]).toEqual(["info", "text"]);
  });
});
