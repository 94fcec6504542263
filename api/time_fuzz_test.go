package api_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/api"
)

// FuzzTimeJSON: api.Time decodes any JSON value without panicking, and a
// time it decodes within years 0000-9999 encodes as TimeLayout text that
// decodes back to it (the wire format a client reads).
func FuzzTimeJSON(f *testing.F) {
	for _, s := range []string{`"2026-11-30T07:00:00Z"`, `"2026-11-30T07:00:00.123456789+05:30"`, `null`, `""`, `1`, `"x"`,
		`"0000-01-01T00:00:00Z"`, `"9999-12-31T23:59:59.999-01:00"`, `"10000-01-01T00:00:00Z"`, `"2026-12-31T23:59:60Z"`,
		`"2026-01-01T00:00:00+24:00"`, `"\u0032026-11-30T07:00:00Z"`, `"2026-11-30T07:00:00Z`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v api.Time
		if err := json.Unmarshal(data, &v); err != nil {
			return
		}
		if v.Location() != time.UTC || !v.Equal(v.Truncate(time.Millisecond)) {
			t.Fatalf("%s decodes to %v: not UTC milliseconds", data, v.Time)
		}
		if y := v.Year(); y < 0 || y > 9999 {
			return // not writable in TimeLayout; the server refuses such ticks
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s decodes to %v, which does not encode: %v", data, v.Time, err)
		}
		var back api.Time
		if err := json.Unmarshal(b, &back); err != nil || !back.Equal(v.Time) {
			t.Fatalf("%s decodes to %v, encodes as %s, decodes back as %v, %v", data, v.Time, b, back.Time, err)
		}
	})
}
