//go:build chaos_mutants

package repo

import "testing"

// TestMutantStatements builds every mutant's statements (a clause that is
// no longer there panics) and checks that each one changes something.
func TestMutantStatements(t *testing.T) {
	for name, set := range mutantStatements {
		t.Run(name, func(t *testing.T) {
			q := set()
			if q == postgresStatements && name != "M4" {
				t.Errorf("mutant %s: the statements are the correct ones", name)
			}
			// The batched acquire is derived from the acquire when the
			// store opens: a broken acquire must stay broken in it.
			if q.acquire != postgresStatements.acquire &&
				batchAcquireQuery(q.acquire) == batchAcquireQuery(postgresStatements.acquire) {
				t.Errorf("mutant %s: the batched acquire is the correct one", name)
			}
			if q.heartbeat != postgresStatements.heartbeat &&
				batchHeartbeatQuery(q.heartbeat) == batchHeartbeatQuery(postgresStatements.heartbeat) {
				t.Errorf("mutant %s: the batched heartbeat is the correct one", name)
			}
		})
	}
}
