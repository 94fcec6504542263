package api

import (
	"fmt"
	"time"
)

// TimeLayout is the wire format of times: RFC 3339 in UTC with exactly
// millisecond precision.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Time is a time on the wire. It encodes as TimeLayout (in UTC, truncated to
// milliseconds) and decodes any RFC 3339 time.
type Time struct {
	time.Time
}

// NewTime returns t in UTC truncated to milliseconds.
func NewTime(t time.Time) Time {
	return Time{Time: t.UTC().Truncate(time.Millisecond)}
}

// FormatTime formats t as TimeLayout: UTC, truncated to milliseconds.
func FormatTime(t time.Time) string {
	return t.UTC().Truncate(time.Millisecond).Format(TimeLayout)
}

// ParseTime parses an RFC 3339 time with any offset and precision and
// returns it in UTC truncated to milliseconds, as the server stores ticks.
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("parse time %q: want RFC 3339 such as 2026-11-30T07:00:00Z", s)
	}
	return t.UTC().Truncate(time.Millisecond), nil
}

// MarshalJSON encodes t as a TimeLayout string.
func (t Time) MarshalJSON() ([]byte, error) {
	return t.appendJSON(make([]byte, 0, len(TimeLayout)+2)), nil
}

func (t Time) appendJSON(b []byte) []byte {
	b = append(b, '"')
	b = t.UTC().Truncate(time.Millisecond).AppendFormat(b, TimeLayout)
	return append(b, '"')
}

// UnmarshalJSON decodes an RFC 3339 string; null leaves t unchanged.
func (t *Time) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	if len(data) < 2 || data[0] != '"' || data[len(data)-1] != '"' {
		return fmt.Errorf("time must be an RFC 3339 string, got %s", data)
	}
	parsed, err := ParseTime(string(data[1 : len(data)-1]))
	if err != nil {
		return err
	}
	t.Time = parsed
	return nil
}

// String formats t as TimeLayout.
func (t Time) String() string {
	return FormatTime(t.Time)
}
