//go:build chaos_mutants

package postgres

import "testing"

// TestMutantStatements builds every mutant's statements (a clause that is
// no longer there panics) and checks that each one changes something.
func TestMutantStatements(t *testing.T) {
	for name, set := range mutantStatements {
		t.Run(name, func(t *testing.T) {
			q := set()
			if q == productionStatements && name != "M4" {
				t.Errorf("mutant %s: the statements are the correct ones", name)
			}
			// The batched acquire is derived from the acquire when the
			// store opens: a broken acquire must stay broken in it.
			if q.acquire != productionStatements.acquire &&
				batchAcquireQuery(q.acquire) == batchAcquireQuery(productionStatements.acquire) {
				t.Errorf("mutant %s: the batched acquire is the correct one", name)
			}
			if q.heartbeat != productionStatements.heartbeat &&
				batchHeartbeatQuery(q.heartbeat) == batchHeartbeatQuery(productionStatements.heartbeat) {
				t.Errorf("mutant %s: the batched heartbeat is the correct one", name)
			}
		})
	}
}
