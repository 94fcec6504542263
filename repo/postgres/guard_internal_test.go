package postgres

import (
	"errors"
	"fmt"
	"testing"

	"github.com/lib/pq"
	"github.com/lib/pq/pqerror"

	"github.com/leaseapi/leaseapi"
)

// The SQLSTATEs of a node that is not a writable primary, and of a lost
// connection, are unavailability, and their connection is not used again.
func TestFailoverCodesAreUnavailableAndCloseTheConnection(t *testing.T) {
	for _, code := range []string{"25006", "55000", "57P01", "57P02", "57P03", "08000", "08006", "08P01"} {
		err := fmt.Errorf("query: %w", &pq.Error{Code: pqerror.Code(code), Message: "x"})
		if !closesConn(err) {
			t.Errorf("%s: closesConn = false, want true", code)
		}
		if got := interpretError("op", err); !errors.Is(got, leaseapi.ErrUnavailable) {
			t.Errorf("%s: interpretError = %v, want ErrUnavailable", code, got)
		}
	}
	for _, code := range []string{"23505", "57014", "40001", "55P03"} {
		if closesConn(&pq.Error{Code: pqerror.Code(code)}) {
			t.Errorf("%s: closesConn = true, want false (the connection is fine)", code)
		}
	}
	if closesConn(errors.New("no SQLSTATE")) {
		t.Error("closesConn of an error without SQLSTATE = true")
	}
}
