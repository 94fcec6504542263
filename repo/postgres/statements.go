package postgres

// statementSet are the Postgres store's hot statements that the chaos
// suite's negative controls replace. The store takes them from statements()
// once, when it opens: in every ordinary build that is productionStatements,
// the constants of postgres.go; a build with -tags chaos_mutants may choose
// a deliberately broken set instead (repo/mutants_chaos.go).
type statementSet struct {
	acquire, naiveAcquire, heartbeat string
	// batchAcquire and batchHeartbeat are derived from acquire and
	// heartbeat when the store opens (batchAcquireQuery,
	// batchHeartbeatQuery), so that they are broken wherever those are.
	batchAcquire, batchHeartbeat string
}

// productionStatements are the statements of every ordinary build.
var productionStatements = statementSet{
	acquire:      acquireQuery,
	naiveAcquire: naiveAcquireQuery,
	heartbeat:    heartbeatQuery,
}
