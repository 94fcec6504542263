package stores

// The conditions on a grant that both stores write the same, in the SQL of
// either: the statements refer to the leases row as l, and now is the
// instant of the decision as the statement reads it (a Postgres clock
// expression, a bound parameter of Unix milliseconds in SQLite).

// GrantOpen: the grant of l was neither released nor revoked. It is held
// while it has not expired; past that it is expired, with nobody having
// taken over.
const GrantOpen = `l.released_at IS NULL AND l.revoked_at IS NULL`

// HeldAt: the grant of l is held at the instant now.
func HeldAt(now string) string {
	return `(` + GrantOpen + ` AND l.expires_at > ` + now + `)`
}

// ExpiredAt: the grant of l has expired by now and nobody took over.
func ExpiredAt(now string) string {
	return `(` + GrantOpen + ` AND l.expires_at <= ` + now + `)`
}

// AheadAt: a mark of l lies after the instant ahead (the clock plus the
// window a tick may lie ahead): its last completed tick, its open grant's
// tick, or its owed tick. Store.JobsAhead counts such jobs; Repair undoes
// the marks.
func AheadAt(ahead string) string {
	return `(l.last_completed_tick > ` + ahead + ` OR (` + GrantOpen + ` AND l.tick > ` + ahead + `) OR l.owed_tick > ` + ahead + `)`
}
