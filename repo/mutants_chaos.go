//go:build chaos_mutants

package repo

// The chaos suite's negative controls (RELIABILITY.md §4, mutants): in a
// leaseapi built with -tags chaos_mutants, LEASEAPI_MUTANT switches one
// deliberate bug on, and test/chaos (make chaos-mutants) asserts that the
// invariant named for it catches it. A checker that never fails is not a
// checker. The default build contains none of this file.
//
// Reading the environment here, outside main, is deliberate: the switch
// must not exist in any other build, and must not need any other file.

import (
	"fmt"
	"os"
	"strings"
)

func init() {
	m := os.Getenv("LEASEAPI_MUTANT")
	switch m {
	case "":
	case "M1":
		// Acquire ignores expiry: a lease held by someone else is taken
		// over as if it had expired (snapshot refusal and upsert guard).
		acquireQuery = mutate(m, acquireQuery,
			"OR (l.released_at IS NULL AND l.revoked_at IS NULL AND l.expires_at > c.now",
			"OR (l.released_at IS NULL AND l.revoked_at IS NULL AND false")
		for _, q := range []*string{&acquireQuery, &naiveAcquireQuery} {
			*q = mutate(m, *q,
				"AND (NOT (l.released_at IS NULL AND l.revoked_at IS NULL AND l.expires_at > clock_timestamp())",
				"AND (NOT (l.released_at IS NULL AND l.revoked_at IS NULL AND false)")
		}
	case "M2":
		// Heartbeat without the fencing check: any caller extends the
		// lease while it is held.
		heartbeatQuery = mutate(m, heartbeatQuery,
			"WHERE job_id = $1 AND owner = $2 AND token = $3",
			"WHERE job_id = $1 AND $2::text IS NOT NULL AND $3::bigint IS NOT NULL")
	case "M3":
		// Token reuse: a grant after a release keeps the released token.
		for _, q := range []*string{&acquireQuery, &naiveAcquireQuery} {
			*q = mutate(m, *q,
				"CASE WHEN s.renew THEN l.token ELSE l.token + 1 END",
				"CASE WHEN s.renew OR l.released_at IS NOT NULL THEN l.token ELSE l.token + 1 END")
		}
	case "M4":
		// Commits acknowledged before they are durable; the chaos run
		// crashes Postgres to lose some.
		serverDefaults["synchronous_commit"] = "off"
	case "M5":
		// Expiry decided with the service's clock: the database clock plus
		// this instance's offset (LEASEAPI_TEST_CLOCK_OFFSET, e.g. 5s),
		// sent as a session setting.
		offset := os.Getenv("LEASEAPI_TEST_CLOCK_OFFSET")
		if offset == "" {
			offset = "0s"
		}
		serverDefaults["leaseapi.clock_offset"] = offset
		const clock = "(clock_timestamp() + current_setting('leaseapi.clock_offset')::interval)"
		for _, q := range []*string{&acquireQuery, &naiveAcquireQuery, &heartbeatQuery, &releaseQuery} {
			*q = mutate(m, *q, "clock_timestamp()", clock)
		}
	case "M7":
		// Acquire is not idempotent: the holder's retry gets a new token.
		for _, q := range []*string{&acquireQuery, &naiveAcquireQuery} {
			*q = mutate(m, *q, "CASE WHEN s.renew THEN l.token ELSE l.token + 1 END", "l.token + 1")
		}
	default:
		panic(fmt.Sprintf("LEASEAPI_MUTANT=%q: no such mutant (M1, M2, M3, M4, M5, M7; M6 is configuration)", m))
	}
}

// mutate replaces old in q and panics when q does not contain it: a query
// changed by its owner must not silently turn a mutant into a no-op.
func mutate(mutant, q, old, new string) string {
	if !strings.Contains(q, old) {
		panic(fmt.Sprintf("mutant %s: the query no longer contains %q; update repo/mutants_chaos.go", mutant, old))
	}
	return strings.ReplaceAll(q, old, new)
}
