package postgres

import "github.com/leaseapi/leaseapi/repo/internal/stores"

// The hot statements of the store, built once, at package init, from named
// parts. Each condition of the lease rules is written once, below, as a
// function of its operands: the single statements read an acquire's owner
// and tick from parameters ($2, $3), the batched ones from their input rows
// (i.owner, i.tick); the fast path reads the clock of its snapshot (c.now),
// the upsert the clock read after the row lock (clock_timestamp()). The
// statements refer to the leases row as l. The conditions both stores
// write the same (stores.GrantOpen, stores.HeldAt, stores.ExpiredAt) are in
// repo/internal/stores.

// holderOf: owner is l's holder for tick, or for any tick when tick is
// NULL or the acquire asked for the nearest tick (decide.Renews).
func holderOf(owner, tick, nearest string) string {
	return `(l.owner = ` + owner + ` AND (` + tick + ` IS NULL OR ` + nearest + ` OR l.tick IS NOT DISTINCT FROM ` + tick + `))`
}

// renewsAt: an acquire by owner for tick at now is the holder's renewal.
func renewsAt(now, owner, tick, nearest string) string {
	return `(` + stores.HeldAt(now) + ` AND ` + holderOf(owner, tick, nearest) + `)`
}

// tickDone: tick ran already at now: it is at or before the last completed
// tick, and it is not the tick l owes, which has not run whatever later
// tick completed (decide.TickDone).
func tickDone(tick, now string) string {
	return `(COALESCE(` + tick + ` <= l.last_completed_tick, false) AND NOT COALESCE(` + owesTick(tick, now) + `, false))`
}

// tickAhead: tick lies later than now plus aheadMs milliseconds, the lead
// the store allows a tick on its clock (decide.Ahead): asked for by a
// replica whose clock is fast, it is refused to everyone, the holder
// included.
func tickAhead(tick, now, aheadMs string) string {
	return `COALESCE(` + tick + ` > ` + now + ` + ` + aheadMs + ` * interval '1 millisecond', false)`
}

// owesTick: tick is the tick l owes, still claimable at now.
func owesTick(tick, now string) string {
	return `(` + tick + ` = l.owed_tick AND l.owed_until > ` + now + `)`
}

// walTimeline is the primary's current WAL timeline, read as Patroni reads
// it: the first 8 hex digits of the name of its current WAL file.
// (pg_control_checkpoint() reports the old timeline until the first
// checkpoint after a promotion.) On a server in recovery pg_current_wal_lsn
// fails with 55000, which the guard answers as unavailable.
const walTimeline = `('x' || left(pg_walfile_name(pg_current_wal_lsn()), 8))::bit(32)::bigint`

// tokenAfter is the token that follows prev on timeline: prev + 1, or the
// first token of the timeline, (timeline - 1) × 2^40, when that is larger.
// After a promotion every new token is thus larger than any token of an
// older timeline, even one the old primary acknowledged and the new one
// never received (2^40 tokens a job a timeline). A token past 2^53 - 1 (a
// timeline above 8,192) fails the leases_token_exact constraint
// (migrations/postgres/0006), answered as unavailable (tokenLimitConstraint in conn.go).
func tokenAfter(prev, timeline string) string {
	return `GREATEST(` + prev + ` + 1, (` + timeline + ` - 1) * 1099511627776)`
}

// statementParts are the parts of the acquire and heartbeat statements that
// a chaos mutant replaces (mutants_chaos.go); every ordinary build uses
// productionParts. A mutant is thus a whole statement set built by the same
// functions from other parts, chosen when the store opens: no statement
// text is edited.
type statementParts struct {
	// heldAgainst is the acquire's test of "held by someone" in its two
	// guards: the fast path's refusal and the upsert's WHERE.
	heldAgainst func(now string) string
	// nextToken is the token of the row the upsert writes: the same on a
	// renewal (s.renew), the next one (tokenAfter) on a new grant, on the
	// timeline the inserted row read (EXCLUDED.timeline).
	nextToken string
	// fence is the heartbeat's test that the caller holds the grant.
	fence func(owner, token string) string
	// echoLock is the durable echo's locking clause (durableEcho), which
	// makes its transaction write WAL and so wait for the synchronous
	// standby.
	echoLock string
}

var productionParts = statementParts{
	heldAgainst: stores.HeldAt,
	nextToken:   `CASE WHEN s.renew THEN l.token ELSE ` + tokenAfter(`l.token`, `EXCLUDED.timeline`) + ` END`,
	fence:       func(owner, token string) string { return `l.owner = ` + owner + ` AND l.token = ` + token },
	echoLock:    ` FOR KEY SHARE`,
}

// refused is the acquire's refusal in SQL, the rules of decide.Acquire: the
// tick ran already or the job is paused, and this is not the holder's
// renewal; or the tick lies ahead of the clock (aheadMs); or the grant is
// held by someone else. Which rule refused is named in Go (decide.Refusal).
func (p statementParts) refused(now, owner, tick, nearest, aheadMs string) string {
	return `(((` + tickDone(tick, now) + ` OR l.paused_at IS NOT NULL) AND NOT ` + renewsAt(now, owner, tick, nearest) + `)
			OR ` + tickAhead(tick, now, aheadMs) + `
			OR (` + p.heldAgainst(now) + ` AND NOT ` + holderOf(owner, tick, nearest) + `))`
}

// The store resolves an acquire's tick against the job's schedule before
// its statement (tick.go), with a guess of the stored schedule and of the
// database clock, and the statement holds the guess to the facts with the
// two conditions below. When one fails nothing is granted: the fast path
// answers the row as refused and the store, seeing that its guess did not
// hold, resolves again with the facts of the row; the upsert writes
// nothing and the store reads the facts.

// storedAs: l's stored schedule is stored, the one the tick was resolved
// with (empty for none), or stored is NULL: the tick does not depend on it (a
// schedule was sent, or the acquire names no tick).
func storedAs(stored string) string {
	return `(` + stored + ` IS NULL OR COALESCE(l.schedule, '') = ` + stored + `)`
}

// clockWithin: the clock now lies in [from, until), the readings at which
// a NearestTick acquire picks the tick it names; a NULL bound is open.
func clockWithin(now, from, until string) string {
	return `(` + from + ` IS NULL OR ` + now + ` >= ` + from + `) AND (` + until + ` IS NULL OR ` + now + ` < ` + until + `)`
}

// claimedTick is the tick an acquire at now takes on l: the tick it sent
// (sent, as it sent it) when that is the manual tick the job owes (still
// claimable at now) or the tick of l's grant, else tick, its tick resolved
// against the schedule. A manual tick is no tick of the schedule, so
// resolving it would snap it to an earlier tick of the schedule; its
// claim, and the claimant's retry after the claim settled it, take it as
// it is (decide.ClaimedTick).
func claimedTick(tick, sent, now string) string {
	return `(CASE WHEN l.tick = ` + sent + ` OR (l.owed_reason = 'manual' AND l.owed_tick = ` + sent + ` AND l.owed_until > ` + now + `)
		THEN ` + sent + ` ELSE ` + tick + ` END)`
}

// acquireInput is where an acquire statement reads its calls from: the
// parameters of one call, or the input rows of a batch (i).
type acquireInput struct {
	params                                   string // the input CTE, ending in ", " (empty for parameters)
	jobID, owner, tick, ttlMs, spec, graceMs string
	// sent is the tick as the acquire sent it, before its resolution
	// (claimedTick); catchUp and catchUpWindowMs are the catch-up policy
	// to register with the schedule (NULL: keep the stored one).
	sent, catchUp, catchUpWindowMs string
	// maxAheadMs is the lead the store allows a tick on its clock, in
	// milliseconds (tickAhead).
	maxAheadMs string
	// The tick's resolution (tick.go): the stored schedule it assumed
	// (NULL when it does not depend on it), whether the acquire asked for
	// the nearest tick, and the clock readings at which that is the tick.
	stored, nearest, clockFrom, clockUntil string
	// resolvedFrom are the input rows of the resolved CTE ("" for
	// parameters).
	resolvedFrom string
	// snapshotFrom joins the input to its leases rows for the fast path.
	snapshotFrom string
	// upsertFrom are the rows the upsert may insert, unrefused says which
	// the fast path left to it, and upsertOrder puts them in job id order
	// (the order ON CONFLICT locks them in).
	upsertFrom, unrefused, upsertOrder string
}

// singleInput is one call's parameters.
var singleInput = acquireInput{
	jobID: `$1::text`, owner: `$2::text`, tick: `$3::timestamptz`, ttlMs: `$4::bigint`, spec: `$5::text`, graceMs: `$6::bigint`,
	stored: `$7::text`, nearest: `$8::boolean`, clockFrom: `$9::timestamptz`, clockUntil: `$10::timestamptz`,
	sent: `$11::timestamptz`, catchUp: `$12::text`, catchUpWindowMs: `$13::bigint`, maxAheadMs: `$14::bigint`,
	snapshotFrom: `
	FROM (SELECT clock_timestamp() AS now) AS c, leases AS l
	WHERE l.job_id = $1::text`,
	upsertFrom: `
FROM (SELECT clock_timestamp() AS now) AS c`,
	unrefused: `NOT EXISTS (SELECT 1 FROM snapshot WHERE refused)`,
}

// batchInput is one input row per call (one call per job), the parameters
// arrays of the calls' fields.
var batchInput = acquireInput{
	params: `input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::bigint[], $5::text[], $6::bigint[],
			$7::text[], $8::boolean[], $9::timestamptz[], $10::timestamptz[], $11::timestamptz[], $12::text[], $13::bigint[], $14::bigint[])
		AS i(job_id, owner, tick, ttl_ms, schedule, grace_ms, stored, nearest, clock_from, clock_until, sent, catch_up, catch_up_window_ms,
			max_ahead_ms)
), `,
	jobID: `i.job_id`, owner: `i.owner`, tick: `i.tick`, ttlMs: `i.ttl_ms`, spec: `i.schedule`, graceMs: `i.grace_ms`,
	stored: `i.stored`, nearest: `i.nearest`, clockFrom: `i.clock_from`, clockUntil: `i.clock_until`,
	sent: `i.sent`, catchUp: `i.catch_up`, catchUpWindowMs: `i.catch_up_window_ms`, maxAheadMs: `i.max_ahead_ms`,
	resolvedFrom: ` FROM input AS i`,
	snapshotFrom: `
	FROM (SELECT clock_timestamp() AS now) AS c, input AS i JOIN leases AS l ON l.job_id = i.job_id`,
	upsertFrom: `
FROM (SELECT clock_timestamp() AS now) AS c, input AS i`,
	unrefused: `NOT EXISTS (SELECT 1 FROM snapshot AS r WHERE r.refused AND r.job_id = i.job_id)`,
	upsertOrder: `
ORDER BY i.job_id`,
}

// with is the statement's CTEs before the snapshot: the input, and the
// resolved CTE, each call's resolution, sent tick and catch-up policy by
// job, which the upsert's ON CONFLICT clause (which sees only l and
// EXCLUDED) reads through resolvedOf and its SET by joining it.
func (in acquireInput) with() string {
	return in.params + `resolved AS (SELECT ` + in.jobID + ` AS job_id, ` + in.stored + ` AS stored, ` + in.nearest + ` AS nearest, ` +
		in.sent + ` AS sent, ` + in.catchUp + ` AS catch_up, ` + in.catchUpWindowMs + ` AS catch_up_window_ms, ` +
		in.maxAheadMs + ` AS max_ahead_ms` +
		in.resolvedFrom + `), `
}

// resolvedOf is column col of the resolved CTE for l's job.
func resolvedOf(col string) string {
	return `(SELECT g.` + col + ` FROM resolved AS g WHERE g.job_id = l.job_id)`
}

// claimsOwed: a new grant (not renew) of tick at now claims the tick l
// owes, while it is claimable: its run has the owed tick's trigger
// (decide.Claim).
func claimsOwed(renew, tick, now string) string {
	return `COALESCE(NOT ` + renew + ` AND ` + owesTick(tick, now) + `, false)`
}

// settlesOwed: a new grant of tick at now settles what l owes: it claims
// the owed tick, or it is a later tick and the debt a catch-up one (the job
// ran since the missed tick); a manual tick stays owed until it is
// claimed, cancelled or expires (decide.Claim).
func settlesOwed(renew, tick, now string) string {
	return `COALESCE(NOT ` + renew + ` AND (` + owesTick(tick, now) + `
		OR (l.owed_reason = 'catch-up' AND ` + tick + ` > l.owed_tick)), false)`
}

// upsert grants or renews under the row lock, or does nothing. The row
// lock is taken by ON CONFLICT; the WHERE and the SET read clock_timestamp()
// after it. The SET reads the clock once (the sub-select) so that
// acquired_at, renewed_at and expires_at of a grant share one instant, and
// it decides renew-or-grant again with that instant: a lease that expired
// between the WHERE and the SET is granted anew (a new token) rather than
// renewed. A fresh job is inserted with the first token of its timeline
// (tokenAfter 0: 1 on timeline 1); its VALUES clock needs no lock. The
// inserted row reads the timeline (walTimeline) in its select list, so only
// a row that is inserted or updated reads it, never a refusal; the update
// reads it as EXCLUDED.timeline, and a grant records it (a renewal keeps
// the grant's). The rows to insert are the input's, each only while the clock is
// where the tick's resolution assumed it (clockWithin) and its tick is not
// ahead of the clock (tickAhead: no row, not even a new job's, is written
// for such a tick; the tick a conflicting row takes is never before it),
// and, when fastPath, only those the fast path did not refuse.
//
// A grant or renewal with a schedule (its grace) registers it: a new spec
// (or the first) is due at once, and the sweep then computes its first
// tick after schedule_since; the same spec with another grace keeps its
// undecided tick and moves when it is due. A catch-up policy sent with it
// is registered too (none sent: the stored one stays). While the job is
// paused only the holder's renewal passes the WHERE, and only while the
// stored schedule is the one the tick was resolved with (storedAs).
//
// The tick a conflicting row takes is claimedTick (s.tick): a grant of
// the tick the job owes claims it, its run gets the debt's trigger
// (grant_trigger, copied to the run by grantedRun) and the debt is settled
// (settlesOwed), in the same statement as the grant.
func (p statementParts) upsert(in acquireInput, fastPath bool) string {
	rows := in.upsertFrom + `
WHERE ` + clockWithin(`c.now`, in.clockFrom, in.clockUntil) + `
	AND NOT ` + tickAhead(in.tick, `c.now`, in.maxAheadMs)
	if fastPath {
		rows += `
	AND ` + in.unrefused
	}
	rows += in.upsertOrder
	return `
INSERT INTO leases AS l (job_id, owner, token, timeline, tick, ttl_ms, acquired_at, renewed_at, expires_at,
	schedule, grace_ms, schedule_since, decide_at, catch_up, catch_up_window_ms)
SELECT ` + in.jobID + `, ` + in.owner + `, ` + tokenAfter(`0`, walTimeline) + `, ` + walTimeline + `, ` + in.tick + `, ` + in.ttlMs + `, c.now, c.now, c.now + ` + in.ttlMs + ` * interval '1 millisecond',
	` + in.spec + `, ` + in.graceMs + `, CASE WHEN ` + in.spec + ` IS NULL THEN NULL ELSE c.now END, CASE WHEN ` + in.spec + ` IS NULL THEN NULL ELSE c.now END,
	COALESCE(` + in.catchUp + `, 'none'), COALESCE(` + in.catchUpWindowMs + `, 86400000)` + rows + `
ON CONFLICT (job_id) DO UPDATE SET
	(owner, token, timeline, tick, ttl_ms, acquired_at, renewed_at, expires_at, released_at, revoked_at, last_outcome,
		schedule, grace_ms, schedule_since, next_tick, decide_at, catch_up, catch_up_window_ms,
		owed_tick, owed_reason, owed_by, owed_trigger_reason, owed_until, grant_trigger, grant_triggered_by) = (
		SELECT
			EXCLUDED.owner,
			` + p.nextToken + `,
			CASE WHEN s.renew THEN l.timeline ELSE EXCLUDED.timeline END,
			CASE WHEN s.renew THEN l.tick ELSE s.tick END,
			EXCLUDED.ttl_ms,
			CASE WHEN s.renew THEN l.acquired_at ELSE s.now END,
			s.now,
			s.now + EXCLUDED.ttl_ms * interval '1 millisecond',
			NULL::timestamptz,
			NULL::timestamptz,
			CASE WHEN NOT s.renew AND ` + stores.GrantOpen + `
				THEN 'expired' ELSE l.last_outcome END,
			COALESCE(EXCLUDED.schedule, l.schedule),
			CASE WHEN EXCLUDED.schedule IS NULL THEN l.grace_ms ELSE EXCLUDED.grace_ms END,
			CASE WHEN EXCLUDED.schedule IS NULL OR EXCLUDED.schedule = l.schedule THEN l.schedule_since ELSE s.now END,
			CASE WHEN EXCLUDED.schedule IS NULL OR EXCLUDED.schedule = l.schedule THEN l.next_tick END,
			CASE WHEN EXCLUDED.schedule IS NULL THEN l.decide_at
				WHEN EXCLUDED.schedule = l.schedule
				THEN COALESCE(l.next_tick + EXCLUDED.grace_ms * interval '1 millisecond', l.decide_at)
				ELSE s.now END,
			COALESCE(s.catch_up, l.catch_up),
			CASE WHEN s.catch_up IS NULL THEN l.catch_up_window_ms ELSE s.catch_up_window_ms END,
			CASE WHEN s.settles THEN NULL ELSE l.owed_tick END,
			CASE WHEN s.settles THEN NULL ELSE l.owed_reason END,
			CASE WHEN s.settles THEN NULL ELSE l.owed_by END,
			CASE WHEN s.settles THEN NULL ELSE l.owed_trigger_reason END,
			CASE WHEN s.settles THEN NULL ELSE l.owed_until END,
			CASE WHEN s.renew THEN l.grant_trigger WHEN s.claims THEN l.owed_reason ELSE 'schedule' END,
			CASE WHEN s.renew THEN l.grant_triggered_by WHEN s.claims THEN l.owed_by END
		FROM (
			SELECT t.*, ` + claimsOwed(`t.renew`, `t.tick`, `t.now`) + ` AS claims, ` + settlesOwed(`t.renew`, `t.tick`, `t.now`) + ` AS settles
			FROM (
				SELECT c.now, k.tick, g.catch_up, g.catch_up_window_ms,
					` + renewsAt(`c.now`, `EXCLUDED.owner`, `k.tick`, `g.nearest`) + ` AS renew
				FROM (SELECT clock_timestamp() AS now) AS c, resolved AS g,
					LATERAL (SELECT ` + claimedTick(`EXCLUDED.tick`, `g.sent`, `c.now`) + ` AS tick) AS k
				WHERE g.job_id = l.job_id
			) AS t
		) AS s
	)
WHERE NOT ` + p.refused(`clock_timestamp()`, `EXCLUDED.owner`, claimedTick(`EXCLUDED.tick`, resolvedOf(`sent`), `clock_timestamp()`), resolvedOf(`nearest`),
		resolvedOf(`max_ahead_ms`)) + `
	AND ` + storedAs(resolvedOf(`stored`)) + `
RETURNING ` + leaseColumns
}

// grantedRun inserts the run of a grant that the upsert CTE returned, with
// its trigger (grant_trigger: schedule, or the owed tick it claimed), in the
// same statement, so that all run rows of a batch are written by one
// executor rather than by a trigger call per row. A grant sets acquired_at
// and renewed_at to one instant; a renewal keeps acquired_at and returns
// the grant's run, which exists already: ON CONFLICT skips it should the
// two instants ever be equal. A takeover of an expired grant also closes
// that grant's run; the trigger of migrations/postgres/0005 does that,
// since it must read the run with a snapshot taken after the row lock. The
// trigger leaves the rest to these statements because the store's sessions
// say they write the run rows (leaseapi.run_rows, conn.go).
const grantedRun = `, run AS (
	INSERT INTO runs (job_id, token, owner, tick, started_at, timeline, trigger, triggered_by)
	SELECT job_id, token, owner, tick, acquired_at, timeline, grant_trigger, grant_triggered_by FROM upsert WHERE acquired_at = renewed_at
	ON CONFLICT (job_id, token) DO NOTHING
)
`

// acquire answers most losers from the statement's snapshot, without the
// row lock and without a transaction id (so without a WAL flush): when the
// snapshot shows the acquire refused at the clock read after the snapshot
// (the lease held by someone else, or the tick done, or the job paused),
// the refusal is valid at the moment of the snapshot, since a lease held
// until expires_at > now was held at every earlier instant of the same
// grant, and completed ticks only grow. Otherwise the upsert decides under
// the lock with the same rules. A row whose tick was resolved with facts
// the snapshot contradicts (storedAs, clockWithin) is answered as refused
// too: nothing is decided for it, and the store resolves it again. Built
// over singleInput it is the single statement, over batchInput the batched
// one: each input row is decided as its own single statement would decide
// it.
func (p statementParts) acquire(in acquireInput) string {
	return `
WITH ` + in.with() + `snapshot AS (
	SELECT ` + snapshotColumns + `,
		(NOT (` + storedAs(in.stored) + ` AND ` + clockWithin(`c.now`, in.clockFrom, in.clockUntil) + `)
			OR ` + p.refused(`c.now`, in.owner, claimedTick(in.tick, in.sent, `c.now`), in.nearest, in.maxAheadMs) + `) AS refused` + in.snapshotFrom + `
), upsert AS (` + p.upsert(in, true) + `
)` + grantedRun + `SELECT *, false AS refused FROM upsert
UNION ALL
SELECT * FROM snapshot WHERE refused`
}

// naiveAcquire is the upsert alone: every contender takes the row lock and
// commits, winner or not. Kept as the benchmark's baseline
// (bench_leasebench.go) and the fast path's negative control in the tests.
func (p statementParts) naiveAcquire() string {
	return `WITH ` + singleInput.with() + `upsert AS (` + p.upsert(singleInput, false) + `
)` + grantedRun + `SELECT *, false AS refused FROM upsert`
}

// snapshotColumns are leaseColumns read from l, with the snapshot's clock.
const snapshotColumns = `l.job_id, l.owner, l.token, l.tick, l.ttl_ms, l.acquired_at, l.renewed_at, l.expires_at,
		l.released_at, l.revoked_at, l.last_completed_tick, l.last_outcome,
		l.schedule, l.grace_ms, l.paused_at, l.paused_by, l.paused_reason, l.missed_ticks, l.skipped_ticks, l.revoked_by, l.timeline,
		l.catch_up, l.catch_up_window_ms, l.owed_tick, l.owed_reason, l.owed_until, l.grant_trigger, l.grant_triggered_by, c.now AS db_now`

// heartbeat extends a held grant whose owner and token match (fence); a
// NULL ttl keeps the grant's. The clock in the WHERE is re-read if the row
// was changed while this statement waited for its lock. The single
// statement reads its call from parameters; the batched one locks its rows
// first, in job id order, by the locked CTE (an UPDATE takes its row locks
// in the order its join yields the rows, which the planner chooses), and
// joins each row to its own input row.
func (p statementParts) heartbeat(batched bool) string {
	with, from, where, owner, token, ttl := ``, ``, `l.job_id = $1`, `$2`, `$3`, `$4::bigint`
	if batched {
		with = `
WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) AS i(in_job_id, in_owner, in_token, in_ttl_ms)
), locked AS (
	SELECT l.job_id FROM leases AS l JOIN input AS i ON l.job_id = i.in_job_id
	ORDER BY l.job_id
	FOR NO KEY UPDATE OF l
)`
		from = `
FROM input AS i`
		where = `l.job_id IN (SELECT job_id FROM locked) AND l.job_id = i.in_job_id`
		owner, token, ttl = `i.in_owner`, `i.in_token`, `i.in_ttl_ms`
	}
	return with + `
UPDATE leases AS l SET (renewed_at, expires_at, ttl_ms) = (
	SELECT c.now, c.now + t.ms * interval '1 millisecond', t.ms
	FROM (SELECT clock_timestamp() AS now) AS c, (SELECT COALESCE(` + ttl + `, l.ttl_ms) AS ms) AS t
)` + from + `
WHERE ` + where + ` AND ` + p.fence(owner, token) + `
	AND ` + stores.HeldAt(`clock_timestamp()`) + `
RETURNING ` + leaseColumns
}

// durableEcho reads a lease, like getQuery, in a transaction whose commit
// waits for the synchronous standby: the answer a store with replicated
// durability gives when a call finds the state it asked for already there
// (a retried release, a revocation of a lease no longer held, a pause of a
// paused job). That state may be a commit whose own wait was cancelled,
// visible on this primary and on no standby; acknowledging it from a plain
// read would acknowledge what a failover can lose. Postgres makes a commit
// wait for the standby only when its transaction wrote WAL (an id alone,
// pg_current_xact_id, is not enough: such a commit does not wait), so the
// read locks the row (echoLock, FOR KEY SHARE: a WAL-logged row lock that
// blocks no update of the lease's columns). The commit then waits until the
// standby has the WAL up to it, which includes the state read; a cancelled
// wait is refused by the guard (guard.go). No row: nothing is acknowledged.
func (p statementParts) durableEcho() string {
	return `SELECT ` + leaseColumns + ` FROM leases WHERE job_id = $1` + p.echoLock
}

// statementSet are the hot statements a store chooses once, when it opens
// (statements: production, or a chaos mutant's under -tags chaos_mutants).
type statementSet struct {
	acquire, batchAcquire, naiveAcquire string
	heartbeat, batchHeartbeat           string
	// durableEcho is the read of an echo with replicated durability; with
	// local durability the store reads echoes with getQuery (Store.echo).
	durableEcho string
}

// build is the statement set of parts p.
func (p statementParts) build() statementSet {
	return statementSet{
		acquire:        p.acquire(singleInput),
		batchAcquire:   p.acquire(batchInput),
		naiveAcquire:   p.naiveAcquire(),
		heartbeat:      p.heartbeat(false),
		batchHeartbeat: p.heartbeat(true),
		durableEcho:    p.durableEcho(),
	}
}

// productionStatements are the statements of every ordinary build.
var productionStatements = productionParts.build()
