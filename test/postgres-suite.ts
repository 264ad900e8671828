// The end-to-end suite again on the Postgres store (BUNSTR_TEST_STORE=postgres), then the
// multi-node test and the writer parity test (*.pgtest.ts, which the default `bun test` does not pick up).
// Run by `npm test` after the SQLite suite. Without PostgreSQL and Redis on loopback it is
// skipped with the reason, locally; in CI (CI set) that is a failure.
import { join } from "node:path";
import { inCI } from "./ci.ts";
import { PG_URL, REDIS_URL, servicesMissing } from "./postgres-env.ts";

/**
 * Files that only use startTestRelay (store-agnostic; differential.test.ts picks the Postgres
 * query itself), so they prove the same behaviour on Postgres.
 */
const SUITE = [
  "admission",
  "admission-store",
  "auth-modes",
  "backpressure",
  "ban-retention",
  "created-at",
  "differential",
  "dm-protection",
  "fuzz",
  "group-gates",
  "group-visibility-store",
  "hostile",
  "interop",
  "limits",
  "membership",
  "metrics",
  "nip01",
  "nip09",
  "nip11",
  "nip13",
  "nip29",
  "nip29-interop",
  "nip29-read",
  "nip29-write",
  "nip40",
  "nip42",
  "nip45",
  "nip50",
  "nip62",
  "nip70",
  "nip77",
  "nip86",
  "pages",
  "pay",
  "plugin",
  "rate-limits",
  "security",
  "smoke",
  "wot",
].map((f) => `./test/${f}.test.ts`);

const CLUSTER = [
  "./test/cluster/cluster.pgtest.ts",
  "./test/postgres/write-parity.pgtest.ts",
  "./test/postgres/ops.pgtest.ts",
  "./test/postgres/relay-key.pgtest.ts",
  "./test/postgres/admission-nodes.pgtest.ts",
];

const missing = await servicesMissing();
if (missing) {
  if (inCI) {
    console.error(`the Postgres suite cannot run in CI: ${missing}`);
    process.exit(1);
  }
  console.log(`skipped the Postgres suite: ${missing} (start them: README, Quick start)`);
  process.exit(0);
}

console.log(
  `Postgres suite: ${SUITE.length} files + the multi-node and writer-parity tests on ${new URL(PG_URL).host}, bus ${new URL(REDIS_URL).host}`,
);
const proc = Bun.spawn([process.execPath, "test", "--timeout", "30000", ...SUITE, ...CLUSTER], {
  cwd: join(import.meta.dir, ".."),
  env: { ...process.env, BUNSTR_TEST_STORE: "postgres" },
  stdio: ["inherit", "inherit", "inherit"],
});
process.exit(await proc.exited);
