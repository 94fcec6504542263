package postgres

import (
	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/decide"
	"github.com/leaseapi/leaseapi/repo/internal/stores"
)

// statementParts are the parts of the heartbeat and echo statements that a
// chaos mutant replaces (mutants_chaos.go); every ordinary build uses
// productionParts. A mutant is thus a whole statement set built by the same
// functions from other parts, chosen when the store opens: no statement
// text is edited.
type statementParts struct {
	// fence is the heartbeat's test that the caller holds the grant.
	fence func(owner, token string) string
	// echoLock is the durable echo's locking clause (durableEcho), which
	// makes its transaction write WAL and so wait for the synchronous
	// standby.
	echoLock string
	// facts, when not nil, changes the row an acquire is decided on (a
	// mutant's wrong fact; Store.facts).
	facts func(*leaseapi.AcquireParams, *leaseRow)
	// groupFacts, when not nil, changes the group a grant in it is
	// decided on (Store.groupFacts).
	groupFacts func(*decide.GroupFacts)
	// policyDecision, when not nil, changes a policy's decision before it
	// is written, given the state it was decided from (decidePolicy).
	policyDecision func(read leaseapi.PolicyState, d *decide.PolicyDecision)
}

var productionParts = statementParts{
	fence:    func(owner, token string) string { return `l.owner = ` + owner + ` AND l.token = ` + token },
	echoLock: ` FOR KEY SHARE`,
}

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
	heartbeat, batchHeartbeat string
	// durableEcho is the read of an echo with replicated durability; with
	// local durability the store reads echoes with getQuery (Store.echo).
	durableEcho string
	// facts, groupFacts and policyDecision are statementParts'.
	facts          func(*leaseapi.AcquireParams, *leaseRow)
	groupFacts     func(*decide.GroupFacts)
	policyDecision func(read leaseapi.PolicyState, d *decide.PolicyDecision)
}

// build is the statement set of parts p.
func (p statementParts) build() statementSet {
	return statementSet{
		heartbeat:      p.heartbeat(false),
		batchHeartbeat: p.heartbeat(true),
		durableEcho:    p.durableEcho(),
		facts:          p.facts,
		groupFacts:     p.groupFacts,
		policyDecision: p.policyDecision,
	}
}

// productionStatements are the statements of every ordinary build.
var productionStatements = productionParts.build()
