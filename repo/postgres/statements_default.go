//go:build !chaos_mutants

package postgres

// statements returns the store's statements: without -tags chaos_mutants
// there is no other set to choose.
func statements() statementSet { return productionStatements }
