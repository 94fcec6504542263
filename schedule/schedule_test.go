package schedule_test

import (
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // Europe/Berlin and America/New_York without a system zone database

	"github.com/leaseapi/leaseapi/schedule"
)

func utc(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func location(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("load location %s: %v", name, err)
	}
	return loc
}

func mustParseIn(t *testing.T, spec string, loc *time.Location) *schedule.Schedule {
	t.Helper()
	s, err := schedule.ParseIn(spec, loc)
	if err != nil {
		t.Fatalf("ParseIn(%q): %v", spec, err)
	}
	return s
}

func TestTicks(t *testing.T) {
	t.Parallel()
	berlin := location(t, "Europe/Berlin")
	tests := []struct {
		name string
		spec string
		loc  *time.Location
		from string
		want []string
	}{
		{"EveryAlignedToEpoch", "@every 10s", nil, "2026-11-30T07:00:03.250Z", []string{"2026-11-30T07:00:10Z", "2026-11-30T07:00:20Z"}},
		{"EveryStrictlyAfter", "@every 10s", nil, "2026-11-30T07:00:10Z", []string{"2026-11-30T07:00:20Z"}},
		// 7s does not divide a minute: ticks are multiples of 7s since 1970.
		{"EveryOddInterval", "@every 7s", nil, "2001-09-09T01:46:40Z", []string{"2001-09-09T01:46:41Z", "2001-09-09T01:46:48Z"}},
		{"EveryMilliseconds", "@every 1500ms", nil, "1970-01-01T00:00:03Z", []string{"1970-01-01T00:00:04.5Z", "1970-01-01T00:00:06Z"}},
		{"SecondsField", "*/15 * * * * *", nil, "2026-11-30T07:00:03.5Z", []string{"2026-11-30T07:00:15Z", "2026-11-30T07:00:30Z"}},
		{"FiveFields", "30 7 * * *", nil, "2026-11-30T07:00:03Z", []string{"2026-11-30T07:30:00Z", "2026-12-01T07:30:00Z"}},
		{"Descriptor", "@hourly", nil, "2026-11-30T07:00:03Z", []string{"2026-11-30T08:00:00Z"}},
		{"ChosenZone", "0 7 * * *", berlin, "2026-11-30T00:00:00Z", []string{"2026-11-30T06:00:00Z"}},
		{"ZoneInSpec", "CRON_TZ=America/New_York 0 9 * * *", berlin, "2026-11-30T00:00:00Z", []string{"2026-11-30T14:00:00Z"}},
		{"TZPrefix", "TZ=Europe/Berlin 0 7 * * *", nil, "2026-11-30T00:00:00Z", []string{"2026-11-30T06:00:00Z"}},
		{"NoZoneIsUTC", "0 7 * * *", nil, "2026-11-30T00:00:00Z", []string{"2026-11-30T07:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustParseIn(t, tt.spec, tt.loc)
			at := utc(t, tt.from)
			for i, w := range tt.want {
				want := utc(t, w)
				next := s.Next(at)
				if !next.Equal(want) {
					t.Fatalf("tick %d after %s: got %s, want %s", i+1, at, next, want)
				}
				// Latest is Next's inverse: the tick itself, and the
				// previous tick just before it.
				if got := s.Latest(next); !got.Equal(next) {
					t.Errorf("Latest(%s): got %s, want the tick itself", next, got)
				}
				if got := s.Latest(next.Add(-time.Millisecond)); !got.Before(next) || !s.Next(got).Equal(next) {
					t.Errorf("Latest(%s - 1ms): got %s, want the tick before %s", next, got, next)
				}
				at = next
			}
		})
	}
}

// TestTicksAreCanonical: replicas that start at different times, or whose
// clocks are off by less than the interval, compute the same ticks.
func TestTicksAreCanonical(t *testing.T) {
	t.Parallel()
	epoch := utc(t, "2026-11-30T07:00:00Z")
	for _, spec := range []string{"@every 5s", "*/5 * * * * *", "@every 1m", "* * * * *"} {
		t.Run(strings.NewReplacer(" ", "_", "*", "x", "/", "-").Replace(spec), func(t *testing.T) {
			t.Parallel()
			s := mustParseIn(t, spec, nil)
			base := s.Next(epoch)
			for _, offset := range []time.Duration{-time.Second, -1, 0, 1, 1234 * time.Millisecond} {
				start := base.Add(-2*time.Second + offset)
				if got := s.Next(start); !got.Equal(base) {
					t.Fatalf("start %s: first tick %s, want %s", start, got, base)
				}
			}
		})
	}
}

func TestLatestFarBack(t *testing.T) {
	t.Parallel()
	// A leap day: the newest one before 2027 is 2024-02-29.
	s := mustParseIn(t, "0 0 29 2 *", nil)
	if got, want := s.Latest(utc(t, "2026-11-30T07:00:00Z")), utc(t, "2024-02-29T00:00:00Z"); !got.Equal(want) {
		t.Errorf("Latest: got %s, want %s", got, want)
	}
	// Before the epoch, @every still counts from it.
	e := mustParseIn(t, "@every 10s", nil)
	if got, want := e.Latest(time.Unix(-15, 0)), time.Unix(-20, 0); !got.Equal(want) {
		t.Errorf("Latest before the epoch: got %s, want %s", got, want)
	}
}

func TestMinGap(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		spec string
		want time.Duration
	}{
		{"@every 90s", 90 * time.Second},
		{"* * * * * *", time.Second},
		{"*/15 * * * * *", 15 * time.Second},
		{"* * * * *", time.Minute},
		{"0 9,17 * * *", 8 * time.Hour},
		{"0 0 1,31 * *", 24 * time.Hour}, // the 31st and the 1st of the next month
		{"@daily", 24 * time.Hour},
		{"0 0 * * 1", 7 * 24 * time.Hour},
	} {
		t.Run(tt.spec, func(t *testing.T) {
			t.Parallel()
			if got := mustParseIn(t, tt.spec, nil).MinGap(); got != tt.want {
				t.Errorf("MinGap(%q): got %s, want %s", tt.spec, got, tt.want)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"", "  ", "not a spec", "@every 0s", "@every -5s", "@every 1.5ms", "@every soon",
		"61 * * * *", "@fortnightly", "0 0 30 2 *", "CRON_TZ=Mars/Olympus 0 7 * * *", strings.Repeat("*", 257)} {
		t.Run(strings.ReplaceAll(spec, " ", "_"), func(t *testing.T) {
			t.Parallel()
			if _, err := schedule.Parse(spec); err == nil {
				t.Fatalf("Parse(%q): got no error", spec)
			}
		})
	}
}

func TestInZone(t *testing.T) {
	t.Parallel()
	berlin := location(t, "Europe/Berlin")
	for _, tt := range []struct {
		spec string
		loc  *time.Location
		want string
	}{
		{"0 7 * * *", berlin, "CRON_TZ=Europe/Berlin 0 7 * * *"},
		{"0 7 * * *", time.UTC, "0 7 * * *"},
		{"0 7 * * *", nil, "0 7 * * *"},
		{"@every 10s", berlin, "@every 10s"},
		{"@every\t10s", berlin, "@every\t10s"}, // @every takes no zone, however spaced
		{"CRON_TZ=America/New_York 0 9 * * *", berlin, "CRON_TZ=America/New_York 0 9 * * *"},
		{"TZ=America/New_York 0 9 * * *", berlin, "TZ=America/New_York 0 9 * * *"},
	} {
		got, err := schedule.InZone(tt.spec, tt.loc)
		if err != nil || got != tt.want {
			t.Errorf("InZone(%q, %v): got %q, %v, want %q", tt.spec, tt.loc, got, err, tt.want)
		}
		// The server, reading the result in UTC, gets the caller's ticks.
		from := utc(t, "2026-11-30T00:00:00Z")
		local := mustParseIn(t, tt.spec, tt.loc)
		server := mustParseIn(t, got, nil)
		if a, b := local.Next(from), server.Next(from); !a.Equal(b) {
			t.Errorf("InZone(%q, %v): the server's tick %s differs from the caller's %s", tt.spec, tt.loc, b, a)
		}
	}
	// time.Local is the host's zone by name, which the server can load.
	host, err := schedule.HostZone()
	if err != nil {
		t.Fatalf("HostZone: %v", err)
	}
	got, err := schedule.InZone("0 7 * * *", time.Local)
	want, _ := schedule.InZone("0 7 * * *", host)
	if err != nil || got != want {
		t.Errorf("InZone with time.Local: got %q, %v; want %q", got, err, want)
	}
}
