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
		})
	}
}
