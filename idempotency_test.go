package leaseapi_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/leaseapi/leaseapi"
)

func TestParseIdempotencyKey(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", 256)
	for _, tt := range []struct {
		in, want string
		ok       bool
	}{
		{"abc", "abc", true},
		{`"abc"`, "abc", true},
		{`"a\"b\\c"`, `a"b\c`, true},
		{`"\""`, `"`, true},
		{"a b", "a b", true},
		{`a"b`, `a"b`, true}, // bare: a quote inside is the key's
		{long, long, true},
		{`"` + long + `"`, long, true},
		{"", "", false},
		{`""`, "", false},
		{long + "k", "", false},
		{`"` + long + `k"`, "", false},
		{`"abc`, "", false},
		{`"a"b`, "", false},
		{`"a";p=1`, "", false},
		{`"a\x"`, "", false},
		{`"a\`, "", false},
		{"clé", "", false},
		{`"clé"`, "", false},
		{"a\tb", "", false},
		{"a\x7fb", "", false},
	} {
		got, err := leaseapi.ParseIdempotencyKey(tt.in)
		switch {
		case tt.ok && (err != nil || got != tt.want):
			t.Errorf("ParseIdempotencyKey(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		case !tt.ok && !errors.Is(err, leaseapi.ErrInvalid):
			t.Errorf("ParseIdempotencyKey(%q) = %q, %v; want ErrInvalid", tt.in, got, err)
		}
	}
}

func TestIdempotencyFingerprint(t *testing.T) {
	t.Parallel()
	a := leaseapi.IdempotencyFingerprint("POST /x", "job", "reason")
	for _, other := range [][]string{{"POST /x", "jobr", "eason"}, {"POST /x", "job", "reason", ""}, {"POST /y", "job", "reason"}} {
		if leaseapi.IdempotencyFingerprint(other...) == a {
			t.Errorf("fingerprint of %q equals that of [POST /x job reason]", other)
		}
	}
	if leaseapi.IdempotencyFingerprint("POST /x", "job", "reason") != a {
		t.Errorf("the fingerprint of one request differs between calls")
	}
}

// quote is key as a structured-field string.
func quote(key string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
}

// FuzzParseIdempotencyKey: any header value is parsed without a panic; a
// key it yields is 1 to 256 printable ASCII characters, a bare value is
// its own key, and the key quoted as a structured-field string (and bare,
// when it does not start with a quote) parses back to itself.
func FuzzParseIdempotencyKey(f *testing.F) {
	for _, s := range []string{"abc", `"abc"`, `"a\"b\\c"`, "", `""`, `"abc`, `"a"b`, `"a\x"`, "clé", strings.Repeat("k", 257)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		key, err := leaseapi.ParseIdempotencyKey(v)
		if err != nil {
			if !errors.Is(err, leaseapi.ErrInvalid) {
				t.Fatalf("ParseIdempotencyKey(%q): error %v is not ErrInvalid", v, err)
			}
			return
		}
		if len(key) < 1 || len(key) > leaseapi.MaxIdempotencyKeyLength {
			t.Fatalf("ParseIdempotencyKey(%q) = %q: length %d", v, key, len(key))
		}
		for _, c := range []byte(key) {
			if c < 0x20 || c > 0x7e {
				t.Fatalf("ParseIdempotencyKey(%q) = %q: byte %#x", v, key, c)
			}
		}
		if !strings.HasPrefix(v, `"`) && key != v {
			t.Fatalf("bare %q parsed as %q", v, key)
		}
		if back, err := leaseapi.ParseIdempotencyKey(quote(key)); err != nil || back != key {
			t.Fatalf("%q quoted as %q parses as %q, %v", key, quote(key), back, err)
		}
		if !strings.HasPrefix(key, `"`) {
			if back, err := leaseapi.ParseIdempotencyKey(key); err != nil || back != key {
				t.Fatalf("bare %q parses as %q, %v", key, back, err)
			}
		}
	})
}
