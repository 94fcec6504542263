package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/internal/pgcluster"
	"github.com/leaseapi/leaseapi/repo/postgres"
)

// syncPair is a primary whose commits wait for its synchronous standby
// "standby", streaming, with a migrated database leaseapi on both.
func syncPair(t *testing.T) (primary, standby *pgcluster.Cluster) {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping private Postgres clusters in -short mode")
	}
	primary = pgcluster.Start(t, []string{"synchronous_standby_names = 'standby'"})
	// The set-up sessions commit before the standby exists.
	admin, err := sql.Open("postgres", primary.DSN("postgres", "&synchronous_commit=local"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(`CREATE DATABASE leaseapi`); err != nil {
		t.Fatalf("create database: %v", err)
	}
	m, err := postgres.Open(context.Background(), postgres.Config{DSN: primary.DSN("leaseapi", "&synchronous_commit=local")})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	standby = pgcluster.StartStandby(t, primary, "standby", nil)
	waitSyncStreaming(t, admin)
	return primary, standby
}

// waitSyncStreaming waits until a standby streams as the synchronous one.
func waitSyncStreaming(t *testing.T, admin *sql.DB) {
	t.Helper()
	waitFor(t, "the standby to stream as the synchronous standby", func() bool {
		var n int
		err := admin.QueryRow(`SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = 'sync'`).Scan(&n)
		return err == nil && n == 1
	})
}

// With replicated durability a 200 that echoes a state already there (the
// retry of a release, of an acquire, of a heartbeat; a revocation of a
// lease no longer held; a pause of a paused job) waits, like a write, until
// the standby has it: while the standby is down, a retry after a cancelled
// commit wait answers ErrUnavailable, never the state the primary alone
// holds; once the standby is back, the retry answers 200 and the standby
// has the state.
func TestReplicatedEchoWaitsForTheStandby(t *testing.T) {
	primary, standby := syncPair(t)
	admin, err := sql.Open("postgres", primary.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	store := openStore(t, postgres.Config{DSN: primary.DSN("leaseapi"), Durability: postgres.DurabilityReplicated})
	if store.EchoQuery() == postgres.GetQuery || !strings.Contains(store.EchoQuery(), "FOR KEY SHARE") {
		t.Fatalf("replicated store's echo: %q, want the durable read", store.EchoQuery())
	}
	bg := context.Background()
	if st, err := store.CheckReplication(bg); err != nil || st.Durable() != nil || st.SyncStandbys != 1 {
		t.Fatalf("CheckReplication: got %+v, %v, want a durable primary with one synchronous standby", st, err)
	}

	const ttl = 10 * time.Minute
	rel, err := store.Acquire(bg, &leaseapi.AcquireParams{JobID: "release", Owner: "a", TTL: ttl})
	if err != nil {
		t.Fatalf("Acquire with the standby streaming: %v", err)
	}
	hb, err := store.Acquire(bg, &leaseapi.AcquireParams{JobID: "heartbeat", Owner: "a", TTL: ttl})
	if err != nil {
		t.Fatalf("Acquire with the standby streaming: %v", err)
	}
	if _, err := store.Acquire(bg, &leaseapi.AcquireParams{JobID: "paused", Owner: "a", TTL: ttl}); err != nil {
		t.Fatalf("Acquire with the standby streaming: %v", err)
	}

	if err := standby.Stop(); err != nil {
		t.Fatal(err)
	}
	// shortly is a request deadline that ends a wait for the standby.
	shortly := func() (context.Context, context.CancelFunc) { return context.WithTimeout(bg, 700*time.Millisecond) }
	calls := []struct {
		name string
		call func(ctx context.Context) (leaseapi.Lease, error)
		// primaryHas is what the first attempt left on the primary.
		primaryHas func(l leaseapi.Lease) bool
	}{
		{"release", func(ctx context.Context) (leaseapi.Lease, error) {
			return store.Release(ctx, &leaseapi.ReleaseParams{JobID: "release", Owner: "a", Token: rel.Token, Outcome: leaseapi.OutcomeSucceeded})
		}, func(l leaseapi.Lease) bool { return l.State == leaseapi.StateReleased }},
		{"acquire", func(ctx context.Context) (leaseapi.Lease, error) {
			return store.Acquire(ctx, &leaseapi.AcquireParams{JobID: "acquire", Owner: "a", TTL: ttl})
		}, func(l leaseapi.Lease) bool { return l.State == leaseapi.StateHeld && l.Owner == "a" }},
		{"heartbeat", func(ctx context.Context) (leaseapi.Lease, error) {
			return store.Heartbeat(ctx, &leaseapi.HeartbeatParams{JobID: "heartbeat", Owner: "a", Token: hb.Token, TTL: 2 * ttl})
		}, func(l leaseapi.Lease) bool {
			return l.State == leaseapi.StateHeld && l.ExpiresAt.Sub(l.RenewedAt) == 2*ttl
		}},
		{"pause", func(ctx context.Context) (leaseapi.Lease, error) {
			return store.Pause(ctx, &leaseapi.PauseParams{JobID: "paused", By: "ops"})
		}, func(l leaseapi.Lease) bool { return l.PausedAt != nil }},
	}
	for _, c := range calls {
		before := store.CommitWaitsCancelled()
		ctx, cancel := shortly()
		_, err := c.call(ctx)
		cancel()
		if !errors.Is(err, leaseapi.ErrUnavailable) {
			t.Fatalf("%s with the standby down: got %v, want ErrUnavailable", c.name, err)
		}
		if c.name == "release" {
			// The first call, alone on the pool, reached the primary and
			// committed there; the later ones may queue behind connections
			// still waiting for the standby, so only their answers count.
			waitFor(t, c.name+"'s cancelled commit wait", func() bool { return store.CommitWaitsCancelled() > before })
			if l, err := store.Get(bg, "release"); err != nil || !c.primaryHas(l) {
				t.Fatalf("%s: the primary has %+v (%v), want the cancelled commit visible there", c.name, l, err)
			}
		}
		// The retry finds the state on the primary (the release's, at
		// least); the standby has not got it, so it is not acknowledged.
		ctx, cancel = shortly()
		l, err := c.call(ctx)
		cancel()
		if !errors.Is(err, leaseapi.ErrUnavailable) {
			t.Errorf("%s retried with the standby down: got %+v, %v, want ErrUnavailable", c.name, l, err)
		}
	}
	// A revocation of the released lease echoes it.
	ctx, cancel := shortly()
	if l, err := store.Revoke(ctx, &leaseapi.RevokeParams{JobID: "release", By: "ops"}); !errors.Is(err, leaseapi.ErrUnavailable) {
		t.Errorf("Revoke of a released lease with the standby down: got %+v, %v, want ErrUnavailable", l, err)
	}
	cancel()

	if err := standby.StartServer(); err != nil {
		t.Fatal(err)
	}
	waitSyncStreaming(t, admin)
	sdb, err := sql.Open("postgres", standby.DSN("leaseapi"))
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	for _, c := range calls {
		ctx, cancel := context.WithTimeout(bg, 30*time.Second)
		l, err := c.call(ctx)
		cancel()
		if err != nil || !c.primaryHas(l) {
			t.Fatalf("%s retried with the standby back: got %+v, %v, want 200 with the state", c.name, l, err)
		}
		// The answer waited for the standby: its flush covers the state
		// acknowledged, which the standby shows once it has applied it.
		var flushed string
		if err := admin.QueryRow(`SELECT pg_current_wal_flush_lsn()::text`).Scan(&flushed); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the standby to apply the acknowledged "+c.name, func() bool {
			var ok bool
			return sdb.QueryRow(`SELECT COALESCE(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)`, flushed).Scan(&ok) == nil && ok
		})
	}
	var released, paused, heldBy string
	var expiresIn float64
	err = sdb.QueryRow(`SELECT
		(SELECT last_outcome FROM leases WHERE job_id = 'release' AND released_at IS NOT NULL),
		(SELECT paused_by FROM leases WHERE job_id = 'paused'),
		(SELECT owner FROM leases WHERE job_id = 'acquire'),
		(SELECT extract(epoch FROM expires_at - renewed_at) FROM leases WHERE job_id = 'heartbeat')`).Scan(&released, &paused, &heldBy, &expiresIn)
	if err != nil || released != "succeeded" || paused != "ops" || heldBy != "a" || time.Duration(expiresIn)*time.Second != 2*ttl {
		t.Errorf("the standby has release %q, pause %q, acquire's owner %q, heartbeat's ttl %vs (%v); want succeeded, ops, a, %v",
			released, paused, heldBy, expiresIn, err, 2*ttl)
	}

	local := openStore(t, postgres.Config{DSN: primary.DSN("leaseapi")})
	if local.EchoQuery() != postgres.GetQuery {
		t.Errorf("local store's echo: %q, want the plain read", local.EchoQuery())
	}
}
