package repo

// pgStatements are the Postgres store's hot statements that the chaos
// suite's negative controls replace. The store takes them from statements()
// once, when it opens: in every ordinary build that is postgresStatements,
// the constants of postgres.go; a build with -tags chaos_mutants may choose
// a deliberately broken set instead (repo/mutants_chaos.go).
type pgStatements struct {
	acquire, naiveAcquire, heartbeat string
	// batchAcquire and batchHeartbeat are derived from acquire and
	// heartbeat when the store opens (batchAcquireQuery,
	// batchHeartbeatQuery), so that they are broken wherever those are.
	batchAcquire, batchHeartbeat string
}

// postgresStatements are the statements of every ordinary build.
var postgresStatements = pgStatements{
	acquire:      acquireQuery,
	naiveAcquire: naiveAcquireQuery,
	heartbeat:    heartbeatQuery,
}
