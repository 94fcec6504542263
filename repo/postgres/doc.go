// Package postgres is the lease store on PostgreSQL (Store, Open).
//
// Files, by what they do:
//
//   - store.go: the lease operations. One statement per operation, decided
//     under the row lock with clock_timestamp() read after the lock;
//     prepared once per pooled connection. The run history is written in
//     the same statement: a grant's run and a release's by the statement
//     itself, the close of a run by a takeover or a revocation by the
//     trigger in migrations/postgres (0005).
//   - statements.go: the hot statements the store chooses once, when it
//     opens (statements_default.go; mutants_chaos.go under -tags
//     chaos_mutants: the deliberate bugs the chaos suite must catch,
//     docs/reliability.md).
//   - conn.go (conn_linux.go, conn_other.go): the dialer and DSN defaults
//     that bound every wait on the database (connect timeout, TCP
//     keepalives and user timeout, per-read and per-write deadlines,
//     statement_timeout, lock_timeout), and bounded, which returns a store
//     call by its context's deadline even when lib/pq would not.
//   - batch.go: group commit: concurrent acquires, heartbeats and releases
//     of different jobs go to the database as one statement and one commit
//     per kind, each keeping its own answer and guarantees.
//   - schedule.go: scheduled jobs: pause, resume, forget, the tick sweep and
//     Stats.
//   - console.go: the reads across jobs of the operations console.
//   - credentials.go: the credentials the API authenticates with.
package postgres
