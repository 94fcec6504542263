package handlers

// Fuzz targets for the parsers of outside input that have no route of
// their own to fuzz through: the list cursors and the tick. Run one with
//
//	go test ./handlers -run '^$' -fuzz '^FuzzCursor$' -fuzztime 60s

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// FuzzCursor: a cursor of GET /leases is accepted only as the canonical
// encoding of a valid job id, and every page's cursor is read back.
func FuzzCursor(f *testing.F) {
	for _, s := range []string{"", "=", "====", "YQ", "YQ==", "YR", "Zm9v", "Zm9vYg", "Zm9vYg=", "-_-_", "%00",
		encodeCursor("team-a:job.1"), encodeCursor(strings.Repeat("j", 128)), base64.RawURLEncoding.EncodeToString([]byte("a/b")),
		base64.RawURLEncoding.EncodeToString([]byte("\x00")), base64.StdEncoding.EncodeToString([]byte("team-a:job.1"))} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cursor string) {
		id, err := decodeCursor(cursor)
		if err != nil {
			if id != "" {
				t.Fatalf("decodeCursor(%q) = %q with error %v", cursor, id, err)
			}
		} else if !leaseapi.ValidJobID(id) || encodeCursor(id) != cursor {
			t.Fatalf("decodeCursor(%q) = %q: not a valid job id or not canonical", cursor, id)
		}
		// Every job id's cursor decodes to it.
		if leaseapi.ValidJobID(cursor) {
			if back, err := decodeCursor(encodeCursor(cursor)); err != nil || back != cursor {
				t.Fatalf("the cursor of %q decodes to %q, %v", cursor, back, err)
			}
		}
	})
}

// FuzzRunCursor: a cursor of GET /runs is accepted only as the canonical
// encoding of a run key whose time is a valid tick.
func FuzzRunCursor(f *testing.F) {
	for _, s := range []string{"", "MA", "MS4x", "LTEuMQ", "MC4w",
		base64.RawURLEncoding.EncodeToString([]byte("1764486000000000.42")),
		base64.RawURLEncoding.EncodeToString([]byte("-62167219200000000.1")),
		base64.RawURLEncoding.EncodeToString([]byte("253402300800000000.1")),
		base64.RawURLEncoding.EncodeToString([]byte("9223372036854775807.9223372036854775807")),
		base64.RawURLEncoding.EncodeToString([]byte("01.1")), base64.RawURLEncoding.EncodeToString([]byte("+1.1"))} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cursor string) {
		k, err := decodeRunCursor(cursor)
		if err != nil {
			return
		}
		if k.ID < 1 || !leaseapi.ValidTick(k.At) || encodeRunCursor(*k) != cursor {
			t.Fatalf("decodeRunCursor(%q) = %+v: invalid or not canonical", cursor, k)
		}
	})
}

// FuzzParseTick: a tick parses to UTC milliseconds, and a valid tick is
// written (api.FormatTime) as text that parses back to it, so a stored
// tick always reads back the same.
func FuzzParseTick(f *testing.F) {
	for _, s := range []string{"2026-11-30T07:00:00Z", "2026-11-30T07:00:00.123456789+05:30", "0000-01-01T00:00:00Z",
		"0001-01-01T00:00:00+00:01", "9999-12-31T23:59:59.999Z", "9999-12-31T23:59:59-00:01", "10000-01-01T00:00:00Z",
		"2026-12-31T23:59:60Z", "2026-01-01T00:00:00+24:00", "2026-01-01T00:00:00-23:59", "2026-11-30t07:00:00z",
		"2026-11-30 07:00:00Z", "2026-02-30T00:00:00Z", "-0001-01-01T00:00:00Z", "", "Z", "2026-11-30T07:00:00.Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tick, err := parseTick(&s)
		if err != nil {
			if tick != nil {
				t.Fatalf("parseTick(%q) = %v with error %v", s, tick, err)
			}
			return
		}
		if tick.Location() != time.UTC || !tick.Equal(tick.Truncate(time.Millisecond)) {
			t.Fatalf("parseTick(%q) = %v: not UTC milliseconds", s, tick)
		}
		if !leaseapi.ValidTick(*tick) {
			return // refused by the domain's validation
		}
		back, err := api.ParseTime(api.FormatTime(*tick))
		if err != nil || !back.Equal(*tick) {
			t.Fatalf("tick %q = %v is written as %q, which reads back as %v, %v", s, *tick, api.FormatTime(*tick), back, err)
		}
	})
}
