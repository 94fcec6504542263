//go:build chaos_mutants

package postgres

// The chaos suite's negative controls (docs/reliability.md, Mutants): in a
// leaseapi built with -tags chaos_mutants, LEASEAPI_MUTANT switches one
// deliberate bug on, and test/chaos (make chaos-mutants) asserts that the
// invariants named for it catch it. A checker that never fails is not a
// checker. The default build contains none of this file.
//
// A mutant is a statementParts with one part broken, chosen once, when the
// store opens (statements): an echo statement built by the same functions
// from another part, or a wrong fact fed to the decision of an acquire or
// a heartbeat. No production code is edited, so no reformatting of a query
// can turn a mutant into a no-op; TestMutantStatements checks that each
// mutant differs from production where the mutant says it does.
//
// Reading the environment here, outside main, is deliberate: the switch
// must not exist in any other build, and must not need any other file.

import (
	"fmt"
	"os"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/decide"
)

// mutantParts are the parts each mutant builds its statements from; nil
// for a mutant whose statements are the production ones (M4). The acquire
// mutants feed the production decision (decide.PlanAcquire) a wrong fact
// about the row it read (statementParts.facts), or about the group a grant
// in a group is decided on (statementParts.groupFacts); the policy mutant
// changes a policy's decision before it is written
// (statementParts.policyDecision).
var mutantParts = map[string]func() *statementParts{
	// Acquire ignores expiry: a lease held by someone else looks expired.
	"M1": func() *statementParts {
		p := productionParts
		p.facts = func(a *leaseapi.AcquireParams, r *leaseRow) {
			if r.Owner != a.Owner {
				r.ExpiresAt = r.Now
			}
		}
		return &p
	},
	// Heartbeat without the fencing check: any caller extends the lease
	// while it is held (the grant read looks like the caller's to the
	// decision).
	"M2": func() *statementParts {
		p := productionParts
		p.heartbeatFacts = func(h *leaseapi.HeartbeatParams, r *leaseRow) {
			r.Owner, r.Token = h.Owner, h.Token
		}
		return &p
	},
	// Token reuse: a grant after a release keeps the released token (the
	// decision sees the token before it).
	"M3": func() *statementParts {
		p := productionParts
		p.facts = func(_ *leaseapi.AcquireParams, r *leaseRow) {
			if r.ReleasedAt.Valid {
				r.Token--
			}
		}
		return &p
	},
	// Commits acknowledged before they are durable (see init); the chaos
	// run crashes Postgres to lose some. The statements are right.
	"M4": func() *statementParts { return nil },
	// Expiry decided with the service's clock: the acquire is decided at
	// the database clock plus this instance's offset
	// (LEASEAPI_TEST_CLOCK_OFFSET, a Go duration such as 5s).
	"M5": func() *statementParts {
		offset, err := time.ParseDuration(os.Getenv("LEASEAPI_TEST_CLOCK_OFFSET"))
		if err != nil && os.Getenv("LEASEAPI_TEST_CLOCK_OFFSET") != "" {
			panic(fmt.Sprintf("LEASEAPI_TEST_CLOCK_OFFSET: %v", err))
		}
		p := productionParts
		p.facts = func(_ *leaseapi.AcquireParams, r *leaseRow) { r.Now = r.Now.Add(offset) }
		return &p
	},
	// Acquire is not idempotent: the holder's retry gets a new token (its
	// own grant looks expired to it).
	"M7": func() *statementParts {
		p := productionParts
		p.facts = func(a *leaseapi.AcquireParams, r *leaseRow) {
			if r.Owner == a.Owner {
				r.ExpiresAt = r.Now
			}
		}
		return &p
	},
	// The group limit checked off by one: a grant in a group is decided
	// as if the group's limit were one higher, so one job more than the
	// limit holds a slot at once.
	"M13": func() *statementParts {
		p := productionParts
		p.groupFacts = func(g *decide.GroupFacts) { g.Limit++ }
		return &p
	},
	// A policy's state write lost: each decision tells its event but
	// writes back the state it was decided from, so a job with a policy
	// stays ok, is told job.alerting again at each decision a condition
	// holds at, and never job.ok.
	"M14": func() *statementParts {
		p := productionParts
		p.policyDecision = func(read leaseapi.PolicyState, d *decide.PolicyDecision) {
			d.State, d.RealertAt = read, nil
		}
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

// init sets the session setting of M4 on every connection. It runs
// before any store opens: the connector copies serverDefaults when it is
// made.
func init() {
	if os.Getenv("LEASEAPI_MUTANT") == "M4" {
		serverDefaults["synchronous_commit"] = "off"
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
		panic(fmt.Sprintf("LEASEAPI_MUTANT=%q: no such mutant (M1, M2, M3, M4, M5, M7, M13, M14, unguarded; M6 and M8 are configuration)", m))
	}
	if p := parts(); p != nil {
		return p.build()
	}
	return productionStatements
}
