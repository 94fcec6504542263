package jobs

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/api/client"
)

// TestOwedUnreadableTick: an owed tick the client cannot represent (year
// 10000, text that is not a time) is skipped with an error naming its job;
// the other jobs' owed ticks are returned.
func TestOwedUnreadableTick(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"owed":[` +
			`{"jobId":"a","tick":"0000-01-01T00:00:00.000Z","reason":"manual","triggeredBy":"ops","triggerReason":null},` +
			`{"jobId":"b","tick":"10000-01-01T00:00:00.000Z","reason":"manual","triggeredBy":null,"triggerReason":null},` +
			`{"jobId":"c","tick":"2026-12-01T07:00:00.000Z","reason":"catch-up","triggeredBy":null,"triggerReason":null},` +
			`{"jobId":"d","tick":"garbage","reason":"manual","triggeredBy":null,"triggerReason":null}]}`))
	}))
	t.Cleanup(srv.Close)
	c, err := client.NewClientWithResponses(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	owed, skipped, err := postOwed(t.Context(), c, []string{"a", "b", "c", "d"})
	if err != nil {
		t.Fatalf("postOwed: %v", err)
	}
	if len(owed) != 2 || owed[0].JobID != "a" || owed[1].JobID != "c" ||
		!owed[1].Tick.Equal(time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)) || owed[0].TriggeredBy != "ops" {
		t.Errorf("owed = %+v, want a and c", owed)
	}
	if len(skipped) != 2 || !strings.Contains(skipped[0].Error(), `"b"`) || !strings.Contains(skipped[1].Error(), `"d"`) {
		t.Errorf("skipped = %v, want b and d", skipped)
	}
}

// TestProblemOfALaterRelease: a problem with a code this release does not
// know is read by its status: a 409 is an *APIError with the status and
// the code, neither skipped nor retried; a 429 or a 503 is retried after
// its Retry-After like the codes the runner knows.
func TestProblemOfALaterRelease(t *testing.T) {
	t.Parallel()
	body := func(status int, code string) []byte {
		return []byte(`{"type":"https://leaseapi.dev/problems/` + code + `","title":"New","status":` + strconv.Itoa(status) +
			`,"detail":"d","code":"` + code + `","someNewField":1}`)
	}
	for _, tt := range []struct {
		status    int
		retryable bool
	}{
		{http.StatusBadRequest, false},
		{http.StatusConflict, false},
		{http.StatusTooManyRequests, true},
		{http.StatusServiceUnavailable, true},
	} {
		err := problemError(tt.status, 2*time.Second, body(tt.status, "some_new_code"))
		apiErr, ok := errors.AsType[*APIError](err)
		if !ok || apiErr.StatusCode != tt.status || apiErr.Code != "some_new_code" || apiErr.RetryAfter != 2*time.Second {
			t.Errorf("%d some_new_code: got %#v, want an *APIError with the status, the code and Retry-After", tt.status, err)
			continue
		}
		if retryable(err) != tt.retryable || Skipped(err) {
			t.Errorf("%d some_new_code: retryable %v, skipped %v; want retryable %v, not skipped", tt.status, retryable(err), Skipped(err), tt.retryable)
		}
	}
}
