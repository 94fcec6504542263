package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/internal/pgcluster"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// openAdmin opens a connection to the server of dsn, on its postgres
// database, for the statements a test makes as an operator.
func openAdmin(t *testing.T, dsn string) (*sql.DB, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse %s: %v", dsn, err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	u.Path = "/postgres"
	admin, err := sql.Open("postgres", u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	return admin, name
}

func openStore(t *testing.T, cfg postgres.Config) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// A read-only database (a demoted primary; a node a proxy names while its
// promotion is finishing) answers ErrUnavailable, not an internal error,
// and the connection is dropped: the next call gets a new connection,
// which a multi-host DSN or a proxy sends to the new primary.
func TestReadOnlyDatabaseIsUnavailableAndDropsTheConnection(t *testing.T) {
	dsn := repotest.NewPostgresURL(t)
	admin, name := openAdmin(t, dsn)
	setReadOnly := func(on bool) {
		t.Helper()
		q := fmt.Sprintf(`ALTER DATABASE %s SET default_transaction_read_only = %t`, pq.QuoteIdentifier(name), on)
		if _, err := admin.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	setReadOnly(true)
	store := openStore(t, postgres.Config{DSN: dsn})
	ctx := context.Background()
	params := &leaseapi.AcquireParams{JobID: "read-only", Owner: "replica-a", TTL: time.Minute}

	_, err := store.Acquire(ctx, params)
	if !errors.Is(err, leaseapi.ErrUnavailable) {
		t.Fatalf("Acquire on a read-only database: got %v, want ErrUnavailable", err)
	}
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) || pqErr.Code != "25006" {
		t.Errorf("Acquire on a read-only database: got %v, want SQLSTATE 25006 in the chain", err)
	}
	if n := store.OpenConnections(); n != 0 {
		t.Errorf("after a 25006 the pool holds %d connections, want 0 (the read-only one closed)", n)
	}

	// The "promotion" finishes: a new connection is read-write, and the
	// store uses one.
	setReadOnly(false)
	if _, err := store.Acquire(ctx, params); err != nil {
		t.Fatalf("Acquire after the database became writable: %v", err)
	}
}

// With replicated durability a primary without a synchronous standby
// acknowledges nothing: every call and Ready answer ErrUnavailable and say
// why. With local durability the same check only reports.
func TestReplicatedDurabilityWithoutSynchronousStandby(t *testing.T) {
	dsn := repotest.PostgresURL(t)
	ctx := context.Background()
	params := &leaseapi.AcquireParams{JobID: "replicated-" + t.Name(), Owner: "replica-a", TTL: time.Minute}

	replicated := openStore(t, postgres.Config{DSN: dsn, Durability: postgres.DurabilityReplicated})
	if err := replicated.Ready(ctx); !errors.Is(err, leaseapi.ErrUnavailable) || !strings.Contains(err.Error(), "not been checked") {
		t.Errorf("Ready before the first check: got %v, want ErrUnavailable saying it was not checked", err)
	}
	st, err := replicated.CheckReplication(ctx)
	if err != nil {
		t.Fatalf("CheckReplication: %v", err)
	}
	if st.InRecovery || st.SynchronousStandbyNames != "" || st.Timeline < 1 || st.SyncStandbys != 0 {
		t.Errorf("CheckReplication on the single test server: got %+v, want a primary on a timeline ≥ 1 with no synchronous standby", st)
	}
	if got, err := replicated.Setting(postgres.BypassGuard(ctx), "synchronous_commit"); err != nil || got != "on" {
		t.Errorf("session synchronous_commit with replicated durability: got %q (%v), want on", got, err)
	}
	for name, call := range map[string]func() error{
		"Acquire": func() error { _, err := replicated.Acquire(ctx, params); return err },
		"Get":     func() error { _, err := replicated.Get(ctx, params.JobID); return err },
		"Ready":   func() error { return replicated.Ready(ctx) },
	} {
		err := call()
		if !errors.Is(err, leaseapi.ErrUnavailable) || !strings.Contains(err.Error(), "synchronous_standby_names is empty") {
			t.Errorf("%s with replicated durability and no synchronous standby: got %v, want ErrUnavailable naming synchronous_standby_names", name, err)
		}
	}

	local := openStore(t, postgres.Config{DSN: dsn})
	if _, err := local.CheckReplication(ctx); err != nil {
		t.Fatalf("CheckReplication: %v", err)
	}
	if _, err := local.Acquire(ctx, params); err != nil {
		t.Errorf("Acquire with local durability: %v", err)
	}
}

func TestReplicatedDurabilityRefusesADSNThatDoesNotWait(t *testing.T) {
	_, err := postgres.Open(context.Background(), postgres.Config{
		DSN: "postgres://u@127.0.0.1/db?synchronous_commit=local", Durability: postgres.DurabilityReplicated,
	})
	if err == nil || !strings.Contains(err.Error(), "synchronous_commit=local") {
		t.Errorf("Open with replicated durability and synchronous_commit=local: got %v, want an error naming it", err)
	}
}

// syncCluster is a private server whose commits wait for a synchronous
// standby that never attaches, with a migrated database leaseapi.
func syncCluster(t *testing.T) *pgcluster.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping a private Postgres cluster in -short mode")
	}
	c := pgcluster.Start(t, []string{"synchronous_standby_names = 'nobody'"})
	// The set-up sessions commit without waiting for the standby.
	admin, err := sql.Open("postgres", c.DSN("postgres", "&synchronous_commit=local"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(`CREATE DATABASE leaseapi`); err != nil {
		t.Fatalf("create database: %v", err)
	}
	m, err := postgres.Open(context.Background(), postgres.Config{DSN: c.DSN("leaseapi", "&synchronous_commit=local")})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return c
}

// waitFor polls cond until it holds, failing the test after a bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// On a primary whose commits wait for a synchronous standby: a commit
// whose wait is cancelled is visible on the primary but on no standby;
// lib/pq reports it as a success, the store answers ErrUnavailable and
// counts it. And the monitor closes and reopens a replicated store as the
// primary's synchronous_standby_names changes.
func TestSynchronousReplication(t *testing.T) {
	c := syncCluster(t)
	admin, err := sql.Open("postgres", c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	store := openStore(t, postgres.Config{DSN: c.DSN("leaseapi"), Durability: postgres.DurabilityReplicated})
	bg := context.Background()
	st, err := store.CheckReplication(bg)
	if err != nil || st.Durable() != nil {
		t.Fatalf("CheckReplication: got %+v, %v, want a durable primary", st, err)
	}
	if st.SynchronousStandbyNames != "nobody" || st.SyncStandbys != 0 || st.Timeline != 1 {
		t.Errorf("CheckReplication: got %+v, want synchronous_standby_names nobody, no standby streaming, timeline 1", st)
	}

	// An operator (or a failover tool) cancels the waiting commit, or
	// terminates its backend: Postgres warns and, for a termination, closes
	// the connection, which lib/pq reports as a broken connection that
	// database/sql would retry; the retried acquire would find its own
	// unreplicated grant and acknowledge it.
	for _, stop := range []string{"pg_cancel_backend", "pg_terminate_backend"} {
		t.Run("stopped by "+stop, func(t *testing.T) {
			before := store.CommitWaitsCancelled()
			done := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(bg, time.Minute)
				defer cancel()
				_, err := store.Acquire(ctx, &leaseapi.AcquireParams{JobID: stop, Owner: "replica-a", TTL: time.Minute})
				done <- err
			}()
			waitFor(t, "a commit waiting for the standby", func() bool {
				var n int
				err := admin.QueryRow(`SELECT count(` + stop + `(pid)) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`).Scan(&n)
				if err != nil {
					t.Fatalf("stop the waiting commit: %v", err)
				}
				return n > 0
			})
			err := <-done
			if !errors.Is(err, leaseapi.ErrUnavailable) || !strings.Contains(err.Error(), "synchronous standby was cancelled") {
				t.Fatalf("Acquire whose commit wait was stopped: got %v, want ErrUnavailable saying so", err)
			}
			if got := store.CommitWaitsCancelled(); got != before+1 {
				t.Errorf("CommitWaitsCancelled: got %d, want %d", got, before+1)
			}
		})
	}

	t.Run("cancelled by the request deadline", func(t *testing.T) {
		before := store.CommitWaitsCancelled()
		ctx, cancel := context.WithTimeout(bg, 300*time.Millisecond)
		defer cancel()
		_, err := store.Acquire(ctx, &leaseapi.AcquireParams{JobID: "deadline", Owner: "replica-a", TTL: time.Minute})
		if !errors.Is(err, leaseapi.ErrUnavailable) {
			t.Fatalf("Acquire past its deadline: got %v, want ErrUnavailable", err)
		}
		// lib/pq sends the cancel at the deadline; the warning comes back
		// on the call the store stopped waiting for.
		waitFor(t, "the cancelled wait's warning", func() bool { return store.CommitWaitsCancelled() == before+1 })
	})

	t.Run("monitor", func(t *testing.T) {
		reports := make(chan postgres.ReplicationStatus, 1)
		monitor := postgres.NewReplicationMonitor(store, 20*time.Millisecond, func(st postgres.ReplicationStatus) {
			select {
			case reports <- st:
			default:
			}
		}, nil)
		ctx, cancel := context.WithCancel(bg)
		stopped := make(chan struct{})
		go func() { monitor.Run(ctx); close(stopped) }()
		defer func() { cancel(); <-stopped }()
		setStandbys := func(names string) {
			t.Helper()
			if _, err := admin.Exec(`ALTER SYSTEM SET synchronous_standby_names = ` + pq.QuoteLiteral(names)); err != nil {
				t.Fatal(err)
			}
			if _, err := admin.Exec(`SELECT pg_reload_conf()`); err != nil {
				t.Fatal(err)
			}
			for st := range reports {
				if st.SynchronousStandbyNames == names {
					return
				}
			}
		}
		setStandbys("")
		_, err := store.Get(bg, "pg_cancel_backend")
		if !errors.Is(err, leaseapi.ErrUnavailable) || !strings.Contains(err.Error(), "synchronous_standby_names is empty") {
			t.Errorf("Get after the standby was dropped from synchronous_standby_names: got %v, want ErrUnavailable saying so", err)
		}
		setStandbys("nobody")
		// Reads run again (a write would wait for the standby).
		if _, err := store.Get(bg, "pg_cancel_backend"); err != nil {
			t.Errorf("Get after synchronous_standby_names was set again: %v", err)
		}
	})
}
