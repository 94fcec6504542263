//go:build chaos_mutants

package postgres

import (
	"strings"
	"testing"
)

// TestMutantStatements checks that each mutant differs from production
// exactly where it breaks it: the acquire mutants in the facts the
// acquire is decided on, the group mutant in the facts of the group a
// grant in a group is decided on, the policy mutant in the decision of a
// policy, the heartbeat mutant in the facts a heartbeat is decided on,
// unguarded in the durable echo only, and M4 nowhere.
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
			heartbeatAsIs := q.heartbeatFacts == nil
			switch name {
			case "unguarded":
				if q.durableEcho == prod.durableEcho || strings.Contains(q.durableEcho, "FOR KEY SHARE") ||
					q.facts != nil || !heartbeatAsIs {
					t.Errorf("mutant %s: want the durable echo without its transaction id and the rest as it is", name)
				}
			case "M2":
				if heartbeatAsIs || q.facts != nil || q.groupFacts != nil || q.policyDecision != nil || q.durableEcho != prod.durableEcho {
					t.Errorf("mutant %s: want the heartbeat's facts broken and the rest as it is", name)
				}
			case "M13":
				if q.groupFacts == nil || q.facts != nil || q.policyDecision != nil || !heartbeatAsIs || q.durableEcho != prod.durableEcho {
					t.Errorf("mutant %s: want the group's facts broken and the rest as it is", name)
				}
			case "M14":
				if q.policyDecision == nil || q.facts != nil || q.groupFacts != nil || !heartbeatAsIs || q.durableEcho != prod.durableEcho {
					t.Errorf("mutant %s: want the policy's decision broken and the rest as it is", name)
				}
			default:
				if q.groupFacts != nil || q.policyDecision != nil || q.facts == nil || !heartbeatAsIs || q.durableEcho != prod.durableEcho {
					t.Errorf("mutant %s: want the acquire's facts broken and the statements as they are", name)
				}
			}
		})
	}
}
