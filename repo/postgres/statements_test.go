package postgres_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// TestBatchedAcquireDecidesAsTheSingleOne holds the batched acquire
// statement to the single one: both are built from the same parts
// (statements.go), and here both decide the same cases on twin jobs, each
// set up by the same calls, the single statement on one twin and the
// batched one (in a batch of two, beside a fresh job) on the other. The
// grant, its token and its tick, or the refusal, must agree, for named
// ticks and for nearestTick acquires (whose resolution the batched
// statement reads from its input rows).
func TestBatchedAcquireDecidesAsTheSingleOne(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := repotest.PostgresURL(t)
	single, err := postgres.OpenVariant(ctx, postgres.Config{DSN: dsn}, false, true)
	if err != nil {
		t.Fatalf("OpenVariant: %v", err)
	}
	defer single.Close()
	batched, err := postgres.Open(ctx, postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer batched.Close()

	tick := time.Now().UTC().Truncate(time.Minute)
	later := tick.Add(time.Minute)
	acquire := func(job, owner string, at *time.Time) *leaseapi.AcquireParams {
		return &leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: time.Hour, Tick: at}
	}
	// nearest asks for the nearest tick of a yearly schedule, sent with it:
	// the tick depends on no stored schedule, and the clock readings at
	// which it is the nearest span the year.
	nearest := func(job, owner string) *leaseapi.AcquireParams {
		return &leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: time.Hour, NearestTick: true,
			Schedule: "0 0 1 1 *", Grace: time.Minute}
	}
	mustAcquire := func(t *testing.T, p *leaseapi.AcquireParams) leaseapi.Lease {
		t.Helper()
		l, err := single.Acquire(ctx, p)
		if err != nil {
			t.Fatalf("setup acquire %+v: %v", p, err)
		}
		return l
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, job string)
		owner string
		tick  *time.Time
		// params, when set, is the acquire instead of owner and tick's.
		params func(job string) *leaseapi.AcquireParams
	}{
		{name: "FreshJob", setup: func(*testing.T, string) {}, owner: "a", tick: &tick},
		{name: "HeldBySomeoneElse", setup: func(t *testing.T, job string) { mustAcquire(t, acquire(job, "b", &tick)) }, owner: "a", tick: &tick},
		{name: "HolderRenewsItsTick", setup: func(t *testing.T, job string) { mustAcquire(t, acquire(job, "a", &tick)) }, owner: "a", tick: &tick},
		{name: "HolderRenewsWithoutTick", setup: func(t *testing.T, job string) { mustAcquire(t, acquire(job, "a", &tick)) }, owner: "a"},
		{name: "HolderAsksAnotherTick", setup: func(t *testing.T, job string) { mustAcquire(t, acquire(job, "a", &tick)) }, owner: "a", tick: &later},
		{name: "ReleasedTakenByAnother", setup: func(t *testing.T, job string) {
			l := mustAcquire(t, acquire(job, "b", nil))
			if _, err := single.Release(ctx, &leaseapi.ReleaseParams{JobID: job, Owner: "b", Token: l.Token, Outcome: leaseapi.OutcomeFailed}); err != nil {
				t.Fatalf("setup release: %v", err)
			}
		}, owner: "a", tick: &tick},
		{name: "TickDone", setup: func(t *testing.T, job string) {
			l := mustAcquire(t, acquire(job, "b", &tick))
			if _, err := single.Release(ctx, &leaseapi.ReleaseParams{JobID: job, Owner: "b", Token: l.Token, Outcome: leaseapi.OutcomeSucceeded}); err != nil {
				t.Fatalf("setup release: %v", err)
			}
		}, owner: "a", tick: &tick},
		{name: "PausedAndFree", setup: func(t *testing.T, job string) {
			mustAcquire(t, acquire(job, "b", nil))
			if _, err := single.Revoke(ctx, &leaseapi.RevokeParams{JobID: job}); err != nil {
				t.Fatalf("setup revoke: %v", err)
			}
			if _, err := single.Pause(ctx, &leaseapi.PauseParams{JobID: job}); err != nil {
				t.Fatalf("setup pause: %v", err)
			}
		}, owner: "a", tick: &tick},
		{name: "PausedHolderRenews", setup: func(t *testing.T, job string) {
			mustAcquire(t, acquire(job, "a", &tick))
			if _, err := single.Pause(ctx, &leaseapi.PauseParams{JobID: job}); err != nil {
				t.Fatalf("setup pause: %v", err)
			}
		}, owner: "a", tick: &tick},
		{name: "HolderAsksTheNearestTick", setup: func(t *testing.T, job string) { mustAcquire(t, nearest(job, "a")) },
			params: func(job string) *leaseapi.AcquireParams { return nearest(job, "a") }},
		{name: "HolderAsksTheNearestTickNamingAnother", setup: func(t *testing.T, job string) { mustAcquire(t, acquire(job, "a", &tick)) },
			params: func(job string) *leaseapi.AcquireParams { return nearest(job, "a") }},
		{name: "AnotherAsksTheNearestTick", setup: func(t *testing.T, job string) { mustAcquire(t, nearest(job, "b")) },
			params: func(job string) *leaseapi.AcquireParams { return nearest(job, "a") }},
		{name: "NearestTickOfAFreeJob", setup: func(t *testing.T, job string) {
			l := mustAcquire(t, acquire(job, "b", nil))
			if _, err := single.Release(ctx, &leaseapi.ReleaseParams{JobID: job, Owner: "b", Token: l.Token, Outcome: leaseapi.OutcomeFailed}); err != nil {
				t.Fatalf("setup release: %v", err)
			}
		}, params: func(job string) *leaseapi.AcquireParams { return nearest(job, "a") }},
	}
	prefix := fmt.Sprintf("twin-%d", time.Now().UnixNano())
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			jobSingle, jobBatched := prefix+"-"+tc.name+"-single", prefix+"-"+tc.name+"-batched"
			tc.setup(t, jobSingle)
			tc.setup(t, jobBatched)

			params := func(job string) *leaseapi.AcquireParams { return acquire(job, tc.owner, tc.tick) }
			if tc.params != nil {
				params = tc.params
			}
			want, err := single.Acquire(ctx, params(jobSingle))
			var conflict *leaseapi.ConflictError
			if err != nil && !errors.As(err, &conflict) {
				t.Fatalf("single acquire: %v", err)
			}
			granted := err == nil

			got, err := batched.AcquireAsOneBatch(ctx, []*leaseapi.AcquireParams{
				params(jobBatched),
				acquire(prefix+"-"+tc.name+"-fresh", "c", nil),
			})
			if err != nil {
				t.Fatalf("batched acquire: %v", err)
			}
			if got[1] == nil || got[1].Token != 1 {
				t.Fatalf("batched acquire of the fresh job: %+v, want token 1", got[1])
			}
			switch {
			case granted != (got[0] != nil):
				t.Fatalf("single statement granted %t (%v), batched granted %t", granted, err, got[0] != nil)
			case granted && (got[0].Token != want.Token || got[0].Owner != want.Owner ||
				!sameTime(got[0].Tick, want.Tick) || got[0].AcquiredAt.Equal(got[0].RenewedAt) != want.AcquiredAt.Equal(want.RenewedAt)):
				t.Errorf("batched grant token %d owner %q tick %v (renewal %t), single token %d owner %q tick %v (renewal %t)",
					got[0].Token, got[0].Owner, got[0].Tick, !got[0].AcquiredAt.Equal(got[0].RenewedAt),
					want.Token, want.Owner, want.Tick, !want.AcquiredAt.Equal(want.RenewedAt))
			}
		})
	}
}

func sameTime(a, b *time.Time) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Equal(*b))
}
