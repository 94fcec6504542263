package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// holderCall is a heartbeat or a release of grant l, made the way its name
// says: alone (the single statement), or as one batch statement.
type holderCall struct {
	name string
	make func(ctx context.Context, s *postgres.Store, l leaseapi.Lease) (*leaseapi.Lease, error)
}

var holderCalls = []holderCall{
	{"Heartbeat", func(ctx context.Context, s *postgres.Store, l leaseapi.Lease) (*leaseapi.Lease, error) {
		got, err := s.Heartbeat(ctx, &leaseapi.HeartbeatParams{JobID: l.JobID, Owner: l.Owner, Token: l.Token})
		return &got, err
	}},
	{"Release", func(ctx context.Context, s *postgres.Store, l leaseapi.Lease) (*leaseapi.Lease, error) {
		got, err := s.Release(ctx, &leaseapi.ReleaseParams{JobID: l.JobID, Owner: l.Owner, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
		return &got, err
	}},
	{"HeartbeatBatchStatement", func(ctx context.Context, s *postgres.Store, l leaseapi.Lease) (*leaseapi.Lease, error) {
		got, err := s.HeartbeatAsOneBatch(ctx, []*leaseapi.HeartbeatParams{{JobID: l.JobID, Owner: l.Owner, Token: l.Token}})
		if err != nil {
			return nil, err
		}
		return got[0], nil
	}},
	{"ReleaseBatchStatement", func(ctx context.Context, s *postgres.Store, l leaseapi.Lease) (*leaseapi.Lease, error) {
		got, err := s.ReleaseBatch(ctx, []*leaseapi.ReleaseParams{{JobID: l.JobID, Owner: l.Owner, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded}})
		if err != nil {
			return nil, err
		}
		return got[0], nil
	}},
}

// batchStatement reports whether c is a batch statement alone, which
// writes or not but never reads and decides again.
func (c holderCall) batchStatement() bool {
	return c.name == "HeartbeatBatchStatement" || c.name == "ReleaseBatchStatement"
}

// TestPostgresHolderWriteRefusesChangedRow: a heartbeat's or a release's
// write, single or batched, writes only the row version its decision read.
// A new version that leaves the lease as it was is not written either, and
// the call reads, decides and writes again; after a revocation by another
// instance, decided again, the call is lease_lost and the revocation
// stands.
func TestPostgresHolderWriteRefusesChangedRow(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := repotest.PostgresURL(t)
	db := openDB(t, dsn)
	store, err := postgres.Open(ctx, postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer store.Close()
	other, err := postgres.Open(ctx, postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer other.Close()
	prefix := fmt.Sprintf("holder-changed-%d", time.Now().UnixNano())
	for _, c := range holderCalls {
		for _, change := range []string{"Same", "Revoked"} {
			t.Run(c.name+"/"+change, func(t *testing.T) {
				job := prefix + "-" + c.name + "-" + change
				g, err := store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: "a", TTL: time.Hour})
				if err != nil {
					t.Fatalf("Acquire: %v", err)
				}
				writes := 0
				store.SetBeforeHolderWrite(func() {
					writes++
					if writes > 1 {
						return
					}
					if change == "Same" {
						// A new row version that leaves the lease as it was.
						if _, err := db.ExecContext(ctx, `UPDATE leases SET owner = owner WHERE job_id = $1`, job); err != nil {
							t.Errorf("change %s: %v", job, err)
						}
						return
					}
					if _, err := other.Revoke(ctx, &leaseapi.RevokeParams{JobID: job, By: "ops"}); err != nil {
						t.Errorf("the other instance's revocation: %v", err)
					}
				})
				defer store.SetBeforeHolderWrite(nil)
				got, err := c.make(ctx, store, g)
				cur, gerr := store.Get(ctx, job)
				if gerr != nil {
					t.Fatalf("Get: %v", gerr)
				}
				switch {
				case c.batchStatement():
					if err != nil || got != nil || writes != 1 {
						t.Errorf("got %+v, %v after %d decisions; want no row written, one decision", got, err, writes)
					}
					if change == "Same" && !cur.RenewedAt.Equal(g.RenewedAt) || cur.ReleasedAt != nil {
						t.Errorf("the lease after the batch: %+v; want it as it was", cur)
					}
				case change == "Same":
					if err != nil || got.Token != g.Token || writes != 2 {
						t.Errorf("got %+v, %v after %d decisions; want the call made, decided twice", got, err, writes)
					}
				default:
					if !errors.Is(err, leaseapi.ErrLeaseLost) || writes != 1 {
						t.Errorf("got %v after %d decisions to write; want lease_lost, decided again without a write", err, writes)
					}
					if cur.State != leaseapi.StateRevoked || cur.ReleasedAt != nil {
						t.Errorf("the lease after the race: state %s, released %v; want revoked", cur.State, cur.ReleasedAt)
					}
				}
			})
		}
	}
}

// TestPostgresHeartbeatNeverRevivesAfterItsRead: a heartbeat decided while
// its grant was held is not written once the clock passes the grant's
// expiry as read, single or batched; decided again it is lease_lost, and
// the grant stays expired.
func TestPostgresHeartbeatNeverRevivesAfterItsRead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := repotest.PostgresURL(t)
	db := openDB(t, dsn)
	store, err := postgres.Open(ctx, postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer store.Close()
	prefix := fmt.Sprintf("holder-expires-%d", time.Now().UnixNano())
	for _, c := range holderCalls {
		if c.name != "Heartbeat" && c.name != "HeartbeatBatchStatement" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			// The decision must read the grant held: a slow machine can
			// read it past a short TTL, so each longer TTL is tried in
			// turn until one is (the hook runs only after a decision to
			// write).
			for _, ttl := range []time.Duration{200 * time.Millisecond, time.Second, 5 * time.Second} {
				job := fmt.Sprintf("%s-%s-%s", prefix, c.name, ttl)
				g, err := store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: "a", TTL: ttl})
				if err != nil {
					t.Fatalf("Acquire: %v", err)
				}
				decided := false
				store.SetBeforeHolderWrite(func() {
					decided = true
					for range 2000 { // bounded: until the database clock passes the expiry
						var expired bool
						if err := db.GetContext(ctx, &expired, `SELECT clock_timestamp() >= expires_at FROM leases WHERE job_id = $1`, job); err != nil || expired {
							return
						}
						time.Sleep(5 * time.Millisecond)
					}
					t.Errorf("%s never expired", job)
				})
				got, err := c.make(ctx, store, g)
				store.SetBeforeHolderWrite(nil)
				if !decided {
					continue
				}
				if c.batchStatement() && (err != nil || got != nil) || !c.batchStatement() && !errors.Is(err, leaseapi.ErrLeaseLost) {
					t.Errorf("heartbeat decided before its grant expired, written after: got %+v, %v; want nothing written", got, err)
				}
				cur, err := store.Get(ctx, job)
				if err != nil || cur.State != leaseapi.StateExpired || !cur.RenewedAt.Equal(g.RenewedAt) {
					t.Errorf("the grant after the heartbeat: %+v, %v; want it expired, never renewed", cur, err)
				}
				return
			}
			t.Fatal("no heartbeat read its grant held: every TTL had passed before the read")
		})
	}
}
