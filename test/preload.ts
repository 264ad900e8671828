// Loaded before every test file (bunfig.toml [test] preload), in the SQLite run and the Postgres
// suite alike: a test that makes no assertion fails, since a test that asserts nothing cannot fail.
import { beforeEach, expect } from "bun:test";

beforeEach(() => {
  expect.hasAssertions();
});
