// Package repo holds what wraps a leaseapi.Store and the background loops
// that drive one: code that uses only the leaseapi.Store interface and
// speaks no SQL. The stores themselves are packages of their own, as River
// splits its drivers:
//
//   - repo/postgres: the Postgres store (postgres.Store), its SQL, its
//     connection bounds and its group commit.
//   - repo/sqlite: the embedded store (sqlite.Store) on one SQLite file, for
//     a single leaseapi instance.
//   - repo/decide: every rule of the lease, as pure functions both stores
//     and the coalescer call: an acquire's refusal or its complete write
//     (PlanAcquire), the tick it is for, and the fate of a scheduled job's
//     due ticks. A store reads the rows and its clock, calls decide, and
//     writes the result conditionally.
//   - repo/internal/stores: the SQL conditions, rows and plumbing the two
//     stores share and neither owns.
//   - repo/repotest (test-only): the database harness of the tests and the
//     conformance suite both stores pass.
//
// Files of this package, by what they do:
//
//   - coalesce.go: CoalesceAcquires, which decides concurrent acquires of
//     one job in this process with one store call.
//   - limit.go: LimitCalls, load shedding: a call beyond the limit is refused
//     with leaseapi.ErrOverloaded before it reaches the database.
//   - pruner.go: RunPruner, the background loop that deletes finished runs
//     past their retention, in batches, safely from several instances.
//   - sweeper.go: TickSweeper, the background loop that decides the fate of
//     due ticks and counts expired grants (leaseapi.Store.SweepTicks).
//
// The served stack, as cmd/leaseapi builds it, from the handler down:
// CoalesceAcquires(LimitCalls(store, MAX_IN_FLIGHT)), where store is a
// *postgres.Store or a *sqlite.Store. docs/architecture.md follows one
// acquire through it.
//
// Errors are translated in the stores and nowhere else: no row becomes
// leaseapi.ErrNotFound, a refusal a *leaseapi.ConflictError holding the
// row it was decided on, invalid input a *leaseapi.InvalidError, and every
// error that leaves the outcome unknown (connection lost, timeout,
// serialization failure) wraps leaseapi.ErrUnavailable. The wrappers here
// pass them on unchanged.
package repo
