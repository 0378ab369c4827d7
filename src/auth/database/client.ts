// The PostgreSQL client (postgres.js). Queries live in queries/ as verb-named functions that take
// a `Queryable` (the pool or a transaction) first; services own the transactions.
import postgres from 'postgres';

export type Sql = postgres.Sql;
export type TransactionSql = postgres.TransactionSql;
/** The pool or a transaction: what every query function takes first. */
export type Queryable = postgres.ISql;

export interface DatabaseOptions {
  /** Pool size (default 10). */
  max?: number;
  /** application_name of the connections (default auth-server). */
  applicationName?: string;
}

/** One pool per process, or per worker thread in auth-server. Timestamps come back as Date, bytea as Buffer, uuid as string. */
export function createDatabaseClient(url: string, options: DatabaseOptions = {}): Sql {
  return postgres(url, {
    max: options.max ?? 10,
    onnotice: () => {},
    connection: { application_name: options.applicationName ?? 'auth-server' },
  });
}

/** SQLSTATE of a unique violation, to turn races on unique keys into domain errors. */
export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  return error instanceof postgres.PostgresError && error.code === '23505' && (constraint === undefined || error.constraint_name === constraint);
}
