// Package postgres is the lease store on PostgreSQL (Store, Open).
//
// Files, by what they do:
//
//   - acquire.go: the acquire. It reads the row with the database clock
//     and WAL timeline, decides in Go (decide.PlanAcquire) and writes the
//     plan with one plain statement that writes nothing if the row changed
//     since the read (xmin), the clock passed the plan's ValidUntil or the
//     timeline moved; then it reads and decides again. A refusal is the
//     read alone. The grant's run and the close of the expired run it
//     takes over are written by the same statement.
//   - holder.go: the heartbeat and the release, made as the acquire is:
//     the read, the decision in Go (decide.PlanHeartbeat, decide.Release),
//     and one statement that writes only the row version read and, for a
//     heartbeat, only before the grant's expiry as read. A release closes
//     its run in its statement.
//   - store.go: the other lease operations, prepared once per pooled
//     connection; a revocation closes its run in its statement.
//   - statements.go: the echo statement and the facts of the decisions
//     the store chooses once, when it opens (statements_default.go;
//     mutants_chaos.go under -tags chaos_mutants: the deliberate bugs the
//     chaos suite must catch, docs/reliability.md).
//   - conn.go (conn_linux.go, conn_other.go): the dialer and DSN defaults
//     that bound every wait on the database (connect timeout, TCP
//     keepalives and user timeout, per-read and per-write deadlines,
//     statement_timeout, lock_timeout), and bounded, which returns a store
//     call by its context's deadline even when lib/pq would not.
//   - batch.go: group commit: the reads and grants of concurrent acquires,
//     and concurrent heartbeats and releases, of different jobs go to the
//     database as one statement per kind, each keeping its own answer and
//     guarantees.
//   - schedule.go: scheduled jobs: pause, resume, forget, the tick sweep and
//     Stats.
//   - console.go: the reads across jobs of the operations console.
//   - credentials.go: the credentials the API authenticates with.
package postgres
