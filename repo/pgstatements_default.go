//go:build !chaos_mutants

package repo

// statements returns the store's statements: without -tags chaos_mutants
// there is no other set to choose.
func statements() pgStatements { return postgresStatements }
