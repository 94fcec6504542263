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

// firstToken is the first token of timeline 2: (2 - 1) × 2^40.
const firstToken = int64(1) << 40

// migrated creates and migrates database leaseapi on c and returns a
// store over it.
func migrated(t *testing.T, c *pgcluster.Cluster) *postgres.Store {
	t.Helper()
	admin, err := sql.Open("postgres", c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(`CREATE DATABASE leaseapi`); err != nil {
		t.Fatalf("create database: %v", err)
	}
	s := openStore(t, postgres.Config{DSN: c.DSN("leaseapi")})
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return s
}

// A real promotion: a grant that the old primary acknowledged and its
// standby never received (replication stopped first, as with an
// asynchronous standby) is lost, and every token the promoted standby hands
// out afterwards, on timeline 2, is at least 2^40: larger than the lost one.
func TestPromotionTokensPassEveryTokenOfTheOldTimeline(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping private Postgres clusters in -short mode")
	}
	ctx := context.Background()
	primary := pgcluster.Start(t, nil)
	old := migrated(t, primary)
	job, fresh := "promoted", "fresh-after-promotion"
	grant := func(s *postgres.Store, jobID, owner string) leaseapi.Lease {
		t.Helper()
		l, err := s.Acquire(ctx, &leaseapi.AcquireParams{JobID: jobID, Owner: owner, TTL: time.Hour})
		if err != nil {
			t.Fatalf("Acquire(%s, %s): %v", jobID, owner, err)
		}
		return l
	}
	revoke := func(s *postgres.Store, jobID string) leaseapi.Lease {
		t.Helper()
		l, err := s.Revoke(ctx, &leaseapi.RevokeParams{JobID: jobID})
		if err != nil {
			t.Fatalf("Revoke(%s): %v", jobID, err)
		}
		return l
	}
	g1 := grant(old, job, "a")
	if g1.Token != 1 || g1.Timeline != 1 {
		t.Fatalf("first grant on timeline 1: got token %d timeline %d, want 1 1", g1.Token, g1.Timeline)
	}
	revoke(old, job)

	standby := pgcluster.StartStandby(t, primary, "standby", nil)
	sdb, err := sql.Open("postgres", standby.DSN("leaseapi"))
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	pdb, err := sql.Open("postgres", primary.DSN("leaseapi"))
	if err != nil {
		t.Fatal(err)
	}
	defer pdb.Close()
	var target string
	if err := pdb.QueryRow(`SELECT pg_current_wal_lsn()::text`).Scan(&target); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the standby to replay the grants so far", func() bool {
		var ok bool
		err := sdb.QueryRow(`SELECT COALESCE(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)`, target).Scan(&ok)
		return err == nil && ok
	})

	// Replication stops; the old primary goes on acknowledging.
	if _, err := sdb.Exec(`ALTER SYSTEM SET primary_conninfo = ''`); err != nil {
		t.Fatal(err)
	}
	if _, err := sdb.Exec(`SELECT pg_reload_conf()`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the standby's WAL receiver to stop", func() bool {
		var n int
		return sdb.QueryRow(`SELECT count(*) FROM pg_stat_wal_receiver`).Scan(&n) == nil && n == 0
	})
	lost := grant(old, job, "b")
	lostRevoke := revoke(old, job)
	lostGrant := grant(old, job, "c")
	if lostGrant.Token != lostRevoke.Token+1 || lostRevoke.Token != lost.Token+1 {
		t.Fatalf("tokens on timeline 1: got %d %d %d, want consecutive", lost.Token, lostRevoke.Token, lostGrant.Token)
	}
	old.Close()
	if err := primary.Crash(); err != nil {
		t.Fatal(err)
	}

	if err := standby.Promote(); err != nil {
		t.Fatal(err)
	}
	promoted := openStore(t, postgres.Config{DSN: standby.DSN("leaseapi")})
	st, err := promoted.CheckReplication(ctx)
	if err != nil || st.Timeline != 2 {
		t.Fatalf("the promoted standby: got %+v, %v, want timeline 2", st, err)
	}
	before, err := promoted.Get(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if before.Token >= lost.Token {
		t.Fatalf("the promoted standby has token %d, want one below the lost %d (the test lost nothing)", before.Token, lost.Token)
	}

	next := grant(promoted, job, "d")
	if next.Token < firstToken || next.Token <= lostGrant.Token || next.Timeline != 2 {
		t.Errorf("grant on timeline 2: got token %d timeline %d, want ≥ 2^40 (%d), above the lost %d, timeline 2",
			next.Token, next.Timeline, firstToken, lostGrant.Token)
	}
	if r := revoke(promoted, job); r.Token != next.Token+1 || r.Timeline != 2 {
		t.Errorf("revoke on timeline 2: got token %d timeline %d, want %d 2", r.Token, r.Timeline, next.Token+1)
	}
	if f := grant(promoted, fresh, "a"); f.Token != firstToken || f.Timeline != 2 {
		t.Errorf("a new job on timeline 2: got token %d timeline %d, want 2^40 (%d) 2", f.Token, f.Timeline, firstToken)
	}
	var runTimeline int64
	if err := sdb.QueryRow(`SELECT timeline FROM runs WHERE job_id = $1 AND token = $2`, job, next.Token).Scan(&runTimeline); err != nil || runTimeline != 2 {
		t.Errorf("the run of the grant on timeline 2: timeline %d (%v), want 2", runTimeline, err)
	}
}

// A token is exact in JSON up to 2^53 - 1: timeline 8,192 still grants
// (its first token is 8191 × 2^40), timeline 8,193 answers ErrUnavailable
// and writes nothing. The timeline is set with pg_resetwal.
func TestTimelineAbove8192IsUnavailable(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping a private Postgres cluster in -short mode")
	}
	ctx := context.Background()
	c := pgcluster.Start(t, nil)
	s := migrated(t, c)
	s.Close()
	reset := func(walfile string) *postgres.Store {
		t.Helper()
		if err := c.Stop(); err != nil {
			t.Fatal(err)
		}
		if err := c.ResetWAL(walfile); err != nil {
			t.Fatal(err)
		}
		if err := c.StartServer(); err != nil {
			t.Fatal(err)
		}
		return openStore(t, postgres.Config{DSN: c.DSN("leaseapi")})
	}
	s = reset("000020000000000000000010")
	l, err := s.Acquire(ctx, &leaseapi.AcquireParams{JobID: "last", Owner: "a", TTL: time.Hour})
	if err != nil || l.Token != 8191<<40 || l.Timeline != 8192 {
		t.Fatalf("Acquire on timeline 8192: got token %d timeline %d (%v), want %d 8192", l.Token, l.Timeline, err, int64(8191)<<40)
	}
	s.Close()
	s = reset("000020010000000000000020")
	_, err = s.Acquire(ctx, &leaseapi.AcquireParams{JobID: "past", Owner: "a", TTL: time.Hour})
	if !errors.Is(err, leaseapi.ErrUnavailable) || !strings.Contains(err.Error(), "2^53") {
		t.Errorf("Acquire on timeline 8193: got %v, want ErrUnavailable naming 2^53", err)
	}
	if _, err := s.Get(ctx, "past"); !errors.Is(err, leaseapi.ErrNotFound) {
		t.Errorf("Get after the refused grant: got %v, want ErrNotFound", err)
	}
}
