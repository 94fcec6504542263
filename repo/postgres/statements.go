package postgres

import (
	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/decide"
)

// statementParts are the parts of the echo statement and of the facts
// decisions are made on that a chaos mutant replaces (mutants_chaos.go);
// every ordinary build uses productionParts. A mutant is thus a whole
// statement set built by the same functions from other parts, chosen when
// the store opens: no statement text is edited.
type statementParts struct {
	// echoLock is the durable echo's locking clause (durableEcho), which
	// makes its transaction write WAL and so wait for the synchronous
	// standby.
	echoLock string
	// facts, when not nil, changes the row an acquire is decided on (a
	// mutant's wrong fact; Store.facts).
	facts func(*leaseapi.AcquireParams, *leaseRow)
	// heartbeatFacts, when not nil, changes the row a heartbeat is
	// decided on (Store.heartbeatFacts).
	heartbeatFacts func(*leaseapi.HeartbeatParams, *leaseRow)
	// groupFacts, when not nil, changes the group a grant in it is
	// decided on (Store.groupFacts).
	groupFacts func(*decide.GroupFacts)
	// policyDecision, when not nil, changes a policy's decision before it
	// is written, given the state it was decided from (decidePolicy).
	policyDecision func(read leaseapi.PolicyState, d *decide.PolicyDecision)
}

var productionParts = statementParts{echoLock: ` FOR KEY SHARE`}

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
	// durableEcho is the read of an echo with replicated durability; with
	// local durability the store reads echoes with getQuery (Store.echo).
	durableEcho string
	// facts, heartbeatFacts, groupFacts and policyDecision are
	// statementParts'.
	facts          func(*leaseapi.AcquireParams, *leaseRow)
	heartbeatFacts func(*leaseapi.HeartbeatParams, *leaseRow)
	groupFacts     func(*decide.GroupFacts)
	policyDecision func(read leaseapi.PolicyState, d *decide.PolicyDecision)
}

// build is the statement set of parts p.
func (p statementParts) build() statementSet {
	return statementSet{
		durableEcho:    p.durableEcho(),
		facts:          p.facts,
		heartbeatFacts: p.heartbeatFacts,
		groupFacts:     p.groupFacts,
		policyDecision: p.policyDecision,
	}
}

// productionStatements are the statements of every ordinary build.
var productionStatements = productionParts.build()
