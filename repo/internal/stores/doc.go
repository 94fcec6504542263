// Package stores holds what the Postgres store (repo/postgres) and the
// embedded store (repo/sqlite) share and neither owns: the SQL conditions
// both write the same (OverdueCondition, ListFilters), the credentials row
// and its read, the Stats row, the parse cache of schedule specs, the
// validation of an acquire at a store's entry, and the events a store call
// tells its leaseapi.Observer once it has committed. It is internal to repo:
// nothing outside the stores needs it.
package stores
