package schedule_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/schedule"
)

// The zones the daylight-saving rule is tested in. America/Nuuk and
// America/Mexico_City are zones whose rules changed, so an outdated zone
// database gives other ticks: Nuuk moved its standard time from -03 to -02
// in 2023 and keeps its changes at 01:00 UTC, which is late on Saturday
// evening there (23:00 -> 00:00 and 00:00 -> 23:00), so a skipped time
// ticks on the next local day; Mexico City abolished daylight saving in
// 2022, so a daily spec there ticks at the same UTC time all year.
var dstZones = []string{
	"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago",
	"America/Nuuk", "America/Mexico_City",
}

// TestDaylightSaving: the ticks around changes, spelled out.
func TestDaylightSaving(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, spec, from string
		want             []string
	}{
		// Forward: 02:30 does not exist; it ticks at 03:00 CEST.
		{"BerlinSpringAnchored", "CRON_TZ=Europe/Berlin 30 2 * * *", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		// Backward: 02:30 CEST and 02:30 CET; only the first ticks.
		{"BerlinAutumnAnchored", "CRON_TZ=Europe/Berlin 30 2 * * *", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"NewYorkAutumnAnchored", "CRON_TZ=America/New_York 30 1 * * *", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"NewYorkSpringAnchored", "CRON_TZ=America/New_York 30 2 * * *", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
		// Seconds do not count: minute 30 and hour 2 anchor the spec.
		{"SecondsFieldAnchored", "CRON_TZ=Europe/Berlin 15 30 2 * * *", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:15Z"}},
		// 02:00 and 02:30 fall into the gap and coincide with 03:00: one tick.
		{"CoincidingInstants", "CRON_TZ=Europe/Berlin 0,30 2-3 * * *", "2026-03-28T23:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z", "2026-03-30T00:00:00Z"}},
		{"RangeAcrossAutumn", "CRON_TZ=Europe/Berlin 0 1-3 * * *", "2026-10-24T20:00:00Z",
			[]string{"2026-10-24T23:00:00Z", "2026-10-25T00:00:00Z", "2026-10-25T02:00:00Z", "2026-10-26T00:00:00Z"}},
		{"DailyDescriptor", "CRON_TZ=America/Santiago @daily", "2026-09-05T12:00:00Z",
			[]string{"2026-09-06T04:00:00Z", "2026-09-07T03:00:00Z"}},
		// Lord Howe changes by 30 minutes, at 02:00.
		{"LordHoweSpring", "CRON_TZ=Australia/Lord_Howe 15 2 * * *", "2026-10-03T00:00:00Z",
			[]string{"2026-10-03T15:30:00Z", "2026-10-04T15:15:00Z"}},
		{"LordHoweAutumn", "CRON_TZ=Australia/Lord_Howe 45 1 * * *", "2026-04-04T00:00:00Z",
			[]string{"2026-04-04T14:45:00Z", "2026-04-05T15:15:00Z"}},
		// Santiago changes at midnight: 00:00 does not exist on 2026-09-06.
		{"SantiagoSpringMidnight", "CRON_TZ=America/Santiago 0 0 * * *", "2026-09-05T00:00:00Z",
			[]string{"2026-09-05T04:00:00Z", "2026-09-06T04:00:00Z", "2026-09-07T03:00:00Z"}},
		// Saturday 23:00-24:00 repeats on 2026-04-04.
		{"SantiagoAutumn", "CRON_TZ=America/Santiago 30 23 * * *", "2026-04-04T12:00:00Z",
			[]string{"2026-04-05T02:30:00Z", "2026-04-06T03:30:00Z"}},
		// Nuuk's Saturday 23:30 is skipped on 2026-03-28: it ticks at
		// Sunday 00:00 -01, and Sunday has its own 23:30 as well.
		{"NuukSkippedTimeTicksNextDay", "CRON_TZ=America/Nuuk 30 23 * * *", "2026-03-27T12:00:00Z",
			[]string{"2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"MexicoCityNoChanges", "CRON_TZ=America/Mexico_City 30 2 * * *", "2026-04-04T12:00:00Z",
			[]string{"2026-04-05T08:30:00Z", "2026-04-06T08:30:00Z"}},
		// Unanchored specs tick at every matching instant: in both 02:00s,
		// in no 02:xx of the spring day.
		{"HourlyAutumn", "CRON_TZ=Europe/Berlin 0 * * * *", "2026-10-24T23:30:00Z",
			[]string{"2026-10-25T00:00:00Z", "2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z"}},
		{"HourlySpring", "CRON_TZ=Europe/Berlin @hourly", "2026-03-28T23:30:00Z",
			[]string{"2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z"}},
		{"QuarterHoursSpring", "CRON_TZ=Europe/Berlin */15 * * * *", "2026-03-29T00:40:00Z",
			[]string{"2026-03-29T00:45:00Z", "2026-03-29T01:00:00Z"}},
		{"QuarterHoursAutumn", "CRON_TZ=America/New_York */30 * * * *", "2026-11-01T05:10:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-01T06:00:00Z", "2026-11-01T06:30:00Z", "2026-11-01T07:00:00Z"}},
		{"EveryTwoHoursAutumn", "CRON_TZ=Europe/Berlin 0 */2 * * *", "2026-10-24T21:30:00Z",
			[]string{"2026-10-24T22:00:00Z", "2026-10-25T00:00:00Z", "2026-10-25T01:00:00Z", "2026-10-25T03:00:00Z"}},
		{"EveryIgnoresZones", "@every 1h", "2026-10-25T00:30:00Z",
			[]string{"2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustParseIn(t, tt.spec, nil)
			at := utc(t, tt.from)
			for i, w := range tt.want {
				want := utc(t, w)
				next := s.Next(at)
				if !next.Equal(want) {
					t.Fatalf("tick %d after %s: got %s, want %s", i+1, at, next.UTC(), want)
				}
				if got := s.Latest(next); !got.Equal(next) {
					t.Errorf("Latest(%s): got %s, want the tick itself", next, got.UTC())
				}
				if got := s.Latest(next.Add(-time.Millisecond)); i > 0 && !got.Equal(at) {
					t.Errorf("Latest(%s - 1ms): got %s, want the tick before, %s", next, got.UTC(), at)
				}
				at = next
			}
		})
	}
}

// TestDaylightSavingZones checks every change of every zone in 2026-2030
// against cron(8)'s rule computed by brute force, minute by minute: an
// anchored time of a local day D ticks at the first instant whose local
// time is D at that time or later (the time itself; its first occurrence
// when repeated; the end of the gap when skipped), and an unanchored spec
// ticks at every instant whose local time matches.
func TestDaylightSavingZones(t *testing.T) {
	t.Parallel()
	type spec struct {
		fields string
		// times are an anchored spec's local times of day (hour, minute);
		// match is an unanchored spec's test of a local time.
		times [][2]int
		match func(hour, minute int) bool
	}
	specs := []spec{
		{fields: "*/15 * * * *", match: func(_, m int) bool { return m%15 == 0 }},
		{fields: "0 * * * *", match: func(_, m int) bool { return m == 0 }},
		{fields: "0 */2 * * *", match: func(h, m int) bool { return h%2 == 0 && m == 0 }},
		{fields: "0,30 0-3 * * *", times: [][2]int{{0, 0}, {0, 30}, {1, 0}, {1, 30}, {2, 0}, {2, 30}, {3, 0}, {3, 30}}},
		{fields: "30 22,23 * * *", times: [][2]int{{22, 30}, {23, 30}}},
	}
	for h := range 24 {
		for _, m := range []int{0, 15, 30, 45} {
			specs = append(specs, spec{fields: fmt.Sprintf("%d %d * * *", m, h), times: [][2]int{{h, m}}})
		}
	}
	for _, name := range dstZones {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			loc := location(t, name)
			changes := zoneChanges(loc, 2026, 2030)
			if name == "America/Mexico_City" {
				if len(changes) != 0 {
					t.Fatalf("changes in 2026-2030: %v; want none (abolished in 2022): is the zone database outdated?", changes)
				}
				s := mustParseIn(t, "30 2 * * *", loc)
				for tick := s.Next(utc(t, "2026-01-01T00:00:00Z")); tick.Year() < 2031; tick = s.Next(tick) {
					if h, m, _ := tick.UTC().Clock(); h != 8 || m != 30 {
						t.Fatalf("tick %s: want 08:30Z all year", tick.UTC())
					}
				}
				return
			}
			if len(changes) != 10 {
				t.Fatalf("changes in 2026-2030: got %d (%v), want two a year", len(changes), changes)
			}
			for _, change := range changes {
				minutes := localMinutes(loc, change)
				y, mo, d := change.In(loc).Date()
				day := time.Date(y, mo, d, 0, 0, 0, 0, time.UTC) // the local day of the change
				lo := firstAtOrAfter(minutes, day.AddDate(0, 0, -1))
				hi := firstAtOrAfter(minutes, day.AddDate(0, 0, 2))
				for _, sp := range specs {
					var want []time.Time
					for _, m := range minutes {
						if sp.match == nil {
							break
						}
						if sp.match(m.wall.Hour(), m.wall.Minute()) {
							want = append(want, m.at)
						}
					}
					for d := -2; d <= 2; d++ {
						for _, hm := range sp.times {
							want = append(want, firstAtOrAfter(minutes, day.AddDate(0, 0, d).Add(time.Duration(hm[0])*time.Hour+time.Duration(hm[1])*time.Minute)))
						}
					}
					slices.SortFunc(want, func(a, b time.Time) int { return a.Compare(b) })
					want = slices.CompactFunc(want, time.Time.Equal)
					want = slices.DeleteFunc(want, func(w time.Time) bool { return w.Before(lo) || !w.Before(hi) })

					s := mustParseIn(t, sp.fields, loc)
					var got []time.Time
					for tick := s.Next(lo.Add(-time.Nanosecond)); tick.Before(hi); tick = s.Next(tick) {
						got = append(got, tick)
					}
					if !slices.EqualFunc(got, want, time.Time.Equal) {
						t.Errorf("%s around the change at %s:\n got  %s\n want %s", sp.fields, change.In(loc), fmtTicks(got, loc), fmtTicks(want, loc))
					}
				}
			}
		})
	}
}

// zoneChanges returns the instants at which loc's offset changes in the
// years from first to last.
func zoneChanges(loc *time.Location, first, last int) []time.Time {
	var changes []time.Time
	for at := time.Date(first, 1, 1, 0, 0, 0, 0, loc); at.Year() <= last; {
		_, end := at.ZoneBounds()
		if end.IsZero() || end.Year() > last {
			break
		}
		_, before := at.Zone()
		if _, after := end.Zone(); before != after {
			changes = append(changes, end)
		}
		at = end
	}
	return changes
}

// localMinute is an instant and its local time, written as a UTC time, and
// the latest local time up to it (local time goes back at a change).
type localMinute struct{ at, wall, latest time.Time }

// localMinutes lists the whole minutes from three days before change to
// three days after it with their local times.
func localMinutes(loc *time.Location, change time.Time) []localMinute {
	var ms []localMinute
	var latest time.Time
	for at := change.Add(-72 * time.Hour).Truncate(time.Minute); at.Before(change.Add(72 * time.Hour)); at = at.Add(time.Minute) {
		y, mo, d := at.In(loc).Date()
		h, mi, _ := at.In(loc).Clock()
		wall := time.Date(y, mo, d, h, mi, 0, 0, time.UTC)
		if wall.After(latest) {
			latest = wall
		}
		ms = append(ms, localMinute{at: at, wall: wall, latest: latest})
	}
	return ms
}

// firstAtOrAfter returns the first instant whose local time is wall or
// later: the first whose latest local time is, which a binary search finds.
func firstAtOrAfter(ms []localMinute, wall time.Time) time.Time {
	i, _ := slices.BinarySearchFunc(ms, wall, func(m localMinute, w time.Time) int { return m.latest.Compare(w) })
	if i == len(ms) {
		panic(fmt.Sprintf("no local time at or after %s in the window", wall))
	}
	return ms[i].at
}

func fmtTicks(ts []time.Time, loc *time.Location) string {
	var b strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&b, "%s ", t.In(loc).Format("01-02T15:04-07:00"))
	}
	return b.String()
}

func TestMinGapAcrossChanges(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		spec string
		want time.Duration
	}{
		// 02:30 CET, then 03:00 CEST on the spring day, then 02:30 CEST.
		{"CRON_TZ=Europe/Berlin 30 2 * * *", 23*time.Hour + 30*time.Minute},
		{"CRON_TZ=Europe/Berlin 0 2 * * *", 23 * time.Hour},
		{"CRON_TZ=America/New_York 30 1 * * *", 23 * time.Hour},
		{"CRON_TZ=Europe/Berlin @daily", 23 * time.Hour},
		// Unanchored: both 02:00s of the autumn day.
		{"CRON_TZ=Europe/Berlin 0 */2 * * *", time.Hour},
	} {
		if got := mustParseIn(t, tt.spec, nil).MinGap(); got != tt.want {
			t.Errorf("MinGap(%q): got %s, want %s", tt.spec, got, tt.want)
		}
	}
}

// FuzzTicks: ticks strictly increase, Latest is Next's inverse, and an
// anchored spec never has a local time of a local day twice, whatever the
// spec, zone and start. The seeds run as a normal test.
func FuzzTicks(f *testing.F) {
	for i, spec := range []string{
		"30 2 * * *", "0 1-3 * * *", "0,30 2-3 * * *", "15 8-18/2 * * *", "0 2,14 * * *",
		"*/15 * * * *", "0 * * * *", "0 */2 * * *", "@daily", "@hourly", "10 30 2 * * *",
		"*/20 30 1 * * *", "0 0 * * 0", "30 23 * * 6", "45 1 1 * *", "@every 90m",
	} {
		for z := range dstZones {
			f.Add(spec, uint8(z), int64(i*7919+z*104729)*60)
		}
	}
	f.Fuzz(func(t *testing.T, spec string, zone uint8, offset int64) {
		loc, err := time.LoadLocation(dstZones[int(zone)%len(dstZones)])
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(spec, "TZ=") {
			t.Skip("the zone is chosen by the fuzzer")
		}
		s, err := schedule.ParseIn(spec, loc)
		if err != nil {
			t.Skip()
		}
		// A start in 2026-2030, where every zone above has changes.
		const span = 5 * 365 * 24 * 3600
		start := time.Unix(utcUnix(2026)+((offset%span)+span)%span, 0)
		anchored := schedule.Anchored(s)
		seen := make(map[string]bool)
		prev := start
		for range 40 {
			tick := s.Next(prev)
			if tick.IsZero() {
				return
			}
			if !tick.After(prev) {
				t.Fatalf("%q in %s: Next(%s) = %s, not after it", spec, loc, prev.In(loc), tick.In(loc))
			}
			if got := s.Latest(tick); !got.Equal(tick) {
				t.Fatalf("%q in %s: Latest(%s) = %s, want the tick", spec, loc, tick.In(loc), got.In(loc))
			}
			if prev != start {
				if got := s.Latest(tick.Add(-time.Nanosecond)); !got.Equal(prev) {
					t.Fatalf("%q in %s: Latest just before %s = %s, want the tick before, %s", spec, loc, tick.In(loc), got.In(loc), prev.In(loc))
				}
			}
			if local := tick.In(loc).Format(time.DateTime); anchored {
				if seen[local] {
					t.Fatalf("%q in %s: local time %s ticks twice (again at %s)", spec, loc, local, tick.UTC())
				}
				seen[local] = true
			}
			prev = tick
		}
	})
}

func utcUnix(year int) int64 { return time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC).Unix() }

func TestAnchored(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string]bool{
		"30 2 * * *": true, "0 2,14 * * *": true, "0 1-3 * * *": true, "15 8-18/2 * * *": true,
		"*/5 * * * *": false, "0 * * * *": false, "0 */2 * * *": false, "30 ? * * *": false, "*/5 2 * * *": false,
		// A seconds field does not count.
		"*/10 30 2 * * *": true, "0 */5 * * * *": false, "0 0 * * * *": false,
		"@daily": true, "@midnight": true, "@weekly": true, "@monthly": true, "@yearly": true,
		"@hourly": false, "@every 1h": false,
		"CRON_TZ=Europe/Berlin 30 2 * * *": true, "TZ=Europe/Berlin @hourly": false,
	} {
		if got := schedule.Anchored(mustParseIn(t, spec, nil)); got != want {
			t.Errorf("%q: anchored %v, want %v", spec, got, want)
		}
	}
}
