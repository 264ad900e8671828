// The kind names both pages show (kinds.js, a browser module shared by the pages' scripts).
import { expect, test } from "bun:test";
// @ts-expect-error: a plain-JS browser module; its JSDoc types are checked with the pages' (pages/tsconfig.json), not here.
import { kindText } from "./kinds.js";

test("a kind with a common name reads 'number · name'; others the number alone", () => {
  expect(kindText(1)).toBe("1 · note");
  // Kinds a relay sees every day (the status page showed a bare '1111' beside '1 · note').
  expect(kindText(1111)).toBe("1111 · comment");
  expect(kindText(9734)).toBe("9734 · zap request");
  expect(kindText(14)).toBe("14 · chat message");
  expect(kindText(12345)).toBe("12345");
});
