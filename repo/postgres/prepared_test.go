package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// TestPostgresPreparedStatementsSurviveReconnect kills the store's database
// sessions, and with them the statements prepared on them (as a Postgres
// restart or a failover does). The next calls may fail as unavailable, one
// per pooled connection, and then the statements are prepared again on new
// connections: no call fails for good with "prepared statement does not
// exist".
func TestPostgresPreparedStatementsSurviveReconnect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const appName = "leaseapi-prepared-test" // only these sessions are killed
	u, err := url.Parse(repotest.PostgresURL(t))
	if err != nil {
		t.Fatalf("parse test database URL: %v", err)
	}
	q := u.Query()
	q.Set("application_name", appName)
	u.RawQuery = q.Encode()

	const poolSize = 2
	store, err := postgres.Open(ctx, postgres.Config{DSN: u.String(), MaxOpenConns: poolSize})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	admin, err := sqlx.Open("postgres", repotest.PostgresURL(t))
	if err != nil {
		t.Fatalf("open admin connection: %v", err)
	}
	t.Cleanup(func() { _ = admin.Close() })

	const jobID = "prepared-reconnect"
	lease, err := store.Acquire(ctx, &leaseapi.AcquireParams{JobID: jobID, Owner: "a", TTL: time.Minute})
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	for round := 1; round <= 2; round++ {
		var killed int
		err := admin.Get(&killed, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1`, appName)
		if err != nil {
			t.Fatalf("terminate sessions: %v", err)
		}
		if killed == 0 {
			t.Fatalf("round %d: no session of the store to terminate", round)
		}
		var ok bool
		for attempt := 1; attempt <= poolSize+2 && !ok; attempt++ {
			_, err := store.Heartbeat(ctx, &leaseapi.HeartbeatParams{JobID: jobID, Owner: "a", Token: lease.Token})
			switch {
			case err == nil:
				ok = true
			case !errors.Is(err, leaseapi.ErrUnavailable):
				t.Fatalf("round %d: heartbeat %d after the sessions were killed: %v (want success or unavailable)", round, attempt, err)
			}
		}
		if !ok {
			t.Fatalf("round %d: no heartbeat succeeded within %d attempts after the sessions were killed", round, poolSize+2)
		}
		if _, err := store.Acquire(ctx, &leaseapi.AcquireParams{JobID: jobID, Owner: "a", TTL: time.Minute}); err != nil {
			t.Fatalf("round %d: the holder's acquire after reconnecting: %v", round, err)
		}
	}
}
