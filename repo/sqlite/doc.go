// Package sqlite is the embedded lease store (Store, Open) on one SQLite
// file, for a single leaseapi instance; an exclusive file lock keeps a
// second process out (flock_*.go). It keeps the behaviour of the Postgres
// store (repo/postgres) with different means, described on Store, and
// passes the same conformance suite (repo/repotest).
//
// Files, by what they do: store.go the lease operations, schedule.go the
// scheduled jobs (pause, resume, forget, the tick sweep, Stats), console.go
// the reads across jobs of the operations console, credentials.go the
// credentials the API authenticates with.
package sqlite
