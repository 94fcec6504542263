package schedule_test

import (
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/schedule"
)

// TestParseRejectsZoneAlone: a spec that is only a zone is an error that
// says so; robfig/cron panicked on it.
func TestParseRejectsZoneAlone(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ spec, want string }{
		{"CRON_TZ=Europe/Berlin", "names a zone (CRON_TZ=Europe/Berlin) but no fields"},
		{"TZ=Europe/Berlin", "names a zone (TZ=Europe/Berlin) but no fields"},
		{"  CRON_TZ=UTC  ", "names a zone (CRON_TZ=UTC) but no fields"},
		{"CRON_TZ=", "names a zone (CRON_TZ=) but no fields"},
		{"TZ= 0 7 * * *", "TZ= names no zone"},
		{"CRON_TZ=UTC TZ=UTC", "names a zone twice"},
		{"CRON_TZ=UTC CRON_TZ=UTC 0 7 * * *", "names a zone twice"},
		{"CRON_TZ=Local 0 7 * * *", "zone Local is each machine's own"},
		{"CRON_TZ=Mars/Olympus 0 7 * * *", `zone "Mars/Olympus" is not a zone name`},
		{"CRON_TZ=Europe/Berlin @every 5s", "@every takes no zone"},
		{"@daily at noon", "the descriptor @daily takes nothing after it"},
		{"@every", "@every needs one Go duration"},
		{"@every 5s 5s", "@every needs one Go duration"},
	} {
		t.Run(strings.ReplaceAll(tt.spec, " ", "_"), func(t *testing.T) {
			t.Parallel()
			_, err := schedule.Parse(tt.spec)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse(%q): got %v, want an error saying %q", tt.spec, err, tt.want)
			}
		})
	}
}

// TestParseFieldsAfterZone: the zone's field may be followed by any
// whitespace, as the fields are.
func TestParseFieldsAfterZone(t *testing.T) {
	t.Parallel()
	from := utc(t, "2026-11-30T00:00:00Z")
	want := mustParseIn(t, "CRON_TZ=Europe/Berlin 0 7 * * *", nil).Next(from)
	for _, spec := range []string{"CRON_TZ=Europe/Berlin\t0 7 * * *", " CRON_TZ=Europe/Berlin  0 7 * * * "} {
		if got := mustParseIn(t, spec, nil).Next(from); !got.Equal(want) {
			t.Errorf("%q: first tick %s, want %s", spec, got, want)
		}
	}
}

// TestMinInterval: no schedule ticks more often than once a second, the
// shortest lease; ParseStored still reads the @every intervals earlier
// versions stored.
func TestMinInterval(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"@every 1ms", "@every 999ms", "@every 500ms"} {
		_, err := schedule.Parse(spec)
		if err == nil || !strings.Contains(err.Error(), "shorter than 1s") {
			t.Errorf("Parse(%q): got %v, want an error saying it is shorter than 1s", spec, err)
		}
		s, err := schedule.ParseStored(spec)
		if err != nil {
			t.Errorf("ParseStored(%q): %v", spec, err)
			continue
		}
		at := utc(t, "2026-11-30T07:00:00.0005Z")
		if latest, next := s.Latest(at), s.Next(at); next.Sub(latest) != s.MinGap() || latest.After(at) || !next.After(at) {
			t.Errorf("ParseStored(%q): Latest %s and Next %s around %s", spec, latest, next, at)
		}
	}
	for _, spec := range []string{"@every 1s", "@every 1001ms", "* * * * * *"} {
		if s := mustParseIn(t, spec, nil); s.MinGap() < time.Second {
			t.Errorf("%q: MinGap %s", spec, s.MinGap())
		}
	}
	// A stored CRON_TZ=Local was read in the reader's zone, UTC on the
	// server.
	s, err := schedule.ParseStored("CRON_TZ=Local 0 7 * * *")
	if err != nil {
		t.Fatalf("ParseStored: %v", err)
	}
	if got, want := s.Next(utc(t, "2026-11-30T00:00:00Z")), utc(t, "2026-11-30T07:00:00Z"); !got.Equal(want) {
		t.Errorf("stored CRON_TZ=Local: got %s, want %s", got, want)
	}
	// So was an empty zone.
	if s, err = schedule.ParseStored("TZ= 0 7 * * *"); err != nil {
		t.Fatalf("ParseStored: %v", err)
	}
	if got, want := s.Next(utc(t, "2026-11-30T00:00:00Z")), utc(t, "2026-11-30T07:00:00Z"); !got.Equal(want) {
		t.Errorf("stored TZ=: got %s, want %s", got, want)
	}
}

// TestSundaySeven: day-of-week 7 is Sunday, wherever crontab(5) takes it.
func TestSundaySeven(t *testing.T) {
	t.Parallel()
	// 2026-11-30 is a Monday; the days are counted from it, Monday 1.
	days := func(spec string) []int {
		s := mustParseIn(t, spec, nil)
		var got []int
		for tick := s.Next(utc(t, "2026-11-29T12:00:00Z")); len(got) < 7; tick = s.Next(tick) {
			d := int(tick.Sub(utc(t, "2026-11-29T07:00:00Z")) / (24 * time.Hour))
			if d > 7 {
				break
			}
			got = append(got, d)
		}
		return got
	}
	for _, tt := range []struct {
		spec string
		want []int // days after Sunday 2026-11-29: 1 Monday ... 7 Sunday
	}{
		{"0 7 * * 7", []int{7}},
		{"0 7 * * 07", []int{7}},
		{"0 7 * * 1,7", []int{1, 7}},
		{"0 7 * * 5-7", []int{5, 6, 7}},
		{"0 7 * * 1-7", []int{1, 2, 3, 4, 5, 6, 7}},
		{"0 7 * * 0-7", []int{1, 2, 3, 4, 5, 6, 7}},
		{"0 7 * * 1-7/2", []int{1, 3, 5, 7}},
		{"0 7 * * 1-7/3", []int{1, 4, 7}},
		{"0 7 * * 2-7/2", []int{2, 4, 6}},
		{"0 7 * * 7-7", []int{7}},
		{"0 7 * * fri-7", []int{5, 6, 7}},
		{"0 7 * * fri-sun", []int{5, 6, 7}},
		{"0 7 * * 5-0", []int{5, 6, 7}},
		{"0 0 7 * * 6-7", []int{6, 7}}, // six fields
		{"0 7 * * 3,5-7/2", []int{3, 5, 7}},
		{"0 7 * * 0", []int{7}},
		{"0 7 * * sun", []int{7}},
	} {
		t.Run(strings.ReplaceAll(tt.spec, " ", "_"), func(t *testing.T) {
			t.Parallel()
			if got := days(tt.spec); !equalInts(got, tt.want) {
				t.Errorf("%q: ticks on days %v, want %v", tt.spec, got, tt.want)
			}
		})
	}
	if _, err := schedule.Parse("0 7 * * 1,8"); err == nil || !strings.Contains(err.Error(), "want 0-7 (0 and 7 are Sunday)") {
		t.Errorf("Parse(day of week 8): got %v, want an error naming 0-7", err)
	}
	// Forms crontab(5) refuses too.
	for _, spec := range []string{"0 7 * * 8", "0 7 * * 7/2", "0 7 * * 1-7/0", "0 7 * * 1-7/x", "0 7 * * 7-1", "0 7 * * 5-0/2", "0 7 * * 1-2-7"} {
		if _, err := schedule.Parse(spec); err == nil {
			t.Errorf("Parse(%q): got no error", spec)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestEveryAcrossYears: @every ticks are the multiples of D since the Unix
// epoch in all of years 0001-9999, computed without wrap-around (UnixNano
// covers only 1678-2262); a tick outside those years, or at the zero
// instant 0001-01-01T00:00:00Z, is the zero time.
func TestEveryAcrossYears(t *testing.T) {
	t.Parallel()
	instants := []string{
		"0001-01-01T00:00:00Z", "0001-01-01T00:00:00.5Z", "0001-01-01T00:59:59Z", "0001-06-01T00:00:00Z",
		"1677-09-21T00:12:43.145224191Z", "1677-09-21T00:12:44Z", "1970-01-01T00:00:00Z", "1969-12-31T23:59:59.999Z",
		"2262-04-11T23:47:16.854775807Z", "2262-04-11T23:47:17Z", "2262-04-12T00:00:00Z",
		"9999-06-01T00:30:00Z", "9999-12-31T22:30:00Z", "9999-12-31T23:00:00Z", "9999-12-31T23:59:59.999999999Z",
	}
	lo, hi := utc(t, "0001-01-01T00:00:00Z"), utc(t, "9999-12-31T23:59:59.999999999Z")
	for _, spec := range []string{"@every 1h", "@every 7s", "@every 1500ms", "@every 2562047h"} {
		s := mustParseIn(t, spec, nil)
		d := big.NewInt(int64(s.MinGap()))
		for _, at := range instants {
			tm := utc(t, at)
			// The oracle: floor((t - epoch) / D) * D in big integers.
			ns := new(big.Int).Mul(big.NewInt(tm.Unix()), big.NewInt(1e9))
			ns.Add(ns, big.NewInt(int64(tm.Nanosecond())))
			q := new(big.Int).Div(ns, d) // Euclidean: floor for D > 0
			latest := fromNanos(new(big.Int).Mul(q, d))
			next := fromNanos(new(big.Int).Mul(q.Add(q, big.NewInt(1)), d))
			if !latest.After(lo) { // the zero instant is the zero time: none
				latest = time.Time{}
			}
			if next.After(hi) {
				next = time.Time{}
			}
			if got := s.Latest(tm); !got.Equal(latest) {
				t.Errorf("%s: Latest(%s) = %s, want %s", spec, at, got, latest)
			}
			if got := s.Next(tm); !got.Equal(next) {
				t.Errorf("%s: Next(%s) = %s, want %s", spec, at, got, next)
			}
		}
	}
	// Spelled out: 9999 stays in 9999, and the first tick after it is none.
	s := mustParseIn(t, "@every 1h", nil)
	for _, tt := range []struct{ fn, at, want string }{
		{"Latest", "9999-06-01T00:30:00Z", "9999-06-01T00:00:00Z"},
		{"Next", "9999-12-31T22:30:00Z", "9999-12-31T23:00:00Z"},
		{"Next", "9999-12-31T23:00:00Z", ""},
		{"Latest", "0001-01-01T01:30:00Z", "0001-01-01T01:00:00Z"},
		{"Next", "0001-01-01T00:00:00.5Z", "0001-01-01T01:00:00Z"},
		{"Next", "0000-12-31T23:30:00Z", ""}, // the zero instant is no tick
		{"Next", "0000-12-31T22:30:00Z", ""},
		{"Latest", "0000-12-31T23:59:00Z", ""},
	} {
		at := parseAnyYear(t, tt.at)
		got := s.Latest(at)
		if tt.fn == "Next" {
			got = s.Next(at)
		}
		if want := parseAnyYear(t, tt.want); !got.Equal(want) {
			t.Errorf("@every 1h: %s(%s) = %s, want %s", tt.fn, tt.at, got, want)
		}
	}
}

// parseAnyYear parses an RFC 3339 time of year 0000 too; "" is the zero
// time.
func parseAnyYear(t *testing.T, s string) time.Time {
	t.Helper()
	if s == "" {
		return time.Time{}
	}
	if strings.HasPrefix(s, "0000-") {
		return utc(t, "0001"+s[4:]).AddDate(-1, 0, 0)
	}
	return utc(t, s)
}

func fromNanos(ns *big.Int) time.Time {
	sec, rem := new(big.Int).DivMod(ns, big.NewInt(1e9), new(big.Int))
	return time.Unix(sec.Int64(), rem.Int64()).UTC()
}

// TestCronAcrossYears: a cron spec's ticks stop at the end of 9999 (UTC)
// and begin at 0001, also in a zone whose local year differs.
func TestCronAcrossYears(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ spec, fn, at, want string }{
		{"0 0 * * *", "Next", "9999-12-30T12:00:00Z", "9999-12-31T00:00:00Z"},
		{"0 0 * * *", "Next", "9999-12-31T00:00:00Z", ""},
		{"@yearly", "Next", "9995-06-01T00:00:00Z", "9996-01-01T00:00:00Z"},
		{"@yearly", "Latest", "9999-12-31T23:59:59Z", "9999-01-01T00:00:00Z"},
		// 10000-01-01 00:00 in Berlin is still 9999 in UTC.
		{"CRON_TZ=Europe/Berlin 0 0 1 1 *", "Next", "9999-12-31T12:00:00Z", "9999-12-31T23:00:00Z"},
		{"0 6 * * *", "Latest", "0001-01-01T12:00:00Z", "0001-01-01T06:00:00Z"},
		{"0 12 * * *", "Latest", "0001-01-01T06:00:00Z", ""},
		{"@monthly", "Latest", "0001-06-15T00:00:00Z", "0001-06-01T00:00:00Z"},
		{"0 6 1 1 *", "Next", "0000-06-01T00:00:00Z", "0001-01-01T06:00:00Z"},
		{"@yearly", "Latest", "0001-06-01T00:00:00Z", ""}, // the zero instant is no tick
		// New York's local mean time: 0001-01-01 00:00 is 04:56:02 UTC.
		{"CRON_TZ=America/New_York @yearly", "Latest", "0001-01-01T12:00:00Z", "0001-01-01T04:56:02Z"},
		{"CRON_TZ=America/New_York @yearly", "Latest", "0001-01-01T03:00:00Z", ""},
		// The last UTC day of a leap year past New York's table, which
		// Go's ZoneBounds misreports: the walk over periods went round.
		{"CRON_TZ=America/New_York 0 12 * * *", "Next", "2040-12-30T18:00:00Z", "2040-12-31T17:00:00Z"},
		{"CRON_TZ=America/New_York 0 12 * * *", "Next", "2040-12-31T17:00:00Z", "2041-01-01T17:00:00Z"},
		{"CRON_TZ=America/New_York 0 12 * * *", "Latest", "2041-01-01T00:00:00Z", "2040-12-31T17:00:00Z"},
	} {
		s := mustParseIn(t, tt.spec, nil)
		at := parseAnyYear(t, tt.at)
		got := s.Latest(at)
		if tt.fn == "Next" {
			got = s.Next(at)
		}
		if want := parseAnyYear(t, tt.want); !got.Equal(want) {
			t.Errorf("%q: %s(%s) = %s, want %s", tt.spec, tt.fn, tt.at, got, want)
		}
	}
}
