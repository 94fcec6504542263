package leaseapi_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

// FuzzValidJobID holds ValidJobID to the pattern the API documents.
func FuzzValidJobID(f *testing.F) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)
	for _, id := range []string{
		"", "a", "job-1", "etl:nightly", "A.b_c:d-e", "-a", ".a", "_a", ":a", "a b", "a/b", "a\n", "\na",
		"é", "a\x00", strings.Repeat("a", 128), strings.Repeat("a", 129), "0" + strings.Repeat("-", 127),
	} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if got, want := leaseapi.ValidJobID(id), pattern.MatchString(id); got != want {
			t.Fatalf("ValidJobID(%q) = %v, the pattern says %v", id, got, want)
		}
	})
}

// TestValidTick: a tick (and any time a caller sends) lies in the years
// 0001 to 9999; year 0000, which RFC 3339 admits and many clients cannot
// represent, is refused, as the acquire's tick and as a runs cursor.
func TestValidTick(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		at   time.Time
		want bool
	}{
		{time.Date(0, time.December, 31, 23, 59, 59, 999e6, time.UTC), false},
		{time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC), true},
		{time.Date(9999, time.December, 31, 23, 59, 59, 999e6, time.UTC), true},
		{time.Date(10000, time.January, 1, 0, 0, 0, 0, time.UTC), false},
	} {
		if got := leaseapi.ValidTick(tc.at); got != tc.want {
			t.Errorf("ValidTick(%s) = %t, want %t", tc.at, got, tc.want)
		}
		tick := tc.at
		err := (&leaseapi.AcquireParams{JobID: "j", Owner: "a", TTL: time.Second, Tick: &tick}).Validate()
		if (err == nil) != tc.want || err != nil && !strings.Contains(err.Error(), "year 0001 to 9999") {
			t.Errorf("AcquireParams.Validate with tick %s: got %v, want valid %t", tc.at, err, tc.want)
		}
		cursor := &leaseapi.RecentRunsParams{Limit: 1, After: &leaseapi.RunKey{At: tc.at, ID: 1}}
		if err := cursor.Validate(); (err == nil) != tc.want {
			t.Errorf("RecentRunsParams.Validate with cursor %s: got %v, want valid %t", tc.at, err, tc.want)
		}
	}
}

// TestValidMinInterval: a minimum interval is zero (none) or 1 ms to 31
// days; anything else is refused naming minIntervalMs.
func TestValidMinInterval(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		want bool
	}{
		{0, true},
		{time.Millisecond, true},
		{leaseapi.MaxMinInterval, true},
		{-time.Millisecond, false},
		{time.Microsecond, false},
		{leaseapi.MaxMinInterval + time.Millisecond, false},
	} {
		err := (&leaseapi.AcquireParams{JobID: "j", Owner: "a", TTL: time.Second, MinInterval: tc.d}).Validate()
		if (err == nil) != tc.want || err != nil && !strings.Contains(err.Error(), "minIntervalMs") {
			t.Errorf("AcquireParams.Validate with MinInterval %s: got %v, want valid %t", tc.d, err, tc.want)
		}
	}
}
