package jobs

import (
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

// TestGroupFullUntil: a group_full refusal is retried until the tick's
// grace ends (the job's, else the lease's), never past the next tick (an
// adapter's, else the retry horizon), and without a tick or grace until
// the retry horizon or, for Run, shutdown.
func TestGroupFullUntil(t *testing.T) {
	t.Parallel()
	tick := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	next := tick.Add(time.Minute)
	withGrace := &leaseapi.GroupFullError{Lease: &leaseapi.Lease{Grace: 20 * time.Second}}
	noLease := &leaseapi.GroupFullError{}
	tests := []struct {
		name              string
		tick, until, next time.Time
		grace             time.Duration
		full              *leaseapi.GroupFullError
		want              time.Time
	}{
		{"JobGrace", tick, next, next, 10 * time.Second, withGrace, tick.Add(10 * time.Second)},
		{"LeaseGrace", tick, next, next, 0, withGrace, tick.Add(20 * time.Second)},
		{"GraceBeyondNextTick", tick, tick.Add(5 * time.Second), tick.Add(5 * time.Second), 10 * time.Second, withGrace, tick.Add(5 * time.Second)},
		{"NoGraceUntilNextTick", tick, next, next, 0, noLease, next},
		{"RunWithoutGrace", tick, time.Time{}, time.Time{}, 0, noLease, time.Time{}},
		{"RunWithGrace", tick, time.Time{}, time.Time{}, 0, withGrace, tick.Add(20 * time.Second)},
		{"NoTick", time.Time{}, time.Time{}, time.Time{}, 10 * time.Second, withGrace, time.Time{}},
		{"AdapterGrace", tick, tick.Add(500 * time.Millisecond), next, 0, withGrace, tick.Add(20 * time.Second)},
		{"AdapterGraceBeyondNextTick", tick, tick.Add(500 * time.Millisecond), tick.Add(15 * time.Second), 0, withGrace, tick.Add(15 * time.Second)},
		{"AdapterWithoutGrace", tick, tick.Add(500 * time.Millisecond), time.Time{}, 0, noLease, tick.Add(500 * time.Millisecond)},
		{"OwedTickLongPast", tick.Add(-time.Hour), next, time.Time{}, 0, withGrace, tick.Add(-time.Hour + 20*time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := groupFullUntil(tt.tick, tt.until, tt.next, tt.grace, tt.full); !got.Equal(tt.want) {
				t.Errorf("groupFullUntil: got %s, want %s", got, tt.want)
			}
		})
	}
}
