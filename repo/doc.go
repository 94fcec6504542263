// Package repo holds the two implementations of leaseapi.Store and what
// wraps them. It speaks SQL and nothing else: no HTTP, no wire types.
//
// Files, by what they do:
//
//   - postgres.go: the Postgres store (Postgres, OpenPostgres). One statement
//     per lease operation, decided under the row lock with clock_timestamp()
//     read after the lock; prepared once per pooled connection. The run
//     history is written in the same statement: a grant's run and a
//     release's by the statement itself, the close of a run by a takeover
//     or a revocation by the trigger in migrations/postgres (0005).
//   - pgconn.go (pgconn_linux.go, pgconn_other.go): the dialer and DSN
//     defaults that bound every wait on the database (connect timeout, TCP
//     keepalives and user timeout, per-read and per-write deadlines,
//     statement_timeout, lock_timeout), and bounded, which returns a store
//     call by its context's deadline even when lib/pq would not.
//   - sqlite.go (sqlite_flock_*.go): the embedded store (SQLite, OpenSQLite)
//     on one SQLite file, for a single leaseapi instance; an exclusive file
//     lock keeps a second process out. Its identifiers carry a sqlite prefix
//     because both stores live in this package.
//   - console.go (postgres_console.go, sqlite_console.go): the reads
//     across jobs of the operations console: the lease list's paused and
//     overdue filters (one definition of overdue, shared with Stats) and
//     RecentRuns, the newest runs of every job, a page per outcome read in
//     index order (migrations 0004).
//   - pgbatch.go: group commit: concurrent acquires, heartbeats and
//     releases of different jobs go to the database as one statement and
//     one commit per kind, each keeping its own answer and guarantees.
//   - coalesce.go: CoalesceAcquires, which decides concurrent acquires of
//     one job in this process with one store call.
//   - limit.go: LimitCalls, load shedding: a call beyond the limit is refused
//     with leaseapi.ErrOverloaded before it reaches the database.
//   - pruner.go: RunPruner, the background loop that deletes finished runs
//     past their retention, in batches, safely from several instances.
//   - mutants_chaos.go: only in a build with -tags chaos_mutants, the
//     deliberate bugs the chaos suite must catch (docs/reliability.md).
//
// The served stack, as cmd/leaseapi builds it, from the handler down:
// CoalesceAcquires(LimitCalls(store, MAX_IN_FLIGHT)), where store is a
// *Postgres or a *SQLite. docs/architecture.md follows one acquire through
// it.
//
// Errors are translated here and nowhere else: no row becomes
// leaseapi.ErrNotFound, a refused conditional write a *leaseapi.ConflictError
// holding the current row, invalid input a *leaseapi.InvalidError, and every
// error that leaves the outcome unknown (connection lost, timeout,
// serialization failure) wraps leaseapi.ErrUnavailable.
//
// repotest (test-only) holds the database harness of the tests and the
// conformance suite both stores pass.
package repo
