package decide

import (
	"errors"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

// TestResolveTick: a named tick is snapped to the newest tick at or before
// it of the sent schedule, else of the stored one; nearestTick takes the
// newest tick at or before now + min(1 min, half the shortest gap), with
// the window of clock readings that pick the same tick; what the result
// depends on is what holds checks.
func TestResolveTick(t *testing.T) {
	t.Parallel()
	at := func(s string) *time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return &v
	}
	for _, tc := range []struct {
		name        string
		p           leaseapi.AcquireParams
		stored      string
		now         string
		want        *time.Time
		checkStored bool
		from, until string
	}{
		{name: "NoTickNoSchedule", p: leaseapi.AcquireParams{}, stored: "@hourly", now: "2026-12-01T07:30:00Z"},
		{name: "TickWithoutSchedule", p: leaseapi.AcquireParams{Tick: at("2026-12-01T07:10:00Z")},
			now: "2026-12-01T07:30:00Z", want: at("2026-12-01T07:10:00Z"), checkStored: true},
		{name: "TickSnappedToStored", p: leaseapi.AcquireParams{Tick: at("2026-12-01T07:10:00Z")}, stored: "@hourly",
			now: "2026-12-01T07:30:00Z", want: at("2026-12-01T07:00:00Z"), checkStored: true},
		{name: "TickOfTheSchedule", p: leaseapi.AcquireParams{Tick: at("2026-12-01T07:00:00Z")}, stored: "@hourly",
			now: "2026-12-01T07:30:00Z", want: at("2026-12-01T07:00:00Z"), checkStored: true},
		{name: "TickSnappedToSent", p: leaseapi.AcquireParams{Tick: at("2026-12-01T07:10:00Z"), Schedule: "*/15 * * * *"},
			stored: "@hourly", now: "2026-12-01T07:30:00Z", want: at("2026-12-01T07:00:00Z")},
		{name: "TickInAZone", p: leaseapi.AcquireParams{Tick: at("2026-12-01T08:59:59.999Z"), Schedule: "CRON_TZ=Europe/Berlin 0 8 * * *"},
			now: "2026-12-01T09:00:00Z", want: at("2026-12-01T07:00:00Z")},
		{name: "NearestAMinuteAhead", p: leaseapi.AcquireParams{NearestTick: true, Schedule: "@hourly"},
			now: "2026-12-01T07:59:00Z", want: at("2026-12-01T08:00:00Z"),
			from: "2026-12-01T07:59:00Z", until: "2026-12-01T08:59:00Z"},
		{name: "NearestNotYet", p: leaseapi.AcquireParams{NearestTick: true, Schedule: "@hourly"},
			now: "2026-12-01T07:58:59.999Z", want: at("2026-12-01T07:00:00Z"),
			from: "2026-12-01T06:59:00Z", until: "2026-12-01T07:59:00Z"},
		{name: "NearestHalfTheGap", p: leaseapi.AcquireParams{NearestTick: true, Schedule: "@every 10s"},
			now: "2026-12-01T07:00:05Z", want: at("2026-12-01T07:00:10Z"),
			from: "2026-12-01T07:00:05Z", until: "2026-12-01T07:00:15Z"},
		// Stored before @every had a floor of 1 s: it keeps its ticks.
		{name: "TickSnappedToStoredSubSecond", p: leaseapi.AcquireParams{Tick: at("2026-12-01T07:10:00.7Z")}, stored: "@every 500ms",
			now: "2026-12-01T07:30:00Z", want: at("2026-12-01T07:10:00.5Z"), checkStored: true},
		{name: "TickSnappedToStoredDayOfWeekSeven", p: leaseapi.AcquireParams{Tick: at("2026-12-01T07:10:00Z")}, stored: "0 7 * * 7",
			now: "2026-12-01T07:30:00Z", want: at("2026-11-29T07:00:00Z"), checkStored: true},
		{name: "NearestStored", p: leaseapi.AcquireParams{NearestTick: true}, stored: "*/5 * * * *",
			now: "2026-12-01T07:04:00Z", want: at("2026-12-01T07:05:00Z"), checkStored: true,
			from: "2026-12-01T07:04:00Z", until: "2026-12-01T07:09:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := *at(tc.now)
			r, err := ResolveTick(&tc.p, tc.stored, now)
			if err != nil {
				t.Fatalf("resolveTick: %v", err)
			}
			if (r.Params.Tick == nil) != (tc.want == nil) || tc.want != nil && !r.Params.Tick.Equal(*tc.want) {
				t.Errorf("tick: got %v, want %v", r.Params.Tick, tc.want)
			}
			if r.CheckStored != tc.checkStored || tc.checkStored && r.Stored != tc.stored {
				t.Errorf("stored condition: got %v %q, want %v %q", r.CheckStored, r.Stored, tc.checkStored, tc.stored)
			}
			wantFrom, wantUntil := time.Time{}, time.Time{}
			if tc.from != "" {
				wantFrom, wantUntil = *at(tc.from), *at(tc.until)
			}
			if !r.ClockFrom.Equal(wantFrom) || !r.ClockUntil.Equal(wantUntil) {
				t.Errorf("clock window: got [%s, %s), want [%s, %s)", r.ClockFrom, r.ClockUntil, wantFrom, wantUntil)
			}
		})
	}

	// Without a schedule sent or stored, nearestTick is invalid.
	_, err := ResolveTick(&leaseapi.AcquireParams{NearestTick: true}, "", time.Now())
	var inv *leaseapi.InvalidError
	if !errors.As(err, &inv) || inv.Field != "nearestTick" {
		t.Errorf("nearestTick without a schedule: got %v, want an *leaseapi.InvalidError for nearestTick", err)
	}
	// A sent schedule is held to today's rules, a stored one is not.
	_, err = ResolveTick(&leaseapi.AcquireParams{Tick: at("2026-12-01T07:10:00Z"), Schedule: "@every 500ms"}, "@every 500ms", time.Now())
	if !errors.As(err, &inv) || inv.Field != "schedule" {
		t.Errorf("a sent @every 500ms: got %v, want an *leaseapi.InvalidError for schedule", err)
	}
}
