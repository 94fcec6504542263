package repotest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

// The batch cases of the store suite (RunStoreSuite): a batch decides each
// call exactly as the single call would (leaseapi.Batching). Each round
// builds the same random scenario twice, under two job id prefixes, then
// sends its calls as one batch over one copy and one by one over the
// other, and compares the answers item by item.

// batchSeedEnv names the variable that replays a failed run's seed.
const batchSeedEnv = "REPOTEST_BATCH_SEED"

// Rounds and items of the batch properties: enough for every kind of item
// to meet every other in a batch, and batches larger than one statement of
// the Postgres store's group commit holds (64), few enough to keep the
// suite quick.
const (
	batchRounds   = 15
	batchMaxItems = 80
)

// batchRNG returns the random source of a batch property: seeded from
// batchSeedEnv when set, else from the clock. The seed is logged when the
// test fails, so that a failure can be replayed.
func batchRNG(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(batchSeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want an unsigned integer: %v", batchSeedEnv, s, err)
		}
		seed = v
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("batch property seed %d (replay with %s=%d)", seed, batchSeedEnv, seed)
		}
	})
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// answerKind names the class of an answer: what the API would answer, the
// problem code of a refusal or "ok".
func answerKind(err error) string {
	var inv *leaseapi.InvalidError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &inv):
		return "invalid " + inv.Field
	case errors.Is(err, leaseapi.ErrLeaseHeld):
		return "lease_held"
	case errors.Is(err, leaseapi.ErrTickDone):
		return "tick_done"
	case errors.Is(err, leaseapi.ErrJobPaused):
		return "job_paused"
	case errors.Is(err, leaseapi.ErrGroupFull):
		return "group_full"
	case errors.Is(err, leaseapi.ErrTickAhead):
		return "tick_ahead"
	case errors.Is(err, leaseapi.ErrTooSoon):
		return "too_soon"
	case errors.Is(err, leaseapi.ErrLeaseLost):
		return "lease_lost"
	case errors.Is(err, leaseapi.ErrNotFound):
		return "not_found"
	case errors.Is(err, leaseapi.ErrUnavailable):
		return "unavailable"
	default:
		return "error " + err.Error()
	}
}

// answerSummary is what must be equal between a batch's answer and the
// single call's over the other copy: the answer's class, and the lease it
// returns or the refusal carries (its owner, token, tick, state, TTL,
// schedule and slot), without times and job ids.
func answerSummary(l leaseapi.Lease, err error) string {
	var conflict *leaseapi.ConflictError
	var full *leaseapi.GroupFullError
	switch {
	case errors.As(err, &conflict):
		l = conflict.Lease
	case errors.As(err, &full) && full.Lease != nil:
		l = *full.Lease
	case err != nil:
		return answerKind(err)
	}
	return fmt.Sprintf("%s (owner %s, token %d, tick %s, state %s, ttl %v, schedule %q, slot %d)",
		answerKind(err), l.Owner, l.Token, fmtTime(l.Tick), l.State, l.TTL, l.Schedule, l.Slot)
}

// compareBatch checks each answer of a batch against the single call's
// answer to the same item over the other copy, and the expected class of
// each item (want; "" when any class may come).
func compareBatch(t *testing.T, round int, items []string, want []string, batch, single []leaseapi.Answer) {
	t.Helper()
	if len(batch) != len(items) {
		t.Fatalf("round %d: the batch of %d items got %d answers", round, len(items), len(batch))
	}
	for i := range items {
		bs, ss := answerSummary(batch[i].Lease, batch[i].Err), answerSummary(single[i].Lease, single[i].Err)
		if bs != ss {
			t.Errorf("round %d, item %d (%s): batch answered %s (%v), single call %s (%v)",
				round, i, items[i], bs, batch[i].Err, ss, single[i].Err)
		}
		if got := answerKind(batch[i].Err); want[i] != "" && got != want[i] {
			t.Errorf("round %d, item %d (%s): batch answered %s (%v), want %s", round, i, items[i], got, batch[i].Err, want[i])
		}
	}
}

// batchCopies are the two copies of a round's scenario: the batch runs over
// the first, the single calls over the second.
var batchCopies = [2]string{"batch", "single"}

// acquireItemKinds are the situations a batch's acquire meets: the job
// and what its lease is before the batch, and the item sent.
var acquireItemKinds = []string{
	"unknown", "released", "held-by-other", "retry", "holder-other-tick", "paused", "tick-done",
	"expired", "scheduled", "nearest", "nearest-held", "group-full", "group-free", "unknown-group",
	"invalid", "tick-ahead", "no-tick", "no-tick-retry",
	"too-soon", "too-soon-retry", "too-soon-held", "too-soon-ended", "too-soon-group-full",
}

// testBatchAcquireConformance: AcquireBatch answers each item as Acquire
// answers it, over random mixes of every kind of item.
func testBatchAcquireConformance(t *testing.T, b *bundle) {
	rng := batchRNG(t)
	ctx, owner, other := t.Context(), b.owner("batch"), b.owner("other")
	prev, tick := tickAt(0), tickAt(1)
	held := func(job string, tick *time.Time, ttl time.Duration, who string) leaseapi.Lease {
		return b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: who, TTL: ttl, Tick: tick})
	}
	done := func(job string, tick *time.Time, who string) {
		l := held(job, tick, longTTL, who)
		b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: who, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
	}
	for round := range batchRounds {
		kinds := make([]string, 1+rng.IntN(batchMaxItems))
		for i := range kinds {
			kinds[i] = acquireItemKinds[rng.IntN(len(acquireItemKinds))]
		}
		invalid := rng.IntN(4) // which invalid item the round sends
		var items [2][]*leaseapi.AcquireParams
		var expired []string
		for c, name := range batchCopies {
			// A full group (its one slot held by another job) and one
			// with two free slots, per copy.
			full, free := b.job(fmt.Sprintf("r%d-%s-full", round, name)), b.job(fmt.Sprintf("r%d-%s-free", round, name))
			b.putGroup(t, full, 1)
			b.putGroup(t, free, 2)
			fullHolder := inGroup(b.job(fmt.Sprintf("r%d-%s-holder", round, name)), other, full, longTTL)
			b.acquire(t, fullHolder)
			for i, kind := range kinds {
				job := b.job(fmt.Sprintf("r%d-%s-%d", round, name, i))
				p := &leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL, Tick: tick}
				switch kind {
				case "released":
					done(job, prev, other)
				case "held-by-other":
					held(job, tick, longTTL, other)
				case "retry":
					held(job, tick, longTTL, owner)
				case "holder-other-tick":
					held(job, prev, longTTL, owner)
				case "paused":
					done(job, prev, other)
					if _, err := b.store.Pause(ctx, &leaseapi.PauseParams{JobID: job, By: "ops"}); err != nil {
						t.Fatalf("Pause(%s): %v", job, err)
					}
				case "tick-done":
					done(job, tick, owner)
				case "expired":
					held(job, prev, shortTTL, other)
					expired = append(expired, job)
				case "scheduled":
					// Sent between two ticks of the schedule: snapped to tick.
					p.Schedule, p.Grace = "@every 1m", 30*time.Second
					p.Tick = ptr(tick.Add(20 * time.Second))
				case "nearest", "nearest-held":
					// The daily tick at midnight UTC: the same for both
					// copies unless the round spans midnight.
					p.Tick, p.NearestTick, p.Schedule, p.Grace = nil, true, "@every 24h", time.Minute
					if kind == "nearest-held" {
						q := *p
						q.Owner = other
						b.acquire(t, q)
					}
				case "group-full":
					p.Group = &full
				case "group-free":
					p.Group = &free
				case "unknown-group":
					p.Group = ptr(b.job(fmt.Sprintf("r%d-%s-nogroup", round, name)))
				case "invalid":
					switch invalid {
					case 0:
						p.TTL = 0
					case 1:
						p.Owner = ""
					case 2:
						p.Schedule, p.Grace = "not a schedule", time.Minute
					default:
						p.Tick, p.NearestTick = nil, true // no schedule sent or stored
					}
				case "tick-ahead":
					p.Tick = ptr(time.Now().Add(48 * time.Hour).Truncate(time.Minute))
				case "no-tick":
					p.Tick = nil
				case "too-soon", "too-soon-group-full":
					// Released by another a moment ago: the interval of
					// an hour refuses a grant (before the full group's slots).
					done(job, prev, other)
					p.MinInterval = longTTL
					if kind == "too-soon-group-full" {
						p.Group = &full
					}
				case "too-soon-retry":
					held(job, tick, longTTL, owner)
					p.MinInterval = longTTL
				case "too-soon-held":
					held(job, tick, longTTL, other)
					p.MinInterval = longTTL
				case "too-soon-ended":
					// An interval as long as the expired grant's TTL has
					// ended when it expired.
					held(job, prev, shortTTL, other)
					expired = append(expired, job)
					p.MinInterval = shortTTL
				}
				items[c] = append(items[c], p)
			}
		}
		for _, job := range expired {
			b.waitForState(t, job, leaseapi.StateExpired)
		}

		batch := b.store.AcquireBatch(ctx, items[0])
		single := make([]leaseapi.Answer, len(items[1]))
		for i, p := range items[1] {
			single[i].Lease, single[i].Err = b.store.Acquire(ctx, p)
		}
		compareBatch(t, round, kinds, expectedAcquire(kinds), batch, single)
		if t.Failed() {
			return
		}
	}
}

// expectedAcquire is the class each acquire of kinds must get; "" where
// the class depends on the items before it (a group's free slots).
func expectedAcquire(kinds []string) []string {
	want := make([]string, len(kinds))
	for i, kind := range kinds {
		switch kind {
		case "unknown", "released", "retry", "expired", "scheduled", "nearest", "no-tick", "no-tick-retry", "too-soon-retry", "too-soon-ended":
			want[i] = "ok"
		case "held-by-other", "holder-other-tick", "nearest-held", "too-soon-held":
			want[i] = "lease_held"
		case "too-soon", "too-soon-group-full":
			want[i] = "too_soon"
		case "paused":
			want[i] = "job_paused"
		case "tick-done":
			want[i] = "tick_done"
		case "group-full":
			want[i] = "group_full"
		case "tick-ahead":
			want[i] = "tick_ahead"
		}
	}
	return want
}

// heartbeatItemKinds are the situations a batch's heartbeat meets.
var heartbeatItemKinds = []string{
	"match", "match-new-ttl", "wrong-token", "wrong-owner", "expired", "released", "revoked", "unknown", "invalid",
}

// testBatchHeartbeatConformance: HeartbeatBatch answers each item as
// Heartbeat answers it.
func testBatchHeartbeatConformance(t *testing.T, b *bundle) {
	rng := batchRNG(t)
	ctx, owner, other := t.Context(), b.owner("batch"), b.owner("other")
	for round := range batchRounds {
		kinds := make([]string, 1+rng.IntN(batchMaxItems))
		for i := range kinds {
			kinds[i] = heartbeatItemKinds[rng.IntN(len(heartbeatItemKinds))]
		}
		var items [2][]*leaseapi.HeartbeatParams
		var expired []string
		for c, name := range batchCopies {
			for i, kind := range kinds {
				job := b.job(fmt.Sprintf("r%d-%s-%d", round, name, i))
				p := &leaseapi.HeartbeatParams{JobID: job, Owner: owner, Token: 1}
				if kind != "unknown" {
					ttl := longTTL
					if kind == "expired" {
						ttl = shortTTL
						expired = append(expired, job)
					}
					l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: ttl, Tick: tickAt(0)})
					p.Token = l.Token
				}
				switch kind {
				case "match-new-ttl":
					p.TTL = 2 * longTTL
				case "wrong-token":
					p.Token++
				case "wrong-owner":
					p.Owner = other
				case "released":
					b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: p.Token, Outcome: leaseapi.OutcomeFailed})
				case "revoked":
					b.revoke(t, job)
				case "invalid":
					p.Token = 0
				}
				items[c] = append(items[c], p)
			}
		}
		for _, job := range expired {
			b.waitForState(t, job, leaseapi.StateExpired)
		}

		batch := b.store.HeartbeatBatch(ctx, items[0])
		single := make([]leaseapi.Answer, len(items[1]))
		for i, p := range items[1] {
			single[i].Lease, single[i].Err = b.store.Heartbeat(ctx, p)
		}
		compareBatch(t, round, kinds, expectedHeartbeat(kinds), batch, single)
		if t.Failed() {
			return
		}
	}
}

// expectedHeartbeat is the class each heartbeat of kinds must get; "" for
// an expired grant, which the store's rules decide (a heartbeat of an
// expired grant nobody took over).
func expectedHeartbeat(kinds []string) []string {
	want := make([]string, len(kinds))
	for i, kind := range kinds {
		switch kind {
		case "match", "match-new-ttl":
			want[i] = "ok"
		case "wrong-token", "wrong-owner", "released", "revoked":
			want[i] = "lease_lost"
		case "unknown":
			want[i] = "not_found"
		case "invalid":
			want[i] = "invalid token"
		}
	}
	return want
}
