package handlers

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/leaseapi/leaseapi"
)

// Exported for the external tests (package handlers_test) only.
var (
	WriteProblem = writeProblem
	RetryAfter   = retryAfter
)

// NewWithExtraRoute is New with one more GET route, through the same
// middleware, for testing the middleware itself (a handler that panics).
func NewWithExtraRoute(store leaseapi.Store, opts Options, pattern string, fn http.HandlerFunc) http.Handler {
	h := New(store, opts)
	h.(*chi.Mux).Get(pattern, fn)
	return h
}
