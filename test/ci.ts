// Whether this is a CI run, and what a missing prerequisite means there. .ci/run exports CI=true
// and installs everything the suite needs, so in CI a missing tool is a failure; on a developer's
// machine the tests that need it are left out with a printed reason. Every guard reads CI here.
import { test } from "bun:test";

/** CI set to anything but "", "0" or "false" (any case): "true", "1", "yes", a CI system's own value. */
export const isCI = (value: string | undefined): boolean => value !== undefined && !/^(|0|false)$/i.test(value.trim());

export const inCI = isCI(process.env.CI);

const asked = new Map<string, boolean>();

/**
 * Whether the tests that need `what` run here; `missing` says why it is unavailable (undefined:
 * it is there). Locally a missing prerequisite prints the reason once and its tests are left out.
 * In CI it is a failing test named after it (and the left-out tests count as skips, which
 * .ci/run also fails on). Call it where the tests are declared (module or describe level).
 */
export function needInCI(what: string, missing: string | undefined): boolean {
  const known = asked.get(what);
  if (known !== undefined) return known;
  const ok = missing === undefined;
  asked.set(what, ok);
  if (!ok && inCI) {
    test(`${what} is installed (required in CI)`, () => {
      throw new Error(`${what}: ${missing}; .ci/run installs it and CI must run its tests`);
    });
  } else if (!ok) {
    console.log(`${what}: ${missing}; its tests are left out here (CI installs it and runs them)`);
  }
  return ok;
}
