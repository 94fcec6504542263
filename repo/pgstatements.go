package repo

// pgStatements are the Postgres store's hot statements that the chaos
// suite's negative controls replace. The store takes them from statements()
// once, when it opens: in every ordinary build that is postgresStatements,
// the constants of postgres.go; a build with -tags chaos_mutants may choose
// a deliberately broken set instead (repo/mutants_chaos.go).
type pgStatements struct {
	acquire, naiveAcquire, heartbeat string
	// batchAcquire is derived from acquire when the store opens
	// (batchAcquireQuery), so that it is broken wherever acquire is.
	batchAcquire string
}

// postgresStatements are the statements of every ordinary build.
var postgresStatements = pgStatements{
	acquire:      acquireQuery,
	naiveAcquire: naiveAcquireQuery,
	heartbeat:    heartbeatQuery,
}
