// Package stores holds what the Postgres store (repo/postgres) and the
// embedded store (repo/sqlite) share and neither owns: the SQL conditions
// of their reads across jobs (OverdueCondition, ListFilters, HeldAt and
// the like; the rules of a lease are Go, in repo/decide), the credentials
// row and its read, the Stats row, the validation of an acquire at a store's entry, and the events a store call
// tells its leaseapi.Observer once it has committed. It is internal to repo:
// nothing outside the stores needs it.
package stores
