// Package leaseapi holds the domain of the lease service: leases, runs, the
// Store interface both stores implement, and the errors named after the wire
// codes. It imports only the standard library.
//
// # Overview
//
// A cron service scaled horizontally runs the same schedule on every
// replica. At each tick of a job every replica asks leaseapi to acquire the
// job's lease; exactly one gets it, runs the job, heartbeats while it runs,
// and releases the lease with an outcome when it is done. The others get
// 409 lease_held and skip that tick. A replica that dies stops heartbeating;
// its lease expires, and a later tick is taken over by another replica.
//
// A lease is one row per job: the current grant while it is held, else the
// last one. Its state is computed when it is read:
//
//   - held: not released, not revoked, and expiresAt is after now;
//   - released: released by its holder;
//   - expired: the holder stopped heartbeating (expiresAt <= now, never released);
//   - revoked: an administrator force-released it (DELETE /leases/{jobId}).
//
// Every grant is also a run in the job's history, with outcome running,
// succeeded, failed, expired or revoked; a tick of the job's schedule that
// no replica started is a run too, with outcome missed (see Ticks).
//
// # The clock
//
// Expiry is decided by one clock: the store's, read at the moment of the
// decision. In Postgres that is clock_timestamp() evaluated after the lease
// row is locked, not now(), which is the start of the transaction: a
// statement that waited for the lock would otherwise record a grant earlier
// than the release it waited for. Several leaseapi instances on one database
// therefore agree whatever their own clocks say. The embedded SQLite store
// serializes its writers and uses the clock of its single process.
//
// Clients never compare their clock with the server's. A replica's deadline
// is its own send time of the last successful acquire or heartbeat plus
// ttlMs: it must stop working on the job by then unless a heartbeat has
// succeeded meanwhile. The store decided expiresAt after that send, so the
// client's deadline comes first as long as the two clocks run at about the
// same rate; their offset does not matter.
//
// # Fencing tokens
//
// Every grant and every revocation gives the lease a new token, strictly
// greater than all earlier tokens of the job; tokens are never reused and
// survive restarts of leaseapi and of the database. Heartbeat and release
// must carry the owner and token of the current grant, or they fail with
// lease_lost. A job that writes to another system should pass the token
// along and have that system reject writes with a token lower than the
// highest it has seen: that is what keeps a paused holder (a long GC pause,
// a frozen VM) from doing harm after its lease has passed to someone else.
//
// Tokens are not consecutive across a Postgres promotion: on the database's
// WAL timeline T a token is at least (T-1)×2^40, so every token handed out
// after a failover (or a point-in-time restore) is greater than any token
// of an older timeline, even one the old primary acknowledged and then
// lost. On timeline 1 tokens count 1, 2, 3, ….
//
// # Ticks
//
// An acquire may name the tick, the scheduled fire time it is for. Once a
// tick is released with outcome succeeded it becomes the lease's
// lastCompletedTick, and an acquire for that tick or an earlier one is
// refused with tick_done: a replica that wakes up late does not run a tick
// that already ran. The one exception is a tick the job owes and nobody has
// claimed yet (a manual run, a catch-up): it has not run, so a later tick
// of the schedule that completed first does not make it done. A tick
// released failed, or whose holder expired, can be acquired again. The same owner acquiring the same tick again while it
// holds the lease is an idempotent retry: same token, renewed expiry.
//
// A tick must have come: one later than the database's clock plus the
// window LEASEAPI_MAX_TICK_AHEAD (5 minutes by default) is refused to
// everyone with tick_ahead, and nothing is written. Such a tick is asked for
// by a replica whose clock runs fast; granted and released succeeded, it
// would make every earlier tick tick_done. A tick in the past is never
// refused for its time, and a tick lies in the years 0001 to 9999.
//
// A tick far ahead of the store's clock (a replica whose clock was fast),
// once released succeeded, would make every tick before it done. An
// administrator's repair (Store.Repair, POST /leases/{jobId}/repair) undoes
// that: it revokes an open grant of such a tick, marks the runs of such
// ticks discarded (they no longer make their ticks done) and moves
// lastCompletedTick back to the newest succeeded tick before, but never
// past the run history kept. Tokens never go back.
//
// An acquire may also carry the job's schedule (a cron spec, package
// schedule) and a grace; a granted one registers them. A sweep then decides,
// once for every instance on the database, the fate of each tick whose grace
// has passed: ran (a grant was made for it), skipped (an earlier grant was
// held at the tick), paused (an administrator had paused the job) or missed
// (recorded as a run with outcome missed). So leaseapi knows not only that no
// tick ran twice but also when a tick ran zero times. While a job is paused,
// every acquire but the holder's retry of its own grant is refused with
// job_paused.
//
// # Failure handling
//
// Every request answers within its deadline. When the database is slow or
// unreachable the answer is 503 unavailable with Retry-After, and the
// outcome of a write is then unknown: it may have committed before the
// reply was lost. Retrying is safe because acquire by the same owner for the
// same tick, and heartbeat and release with the same owner and token, are
// idempotent. A holder that cannot heartbeat must stop at its own deadline;
// its lease then expires and another replica takes the next tick over.
//
// On Postgres, leaseapi warns at start when synchronous_commit is not on: a
// database crash could otherwise lose grants that were already acknowledged,
// and with them token increments.
//
// # What is not guaranteed
//
//   - Exactly-once execution. A holder that stops heartbeating (crash,
//     partition, long pause) loses its lease; its run may or may not have
//     done its work, and a failed or expired tick may run again. Jobs must be
//     idempotent, or fenced by token in the systems they write to.
//   - Mutual exclusion in real time for a holder that ignores its deadline.
//     The lease is exclusive in the store's clock; a process that keeps
//     working past its own send time + ttlMs after losing contact may overlap
//     with the next holder. Only fencing tokens checked by the resource
//     prevent harm then.
//   - That every tick runs. A tick for which no replica asked, or whose
//     holder failed, is not retried by leaseapi; the next acquire decides.
//     With a schedule registered, such a tick is recorded missed (and
//     counted in the metrics), so that someone is told.
//   - Several instances on the embedded SQLite store. It serves a single
//     leaseapi instance; for several, use Postgres.
//   - Run history forever: finished runs are pruned after the configured
//     retention (seven days by default).
package leaseapi
