package leaseapi_test

import (
	"regexp"
	"strings"
	"testing"

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
