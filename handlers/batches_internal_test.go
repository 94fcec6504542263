package handlers

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// TestBatchLogsOneUnavailableItem answers every item of a batch with the
// store's ErrUnavailable: each item gets its 503 problem, and the log gets
// one line, as a single call would write, not one per item.
func TestBatchLogsOneUnavailableItem(t *testing.T) {
	var logs bytes.Buffer
	st := &requestState{base: slog.New(slog.NewTextHandler(&logs, nil)), id: "req-1"}
	r := httptest.NewRequest(http.MethodPost, "/acquire", nil)
	r = r.WithContext(context.WithValue(r.Context(), stateKey, st))
	const items = 5
	b := &batch{results: make([]api.BatchResult, items)}
	for i := range b.results {
		b.results[i].JobID = fmt.Sprintf("job-%d", i)
	}
	for i := range items {
		b.answer(r, i, leaseapi.Answer{Err: fmt.Errorf("acquire %q: %w: deadline", b.results[i].JobID, leaseapi.ErrUnavailable)})
	}
	for i, res := range b.results {
		if res.Status != http.StatusServiceUnavailable || res.Problem == nil || res.Problem.Code != api.CodeUnavailable {
			t.Errorf("item %d: status %d, problem %+v; want 503 unavailable", i, res.Status, res.Problem)
		}
	}
	if n := strings.Count(logs.String(), `msg="store unavailable"`); n != 1 {
		t.Errorf("%d log lines for %d unavailable items, want 1:\n%s", n, items, logs.String())
	}
	if !strings.Contains(logs.String(), "request_id=req-1") {
		t.Errorf("the line lacks the request id:\n%s", logs.String())
	}
}
