//go:build chaos_mutants

package postgres

import (
	"strings"
	"testing"
)

// TestMutantStatements checks that each mutant's statements differ from the
// production ones exactly where the mutant breaks them: the acquire
// mutants in every acquire statement (single, batched, naive), the
// heartbeat mutant in both heartbeat statements, unguarded in the durable
// echo only, and M4 nowhere.
func TestMutantStatements(t *testing.T) {
	prod := productionStatements
	for name, parts := range mutantParts {
		t.Run(name, func(t *testing.T) {
			p := parts()
			if p == nil {
				if name != "M4" {
					t.Errorf("mutant %s: no parts, so the production statements", name)
				}
				return
			}
			q := p.build()
			acquires := q.acquire != prod.acquire && q.batchAcquire != prod.batchAcquire && q.naiveAcquire != prod.naiveAcquire
			heartbeats := q.heartbeat != prod.heartbeat && q.batchHeartbeat != prod.batchHeartbeat
			switch name {
			case "unguarded":
				if q.durableEcho == prod.durableEcho || strings.Contains(q.durableEcho, "FOR KEY SHARE") ||
					q.acquire != prod.acquire || q.heartbeat != prod.heartbeat {
					t.Errorf("mutant %s: want the durable echo without its transaction id and the hot statements as they are", name)
				}
			case "M2":
				if !heartbeats || q.acquire != prod.acquire || q.batchAcquire != prod.batchAcquire {
					t.Errorf("mutant %s: want both heartbeats broken and the acquires as they are", name)
				}
			default:
				if !acquires || q.heartbeat != prod.heartbeat || q.batchHeartbeat != prod.batchHeartbeat {
					t.Errorf("mutant %s: want every acquire statement broken and the heartbeats as they are", name)
				}
			}
		})
	}
}
