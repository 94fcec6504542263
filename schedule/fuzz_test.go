package schedule_test

import (
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/schedule"
)

// fuzzInstants are where FuzzParse follows a schedule's ticks from: the
// reference year, a daylight-saving change, the ends of UnixNano's range
// and of years 0001–9999.
var fuzzInstants = []time.Time{
	time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
	time.Date(2026, 3, 29, 0, 59, 59, 0, time.UTC),
	time.Date(1677, 9, 21, 0, 12, 43, 0, time.UTC),
	time.Date(2262, 4, 11, 23, 47, 16, 0, time.UTC),
	time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
	time.Date(9999, 12, 31, 23, 0, 0, 0, time.UTC),
	time.Date(9995, 6, 1, 0, 0, 0, 0, time.UTC),
}

// FuzzParse: no string panics the parser; a schedule it accepts ticks
// strictly later each time, in years 0001–9999 only, never twice within a
// second; Latest agrees with Next.
func FuzzParse(f *testing.F) {
	for _, spec := range []string{"@every 1s", "0 7 * * 7", "CRON_TZ=Europe/Berlin", "TZ=UTC", "*/5 * * * * *"} {
		f.Add(spec)
	}
	newYork, err := time.LoadLocation("America/New_York")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		for _, loc := range []*time.Location{time.UTC, newYork} {
			s, err := schedule.ParseIn(spec, loc)
			if err != nil {
				if s != nil {
					t.Fatalf("ParseIn(%q): a schedule with the error %v", spec, err)
				}
				continue
			}
			if gap := s.MinGap(); gap < time.Second {
				t.Fatalf("ParseIn(%q): MinGap %s, want at least 1s", spec, gap)
			}
			for _, from := range fuzzInstants {
				checkTicks(t, s, from)
			}
		}
		// What a store holds is read without panicking too, and ticks
		// forward (at least 1 ms apart: earlier versions allowed that).
		if s, err := schedule.ParseStored(spec); err == nil {
			if gap := s.MinGap(); gap < time.Millisecond {
				t.Fatalf("ParseStored(%q): MinGap %s, want at least 1ms", spec, gap)
			}
			from := fuzzInstants[0]
			if next := s.Next(from); !next.IsZero() && !next.After(from) {
				t.Fatalf("ParseStored(%q): Next(%s) = %s", spec, from, next)
			}
		}
	})
}

func checkTicks(t *testing.T, s *schedule.Schedule, from time.Time) {
	t.Helper()
	inYears := func(tick time.Time) bool {
		y := tick.UTC().Year()
		return y >= 1 && y <= 9999
	}
	prev := from
	for range 3 {
		next := s.Next(prev)
		if next.IsZero() {
			break
		}
		if !next.After(prev) || !inYears(next) {
			t.Fatalf("%q: Next(%s) = %s, want a later tick in years 0001-9999", s, prev, next)
		}
		if prev != from && next.Sub(prev) < time.Second {
			t.Fatalf("%q: ticks %s and %s are less than 1s apart", s, prev, next)
		}
		prev = next
	}
	latest := s.Latest(from)
	if latest.IsZero() {
		return
	}
	if latest.After(from) || !inYears(latest) {
		t.Fatalf("%q: Latest(%s) = %s, want a tick at or before it in years 0001-9999", s, from, latest)
	}
	if next := s.Next(latest); !next.IsZero() && !next.After(from) {
		t.Fatalf("%q: Latest(%s) = %s, but Next of it is %s, a newer tick at or before it", s, from, latest, next)
	}
}
