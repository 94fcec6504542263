//go:build chaos_mutants

package postgres

// The chaos suite's negative controls (docs/reliability.md, Mutants): in a
// leaseapi built with -tags chaos_mutants, LEASEAPI_MUTANT switches one
// deliberate bug on, and test/chaos (make chaos-mutants) asserts that the
// invariants named for it catch it. A checker that never fails is not a
// checker. The default build contains none of this file.
//
// A mutant is a whole set of statements, built by the same functions as
// the production set (statements.go) from statementParts with one part
// broken, and chosen once, when the store opens (statements). No
// production statement is edited, so no reformatting of a query can turn a
// mutant into a no-op or make opening the store panic; TestMutantStatements
// checks that each mutant's statements differ from the production ones
// where the mutant says they do. The batched acquire and heartbeat are
// built from the same parts, so a mutant breaks them too.
//
// Reading the environment here, outside main, is deliberate: the switch
// must not exist in any other build, and must not need any other file.

import (
	"fmt"
	"os"

	"github.com/leaseapi/leaseapi/repo/internal/stores"
)

// serviceClock is this instance's clock offset (M5), sent as a session
// setting.
const serviceClock = `current_setting('leaseapi.clock_offset')::interval`

// mutantParts are the parts each mutant builds its statements from; nil
// for a mutant whose statements are the production ones (M4).
var mutantParts = map[string]func() *statementParts{
	// Acquire ignores expiry: a lease held by someone else is taken over
	// as if it had expired (the fast path's refusal and the upsert's guard).
	"M1": func() *statementParts {
		p := productionParts
		p.heldAgainst = func(string) string { return `(` + stores.GrantOpen + ` AND false)` }
		return &p
	},
	// Heartbeat without the fencing check: any caller extends the lease
	// while it is held.
	"M2": func() *statementParts {
		p := productionParts
		p.fence = func(owner, token string) string {
			return owner + `::text IS NOT NULL AND ` + token + `::bigint IS NOT NULL`
		}
		return &p
	},
	// Token reuse: a grant after a release keeps the released token.
	"M3": func() *statementParts {
		p := productionParts
		p.nextToken = `CASE WHEN s.renew OR l.released_at IS NOT NULL THEN l.token ELSE ` + tokenAfter(`l.token`, `EXCLUDED.timeline`) + ` END`
		return &p
	},
	// Commits acknowledged before they are durable (see init); the chaos
	// run crashes Postgres to lose some. The statements are right.
	"M4": func() *statementParts { return nil },
	// Expiry decided with the service's clock: the acquire's two held
	// tests read the database clock plus this instance's offset (see init).
	"M5": func() *statementParts {
		p := productionParts
		p.heldAgainst = func(now string) string { return stores.HeldAt(`(` + now + ` + ` + serviceClock + `)`) }
		return &p
	},
	// Acquire is not idempotent: the holder's retry gets a new token.
	"M7": func() *statementParts {
		p := productionParts
		p.nextToken = tokenAfter(`l.token`, `EXCLUDED.timeline`)
		return &p
	},
	// Echoes acknowledged before they are durable: with replicated
	// durability, the answer to a call that found its state already there
	// (a retried release whose first commit's wait for the standby was
	// cancelled) is read without waiting for the standby (durableEcho), so
	// a failover can lose what it acknowledged. For the Patroni harness.
	"unguarded": func() *statementParts {
		p := productionParts
		p.echoLock = ``
		return &p
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

// statements returns the set LEASEAPI_MUTANT names, or the production one.
func statements() statementSet {
	m := os.Getenv("LEASEAPI_MUTANT")
	if m == "" {
		return productionStatements
	}
	parts, ok := mutantParts[m]
	if !ok {
		panic(fmt.Sprintf("LEASEAPI_MUTANT=%q: no such mutant (M1, M2, M3, M4, M5, M7, unguarded; M6 is configuration)", m))
	}
	if p := parts(); p != nil {
		return p.build()
	}
	return productionStatements
}
