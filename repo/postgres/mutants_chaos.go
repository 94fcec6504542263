//go:build chaos_mutants

package postgres

// The chaos suite's negative controls (docs/reliability.md, Mutants): in a
// leaseapi built with -tags chaos_mutants, LEASEAPI_MUTANT switches one
// deliberate bug on, and test/chaos (make chaos-mutants) asserts that the
// invariants named for it catch it. A checker that never fails is not a
// checker. The default build contains none of this file.
//
// A mutant is a set of statements the store chooses once, when it opens
// (statements); the constants of postgres.go stay as they are. The batched
// acquire and heartbeat (batch.go) are derived from the chosen acquire and
// heartbeat after this, so a mutant of either breaks the batched one too. Each broken
// statement is the correct one with one clause replaced, and the
// replacement panics when the clause is no longer there: a query changed by
// its owner must not silently turn a mutant into a no-op. (Writing each
// broken statement out in full would copy the SQL five times and let the
// copies drift from the statements they are meant to break.)
//
// Reading the environment here, outside main, is deliberate: the switch
// must not exist in any other build, and must not need any other file.

import (
	"fmt"
	"os"
	"strings"
)

// The clauses the mutants replace.
const (
	// heldAtSnapshot and heldUnderLock are the acquire's two tests of
	// "held by someone": on the snapshot (fast path) and under the row
	// lock (the upsert's WHERE).
	heldAtSnapshot = "OR (l.released_at IS NULL AND l.revoked_at IS NULL AND l.expires_at > c.now"
	heldUnderLock  = "AND (NOT (l.released_at IS NULL AND l.revoked_at IS NULL AND l.expires_at > clock_timestamp())"
	// nextToken is the grant's token: the same on a renewal, the next one
	// on a new grant.
	nextToken = "CASE WHEN s.renew THEN l.token ELSE l.token + 1 END"
	// fencedHeartbeat is the heartbeat's owner and token check.
	fencedHeartbeat = "WHERE job_id = $1 AND owner = $2 AND token = $3"
	// serviceClock is this instance's clock offset (M5), sent as a
	// session setting.
	serviceClock = "current_setting('leaseapi.clock_offset')::interval"
)

var mutantStatements = map[string]func() statementSet{
	// Acquire ignores expiry: a lease held by someone else is taken over
	// as if it had expired (snapshot refusal and upsert guard).
	"M1": func() statementSet {
		return acquireWith(
			heldAtSnapshot, "OR (l.released_at IS NULL AND l.revoked_at IS NULL AND false",
			heldUnderLock, "AND (NOT (l.released_at IS NULL AND l.revoked_at IS NULL AND false)")
	},
	// Heartbeat without the fencing check: any caller extends the lease
	// while it is held.
	"M2": func() statementSet {
		q := productionStatements
		q.heartbeat = mutate("M2", q.heartbeat, fencedHeartbeat,
			"WHERE job_id = $1 AND $2::text IS NOT NULL AND $3::bigint IS NOT NULL")
		return q
	},
	// Token reuse: a grant after a release keeps the released token.
	"M3": func() statementSet {
		return acquireWith(nextToken, "CASE WHEN s.renew OR l.released_at IS NOT NULL THEN l.token ELSE l.token + 1 END")
	},
	// Commits acknowledged before they are durable (see init); the chaos
	// run crashes Postgres to lose some. The statements are right.
	"M4": func() statementSet { return productionStatements },
	// Expiry decided with the service's clock: the acquire's two held
	// tests read the database clock plus this instance's offset (see init).
	"M5": func() statementSet {
		return acquireWith(
			heldAtSnapshot, strings.Replace(heldAtSnapshot, "c.now", "(c.now + "+serviceClock+")", 1),
			heldUnderLock, strings.Replace(heldUnderLock, "clock_timestamp()", "(clock_timestamp() + "+serviceClock+")", 1))
	},
	// Acquire is not idempotent: the holder's retry gets a new token.
	"M7": func() statementSet {
		return acquireWith(nextToken, "l.token + 1")
	},
}

// init adds the session settings of M4 and M5 to every connection. It runs
// before any store opens: the connector copies serverDefaults when it is
// made, before the store chooses its statements.
func init() {
	switch os.Getenv("LEASEAPI_MUTANT") {
	case "M4":
		serverDefaults["synchronous_commit"] = "off"
	case "M5":
		offset := os.Getenv("LEASEAPI_TEST_CLOCK_OFFSET") // e.g. 5s
		if offset == "" {
			offset = "0s"
		}
		serverDefaults["leaseapi.clock_offset"] = offset
	}
}

// statements returns the set LEASEAPI_MUTANT names, or the correct one.
func statements() statementSet {
	m := os.Getenv("LEASEAPI_MUTANT")
	if m == "" {
		return productionStatements
	}
	set, ok := mutantStatements[m]
	if !ok {
		panic(fmt.Sprintf("LEASEAPI_MUTANT=%q: no such mutant (M1, M2, M3, M4, M5, M7; M6 is configuration)", m))
	}
	return set()
}

// acquireWith is the correct set with pairs of (clause, replacement)
// applied to both acquire statements (the fast path and the naive one
// share the upsert).
func acquireWith(pairs ...string) statementSet {
	q := productionStatements
	for i := 0; i+1 < len(pairs); i += 2 {
		q.acquire = mutate("acquire", q.acquire, pairs[i], pairs[i+1])
		if pairs[i] != heldAtSnapshot { // the naive acquire has no snapshot
			q.naiveAcquire = mutate("naive acquire", q.naiveAcquire, pairs[i], pairs[i+1])
		}
	}
	return q
}

// mutate replaces clause in q and panics when q does not contain it.
func mutate(what, q, clause, replacement string) string {
	if !strings.Contains(q, clause) {
		panic(fmt.Sprintf("mutant of the %s statement: it no longer contains %q; update repo/mutants_chaos.go", what, clause))
	}
	return strings.ReplaceAll(q, clause, replacement)
}
