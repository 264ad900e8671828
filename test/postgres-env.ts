// The services of the Postgres store for tests: a fresh database per test relay on the local
// server, and the Redis bus. BUNSTR_TEST_STORE=postgres (set by test/postgres-suite.ts) makes
// startTestRelay use them, so the end-to-end suite runs on Postgres unchanged.
import { RedisClient, SQL } from "bun";
import { createHash } from "node:crypto";

export const PG_URL = process.env.BUNSTR_TEST_POSTGRES_URL ?? "postgres://bunstr:bunstr@127.0.0.1:5432/postgres";
export const REDIS_URL = process.env.BUNSTR_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
export const onPostgres = process.env.BUNSTR_TEST_STORE === "postgres";

/** The URL of a database on the test server (same credentials). */
export const databaseUrl = (name: string): string => {
  const u = new URL(PG_URL);
  u.pathname = `/${name}`;
  return u.toString();
};

/** A database name for a test directory: the same directory (a restart) finds the same database. */
export const databaseFor = (dir: string): string => `bunstr_t_${createHash("sha256").update(dir).digest("hex").slice(0, 20)}`;

async function withServer<T>(f: (sql: SQL) => Promise<T>): Promise<T> {
  const sql = new SQL({ url: PG_URL, max: 1, connectionTimeout: 3 } as ConstructorParameters<typeof SQL>[0]);
  try {
    return await f(sql);
  } finally {
    await sql.close();
  }
}

export async function createDatabase(name: string): Promise<string> {
  await withServer(async (sql) => {
    const exists = await sql`SELECT 1 FROM pg_database WHERE datname = ${name}`;
    if (exists.length === 0) await sql.unsafe(`CREATE DATABASE ${name}`);
  });
  return databaseUrl(name);
}

export async function dropDatabase(name: string): Promise<void> {
  await withServer((sql) => sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
}

/** Why Postgres or Redis cannot be used here, or undefined when both answer. */
export async function servicesMissing(): Promise<string | undefined> {
  try {
    await Promise.race([withServer((sql) => sql`SELECT 1`), Bun.sleep(3000).then(() => Promise.reject(new Error("timed out")))]);
  } catch (err) {
    const shown = new URL(PG_URL);
    shown.password = shown.password ? "***" : "";
    return `PostgreSQL at ${shown} does not answer (${(err as Error).message})`;
  }
  try {
    const r = new RedisClient(REDIS_URL, { autoReconnect: false, connectionTimeout: 3000 });
    await r.send("PING", []);
    r.close();
  } catch (err) {
    return `Redis at ${REDIS_URL} does not answer (${(err as Error).message})`;
  }
  return undefined;
}
