package repotest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

// testInvalidInput: every store refuses input outside the domain the same
// way, with an *leaseapi.InvalidError naming the field, before it changes
// anything. The HTTP layer validates first; this holds the stores to the
// same rules for every other caller.
func testInvalidInput(t *testing.T, b *bundle) {
	ctx, job, owner := t.Context(), b.job("invalid"), b.owner("a")
	held := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL})
	fresh := b.job("invalid-fresh")
	year10000 := time.Date(10000, time.January, 1, 0, 0, 0, 0, time.UTC)
	beforeYear0 := time.Date(-1, time.December, 31, 23, 0, 0, 0, time.UTC)

	acquire := func(p leaseapi.AcquireParams) func() error {
		return func() error { _, err := b.store.Acquire(ctx, &p); return err }
	}
	heartbeat := func(p leaseapi.HeartbeatParams) func() error {
		return func() error { _, err := b.store.Heartbeat(ctx, &p); return err }
	}
	release := func(p leaseapi.ReleaseParams) func() error {
		return func() error { _, err := b.store.Release(ctx, &p); return err }
	}
	list := func(p leaseapi.ListParams) func() error {
		return func() error { _, err := b.store.List(ctx, &p); return err }
	}
	for _, tc := range []struct {
		name  string
		field string
		call  func() error
	}{
		{"AcquireBadJobID", "jobId", acquire(leaseapi.AcquireParams{JobID: "-" + fresh, Owner: owner, TTL: time.Minute})},
		{"AcquireEmptyJobID", "jobId", acquire(leaseapi.AcquireParams{Owner: owner, TTL: time.Minute})},
		{"AcquireOwnerWithSpace", "owner", acquire(leaseapi.AcquireParams{JobID: fresh, Owner: "a b", TTL: time.Minute})},
		{"AcquireEmptyOwner", "owner", acquire(leaseapi.AcquireParams{JobID: fresh, TTL: time.Minute})},
		{"AcquireNearestTickWithTick", "nearestTick", acquire(leaseapi.AcquireParams{JobID: fresh, Owner: owner, TTL: time.Minute,
			NearestTick: true, Tick: &held.AcquiredAt, Schedule: "@hourly", Grace: time.Minute})},
		{"AcquireZeroTTL", "ttlMs", acquire(leaseapi.AcquireParams{JobID: fresh, Owner: owner})},
		{"AcquireSubMillisecondTTL", "ttlMs", acquire(leaseapi.AcquireParams{JobID: fresh, Owner: owner, TTL: time.Microsecond})},
		{"AcquireNegativeTTL", "ttlMs", acquire(leaseapi.AcquireParams{JobID: fresh, Owner: owner, TTL: -time.Second})},
		{"AcquireTickAfterYear9999", "tick", acquire(leaseapi.AcquireParams{JobID: fresh, Owner: owner, TTL: time.Minute, Tick: &year10000})},
		{"AcquireTickBeforeYear0", "tick", acquire(leaseapi.AcquireParams{JobID: fresh, Owner: owner, TTL: time.Minute, Tick: &beforeYear0})},
		{"AcquireBadSchedule", "schedule", acquire(leaseapi.AcquireParams{JobID: fresh, Owner: owner, TTL: time.Minute, Schedule: "every day", Grace: time.Minute})},
		{"AcquireScheduleNeverFires", "schedule", acquire(leaseapi.AcquireParams{JobID: fresh, Owner: owner, TTL: time.Minute, Schedule: "0 0 30 2 *", Grace: time.Minute})},
		{"AcquireScheduleZoneAlone", "schedule", acquire(leaseapi.AcquireParams{JobID: fresh, Owner: owner, TTL: time.Minute, Schedule: "CRON_TZ=Europe/Berlin", Grace: time.Minute})},
		{"AcquireScheduleUnderASecond", "schedule", acquire(leaseapi.AcquireParams{JobID: fresh, Owner: owner, TTL: time.Minute, Schedule: "@every 500ms", Grace: time.Millisecond})},
		{"AcquireScheduleTooLong", "schedule", acquire(leaseapi.AcquireParams{JobID: fresh, Owner: owner, TTL: time.Minute, Schedule: "@every 1s" + strings.Repeat(" ", 250), Grace: time.Minute})},
		{"AcquireGraceWithoutSchedule", "graceMs", acquire(leaseapi.AcquireParams{JobID: fresh, Owner: owner, TTL: time.Minute, Grace: time.Minute})},
		{"AcquireScheduleWithoutGrace", "graceMs", acquire(leaseapi.AcquireParams{JobID: fresh, Owner: owner, TTL: time.Minute, Schedule: "@every 1s"})},
		{"AcquireGraceOverADay", "graceMs", acquire(leaseapi.AcquireParams{JobID: fresh, Owner: owner, TTL: time.Minute, Schedule: "@every 1s", Grace: 25 * time.Hour})},
		{"PauseReasonTooLong", "reason", func() error {
			_, err := b.store.Pause(ctx, &leaseapi.PauseParams{JobID: job, Reason: strings.Repeat("é", 257)})
			return err
		}},
		{"PauseReasonControl", "reason", func() error {
			_, err := b.store.Pause(ctx, &leaseapi.PauseParams{JobID: job, Reason: "a\nb"})
			return err
		}},
		{"PauseBadJobID", "jobId", func() error { _, err := b.store.Pause(ctx, &leaseapi.PauseParams{JobID: "a b"}); return err }},
		{"ResumeBadJobID", "jobId", func() error { _, err := b.store.Resume(ctx, ""); return err }},
		{"ForgetBadJobID", "jobId", func() error { _, err := b.store.ForgetSchedule(ctx, "-x"); return err }},
		{"StatsBadPrefix", "prefix", func() error { _, err := b.store.Stats(ctx, "a b"); return err }},
		{"SweepZeroBatch", "batch", func() error { _, err := b.store.SweepTicks(ctx, 0); return err }},
		{"HeartbeatNegativeTTL", "ttlMs", heartbeat(leaseapi.HeartbeatParams{JobID: job, Owner: owner, Token: held.Token, TTL: -time.Second})},
		{"HeartbeatSubMillisecondTTL", "ttlMs", heartbeat(leaseapi.HeartbeatParams{JobID: job, Owner: owner, Token: held.Token, TTL: time.Microsecond})},
		{"HeartbeatZeroToken", "token", heartbeat(leaseapi.HeartbeatParams{JobID: job, Owner: owner})},
		{"HeartbeatBadOwner", "owner", heartbeat(leaseapi.HeartbeatParams{JobID: job, Owner: "é", Token: held.Token})},
		{"ReleaseEmptyOutcome", "outcome", release(leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: held.Token})},
		{"ReleaseOutcomeRevoked", "outcome", release(leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: held.Token, Outcome: leaseapi.OutcomeRevoked})},
		{"ReleaseNegativeToken", "token", release(leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: -1, Outcome: leaseapi.OutcomeSucceeded})},
		{"RevokeBadJobID", "jobId", func() error { _, err := b.store.Revoke(ctx, &leaseapi.RevokeParams{JobID: job + "/x"}); return err }},
		{"GetBadJobID", "jobId", func() error { _, err := b.store.Get(ctx, "' OR 1=1--"); return err }},
		{"RunsZeroLimit", "limit", func() error { _, err := b.store.Runs(ctx, job, 0); return err }},
		{"RunsBadJobID", "jobId", func() error { _, err := b.store.Runs(ctx, "", 10); return err }},
		{"ListZeroLimit", "limit", list(leaseapi.ListParams{})},
		{"ListBadState", "state", list(leaseapi.ListParams{State: "gone", Limit: 1})},
		{"ListBadOwner", "owner", list(leaseapi.ListParams{Owner: "a b", Limit: 1})},
		{"ListBadPrefix", "prefix", list(leaseapi.ListParams{Prefix: "%", Limit: 1})},
		{"ListBadCursor", "cursor", list(leaseapi.ListParams{After: "a/b", Limit: 1})},
		{"PruneZeroBatch", "batch", func() error { _, err := b.store.PruneRuns(ctx, time.Hour, 0); return err }},
		{"PruneNegativeRetention", "retention", func() error { _, err := b.store.PruneRuns(ctx, -time.Hour, 10); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			invalid, ok := errors.AsType[*leaseapi.InvalidError](err)
			if !ok || !errors.Is(err, leaseapi.ErrInvalid) {
				t.Fatalf("got %v, want an *InvalidError", err)
			}
			if invalid.Field != tc.field {
				t.Errorf("InvalidError.Field: got %q, want %q (%v)", invalid.Field, tc.field, err)
			}
		})
	}

	// None of them changed the lease, its history or created another.
	checkLease(t, "Get after the refused calls", b.get(t, job), held)
	if runs := b.runs(t, job, 10); len(runs) != 1 {
		t.Errorf("Runs after the refused calls: got %d runs, want 1", len(runs))
	}
	_, err := b.store.Get(ctx, fresh)
	wantError(t, "Get of a job only invalid calls named", err, leaseapi.ErrNotFound)
}
