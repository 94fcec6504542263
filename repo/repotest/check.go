package repotest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

// Bounded polling: waits for the store's clock (expiry) poll at this
// interval, at most this many times. The bound is a hang guard, far above
// the TTLs the suite uses; nothing asserts how long a wait took.
const (
	pollInterval = 5 * time.Millisecond
	pollAttempts = 2000
)

// bundle is what every subtest works with: one store, and names no other
// subtest uses.
type bundle struct {
	store  leaseapi.Store
	prefix string
	// closeStore closes store; it runs at most once (also from t.Cleanup).
	closeStore func()
	open       func(t *testing.T) leaseapi.Store
	// openWith opens a store over the same data with other settings
	// (reopenWith).
	openWith OpenFunc
}

// StoreOptions are the settings a subtest's store is opened with; the zero
// value is the stores' defaults.
type StoreOptions struct {
	// MaxTickAhead is the store's MaxTickAhead (0: the default,
	// leaseapi.DefaultMaxTickAhead): subtests whose ticks lie further
	// ahead of the clock widen it.
	MaxTickAhead time.Duration
}

// OpenFunc opens a store for t with the settings o.
type OpenFunc func(t *testing.T, o StoreOptions) leaseapi.Store

// setup opens a store for t with o (none: the defaults) and picks a
// prefix for its job ids and owners.
func setup(t *testing.T, open OpenFunc, o ...StoreOptions) *bundle {
	t.Helper()
	var opts StoreOptions
	if len(o) > 0 {
		opts = o[0]
	}
	openWith := func(t *testing.T) leaseapi.Store { return open(t, opts) }
	b := &bundle{prefix: uniquePrefix(t), open: openWith, openWith: open}
	b.store, b.closeStore = openStore(t, openWith)
	return b
}

// reopen closes the bundle's store and opens a new one over the same data.
func (b *bundle) reopen(t *testing.T) {
	t.Helper()
	b.closeStore()
	b.store, b.closeStore = openStore(t, b.open)
}

// reopenWith closes the bundle's store and opens a new one over the same
// data with the settings o; later reopens keep them.
func (b *bundle) reopenWith(t *testing.T, o StoreOptions) {
	t.Helper()
	b.closeStore()
	b.open = func(t *testing.T) leaseapi.Store { return b.openWith(t, o) }
	b.store, b.closeStore = openStore(t, b.open)
}

// job returns a job id unique to this subtest.
func (b *bundle) job(name string) string { return b.prefix + "-" + name }

// owner returns an owner unique to this subtest, so owner filters see only
// this subtest's leases.
func (b *bundle) owner(name string) string { return "owner-" + name + "-" + b.prefix }

func openStore(t *testing.T, open func(t *testing.T) leaseapi.Store) (leaseapi.Store, func()) {
	t.Helper()
	s := open(t)
	if s == nil {
		t.Fatal("open returned a nil store")
	}
	closed := false
	closeStore := func() {
		if closed {
			return
		}
		closed = true
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	t.Cleanup(closeStore)
	return s, closeStore
}

// uniquePrefix is the subtest's name plus random hex: readable in a failing
// test's rows, and unique across subtests and runs sharing one database.
func uniquePrefix(t *testing.T) string {
	t.Helper()
	name := t.Name()
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	var b strings.Builder
	for _, r := range name {
		if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
		if b.Len() == 24 {
			break
		}
	}
	if b.Len() == 0 {
		b.WriteString("t")
	}
	var random [5]byte
	if _, err := rand.Read(random[:]); err != nil {
		t.Fatalf("random prefix: %v", err)
	}
	return b.String() + "-" + hex.EncodeToString(random[:])
}

// baseTick is a scheduled fire time, millisecond precision as the handlers
// pass ticks on.
var baseTick = time.Date(2026, time.November, 30, 7, 0, 0, 0, time.UTC)

// tickAt returns baseTick plus n minutes.
func tickAt(n int) *time.Time {
	v := baseTick.Add(time.Duration(n) * time.Minute)
	return &v
}

func (b *bundle) acquire(t *testing.T, p leaseapi.AcquireParams) leaseapi.Lease {
	t.Helper()
	l, err := b.store.Acquire(t.Context(), &p)
	if err != nil {
		t.Fatalf("Acquire(job %s, owner %s, ttl %v, tick %s): got error %v, want nil", p.JobID, p.Owner, p.TTL, fmtTime(p.Tick), err)
	}
	return l
}

func (b *bundle) heartbeat(t *testing.T, p leaseapi.HeartbeatParams) leaseapi.Lease {
	t.Helper()
	l, err := b.store.Heartbeat(t.Context(), &p)
	if err != nil {
		t.Fatalf("Heartbeat(job %s, owner %s, token %d, ttl %v): got error %v, want nil", p.JobID, p.Owner, p.Token, p.TTL, err)
	}
	return l
}

func (b *bundle) release(t *testing.T, p leaseapi.ReleaseParams) leaseapi.Lease {
	t.Helper()
	l, err := b.store.Release(t.Context(), &p)
	if err != nil {
		t.Fatalf("Release(job %s, owner %s, token %d, outcome %s): got error %v, want nil", p.JobID, p.Owner, p.Token, p.Outcome, err)
	}
	return l
}

func (b *bundle) revoke(t *testing.T, jobID string) leaseapi.Lease {
	t.Helper()
	l, err := b.store.Revoke(t.Context(), &leaseapi.RevokeParams{JobID: jobID, By: "ops-" + b.prefix})
	if err != nil {
		t.Fatalf("Revoke(%s): got error %v, want nil", jobID, err)
	}
	return l
}

func (b *bundle) get(t *testing.T, jobID string) leaseapi.Lease {
	t.Helper()
	l, err := b.store.Get(t.Context(), jobID)
	if err != nil {
		t.Fatalf("Get(%s): got error %v, want nil", jobID, err)
	}
	return l
}

func (b *bundle) runs(t *testing.T, jobID string, limit int) []leaseapi.Run {
	t.Helper()
	runs, err := b.store.Runs(t.Context(), jobID, limit)
	if err != nil {
		t.Fatalf("Runs(%s, %d): got error %v, want nil", jobID, limit, err)
	}
	return runs
}

func (b *bundle) list(t *testing.T, p leaseapi.ListParams) leaseapi.LeasePage {
	t.Helper()
	page, err := b.store.List(t.Context(), &p)
	if err != nil {
		t.Fatalf("List(%+v): got error %v, want nil", p, err)
	}
	return page
}

// waitForState polls Get until the lease is in state want; the store's
// clock decides, so the test never compares clocks itself.
func (b *bundle) waitForState(t *testing.T, jobID string, want leaseapi.State) leaseapi.Lease {
	t.Helper()
	var l leaseapi.Lease
	for range pollAttempts {
		l = b.get(t, jobID)
		if l.State == want {
			return l
		}
		time.Sleep(pollInterval)
	}
	t.Fatalf("Get(%s) after %d polls: got state %s, want %s", jobID, pollAttempts, l.State, want)
	return l
}

// wantConflict checks that err is a *leaseapi.ConflictError wrapping want
// and returns the lease it carries.
func wantConflict(t *testing.T, op string, err, want error) leaseapi.Lease {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", op, err, want)
	}
	var ce *leaseapi.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("%s: got error %T (%v), want a *leaseapi.ConflictError wrapping %v", op, err, err, want)
	}
	return ce.Lease
}

// wantError checks that err wraps want (ErrNotFound and the like).
func wantError(t *testing.T, op string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: got error %v, want %v", op, err, want)
	}
}

// checkLease compares every field of got with want.
func checkLease(t *testing.T, op string, got, want leaseapi.Lease) {
	t.Helper()
	if diff := diffLease(got, want); diff != "" {
		t.Errorf("%s: lease differs (got, want):\n%s", op, diff)
	}
}

func diffLease(got, want leaseapi.Lease) string {
	var d []string
	add := func(field string, g, w any) { d = append(d, fmt.Sprintf("\t%s: got %v, want %v", field, g, w)) }
	if got.JobID != want.JobID {
		add("JobID", got.JobID, want.JobID)
	}
	if got.Owner != want.Owner {
		add("Owner", got.Owner, want.Owner)
	}
	if got.Token != want.Token {
		add("Token", got.Token, want.Token)
	}
	if got.State != want.State {
		add("State", got.State, want.State)
	}
	if !got.AcquiredAt.Equal(want.AcquiredAt) {
		add("AcquiredAt", fmtTime(&got.AcquiredAt), fmtTime(&want.AcquiredAt))
	}
	if !got.RenewedAt.Equal(want.RenewedAt) {
		add("RenewedAt", fmtTime(&got.RenewedAt), fmtTime(&want.RenewedAt))
	}
	if !got.ExpiresAt.Equal(want.ExpiresAt) {
		add("ExpiresAt", fmtTime(&got.ExpiresAt), fmtTime(&want.ExpiresAt))
	}
	if !equalTimePtr(got.ReleasedAt, want.ReleasedAt) {
		add("ReleasedAt", fmtTime(got.ReleasedAt), fmtTime(want.ReleasedAt))
	}
	if got.TTL != want.TTL {
		add("TTL", got.TTL, want.TTL)
	}
	if !equalTimePtr(got.Tick, want.Tick) {
		add("Tick", fmtTime(got.Tick), fmtTime(want.Tick))
	}
	if !equalTimePtr(got.LastCompletedTick, want.LastCompletedTick) {
		add("LastCompletedTick", fmtTime(got.LastCompletedTick), fmtTime(want.LastCompletedTick))
	}
	if got.LastOutcome != want.LastOutcome {
		add("LastOutcome", fmt.Sprintf("%q", got.LastOutcome), fmt.Sprintf("%q", want.LastOutcome))
	}
	if got.Schedule != want.Schedule || got.Grace != want.Grace {
		add("Schedule, Grace", fmt.Sprintf("%q %s", got.Schedule, got.Grace), fmt.Sprintf("%q %s", want.Schedule, want.Grace))
	}
	if !equalTimePtr(got.NextTick, want.NextTick) {
		add("NextTick", fmtTime(got.NextTick), fmtTime(want.NextTick))
	}
	if !equalTimePtr(got.PausedAt, want.PausedAt) || got.PausedBy != want.PausedBy || got.PausedReason != want.PausedReason {
		add("PausedAt, PausedBy, PausedReason", fmt.Sprintf("%s %q %q", fmtTime(got.PausedAt), got.PausedBy, got.PausedReason),
			fmt.Sprintf("%s %q %q", fmtTime(want.PausedAt), want.PausedBy, want.PausedReason))
	}
	if got.RevokedBy != want.RevokedBy {
		add("RevokedBy", fmt.Sprintf("%q", got.RevokedBy), fmt.Sprintf("%q", want.RevokedBy))
	}
	if got.MissedTicks != want.MissedTicks || got.SkippedTicks != want.SkippedTicks {
		add("MissedTicks, SkippedTicks", fmt.Sprintf("%d %d", got.MissedTicks, got.SkippedTicks),
			fmt.Sprintf("%d %d", want.MissedTicks, want.SkippedTicks))
	}
	if got.CatchUp != want.CatchUp || got.CatchUpWindow != want.CatchUpWindow {
		add("CatchUp, CatchUpWindow", fmt.Sprintf("%q %s", got.CatchUp, got.CatchUpWindow), fmt.Sprintf("%q %s", want.CatchUp, want.CatchUpWindow))
	}
	if !equalTimePtr(got.OwedTick, want.OwedTick) || got.OwedReason != want.OwedReason {
		add("OwedTick, OwedReason", fmt.Sprintf("%s %q", fmtTime(got.OwedTick), got.OwedReason),
			fmt.Sprintf("%s %q", fmtTime(want.OwedTick), want.OwedReason))
	}
	return strings.Join(d, "\n")
}

// checkRun compares a run with the expected token, owner, tick and outcome.
func checkRun(t *testing.T, op string, got leaseapi.Run, token int64, owner string, tick *time.Time, outcome leaseapi.Outcome) {
	t.Helper()
	if got.Token != token || got.Owner != owner || !equalTimePtr(got.Tick, tick) || got.Outcome != outcome {
		t.Errorf("%s: got run token %d owner %s tick %s outcome %q, want token %d owner %s tick %s outcome %q",
			op, got.Token, got.Owner, fmtTime(got.Tick), got.Outcome, token, owner, fmtTime(tick), outcome)
	}
	d, ok := got.Duration()
	switch {
	case outcome == leaseapi.OutcomeRunning && (got.EndedAt != nil || ok):
		t.Errorf("%s: running run has EndedAt %s, want nil", op, fmtTime(got.EndedAt))
	case outcome != leaseapi.OutcomeRunning && !ok:
		t.Errorf("%s: finished run (%s) has no EndedAt", op, outcome)
	case ok && d < 0:
		t.Errorf("%s: run ended %s before it started %s", op, fmtTime(got.EndedAt), fmtTime(got.StartedAt))
	}
}

// checkRunsOrdered checks run history invariants: newest first, tokens
// strictly decreasing, and no grant started before the previous one ended
// (mutual exclusion on the store's clock).
func checkRunsOrdered(t *testing.T, op string, runs []leaseapi.Run) {
	t.Helper()
	for i := 1; i < len(runs); i++ {
		newer, older := runs[i-1], runs[i]
		if newer.Token <= older.Token {
			t.Errorf("%s: run %d has token %d after token %d, want strictly decreasing tokens (newest first)", op, i, older.Token, newer.Token)
		}
		if older.EndedAt == nil {
			t.Errorf("%s: run token %d is still running while a newer grant (token %d) exists", op, older.Token, newer.Token)
		} else if newer.StartedAt == nil || newer.StartedAt.Before(*older.EndedAt) {
			t.Errorf("%s: run token %d started %s before run token %d ended %s", op, newer.Token, fmtTime(newer.StartedAt), older.Token, fmtTime(older.EndedAt))
		}
	}
}

func equalTimePtr(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

func fmtTime(v *time.Time) string {
	if v == nil {
		return "<nil>"
	}
	return v.UTC().Format(time.RFC3339Nano)
}

func ptr[T any](v T) *T { return &v }
