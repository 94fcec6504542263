package handlers_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/handlers"
)

// gatedStore grants every acquire and heartbeat of a batch; its acquire
// batches wait, each, until gate lets one through or closes, or their
// context ends, and send their first item's owner to entered. deadlines
// receives each call's time left.
type gatedStore struct {
	leaseapi.Store
	gate      chan struct{}
	entered   chan string
	calls     atomic.Int64
	deadlines chan time.Duration
}

func (s *gatedStore) left(ctx context.Context) {
	if s.deadlines == nil {
		return
	}
	d, ok := ctx.Deadline()
	if !ok {
		d = time.Now().Add(24 * time.Hour)
	}
	s.deadlines <- time.Until(d)
}

func (s *gatedStore) Acquire(ctx context.Context, p *leaseapi.AcquireParams) (leaseapi.Lease, error) {
	s.left(ctx)
	return grantStore{}.Acquire(ctx, p)
}

func (s *gatedStore) AcquireBatch(ctx context.Context, ps []*leaseapi.AcquireParams) []leaseapi.Answer {
	s.calls.Add(1)
	s.left(ctx)
	if s.entered != nil {
		s.entered <- ps[0].Owner
	}
	out := make([]leaseapi.Answer, len(ps))
	select {
	case <-s.gate:
	case <-ctx.Done():
		for i := range out {
			out[i].Err = leaseapi.ErrUnavailable
		}
		return out
	}
	for i, p := range ps {
		out[i].Lease, out[i].Err = grantStore{}.Acquire(ctx, p)
	}
	return out
}

func (s *gatedStore) HeartbeatBatch(ctx context.Context, ps []*leaseapi.HeartbeatParams) []leaseapi.Answer {
	s.left(ctx)
	out := make([]leaseapi.Answer, len(ps))
	now := time.Now()
	for i, p := range ps {
		out[i].Lease = leaseapi.Lease{JobID: p.JobID, Owner: p.Owner, Token: p.Token, State: leaseapi.StateHeld,
			AcquiredAt: now, RenewedAt: now, ExpiresAt: now.Add(time.Minute), TTL: time.Minute}
	}
	return out
}

func serveBatch(t *testing.T, h http.Handler, ctx context.Context, path, body string) (int, string) {
	t.Helper()
	return serveBatchAs(t, h, ctx, "", path, body)
}

// serveBatchAs is serveBatch with a bearer token, unless token is "".
func serveBatchAs(t *testing.T, h http.Handler, ctx context.Context, token, path, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

const (
	oneAcquire   = `{"owner":"replica-1","items":[{"jobId":"job-1"}]}`
	oneHeartbeat = `{"owner":"replica-1","items":[{"jobId":"job-1","token":3}]}`
)

// TestBatchDeadline: a batch is bounded by BatchTimeout, a single call by
// RequestTimeout.
func TestBatchDeadline(t *testing.T) {
	const request, batch = 200 * time.Millisecond, time.Hour
	store := &gatedStore{gate: make(chan struct{}), deadlines: make(chan time.Duration, 1)}
	close(store.gate)
	h := handlers.New(store, handlers.Options{Open: true, RequestTimeout: request, BatchTimeout: batch,
		Logger: slog.New(slog.NewTextHandler(discard{}, nil))})
	for _, c := range []struct {
		path, body string
		want       time.Duration
	}{
		{"/leases/job-1/acquire", `{"owner":"replica-1"}`, request},
		{"/acquire", oneAcquire, batch},
		{"/heartbeat", oneHeartbeat, batch},
	} {
		if code, body := serveBatch(t, h, context.Background(), c.path, c.body); code != http.StatusOK {
			t.Fatalf("POST %s: %d %s", c.path, code, body)
		}
		// The deadline is the configured one, less what passed before the
		// store was called: more than half of it, and never more.
		if left := <-store.deadlines; left > c.want || left < c.want/2 {
			t.Errorf("POST %s: the store call had %s left, want the deadline %s", c.path, left, c.want)
		}
	}
}

// TestBatchTurns: while as many acquire batches as an instance answers at
// once wait for the store, a further one waits its turn, undecided, and
// is answered 503 overloaded when its deadline passes; heartbeat batches are answered
// meanwhile; and the waiting batches are all answered once the store is.
func TestBatchTurns(t *testing.T) {
	turns := handlers.BatchTurns()
	store := &gatedStore{gate: make(chan struct{}), entered: make(chan string, turns+1)}
	h, waiting := handlers.NewWithTurns(store, handlers.Options{Open: true, BatchTimeout: time.Hour,
		Logger: slog.New(slog.NewTextHandler(discard{}, nil))})

	var wg sync.WaitGroup
	codes := make([]int, turns)
	for i := range turns {
		wg.Go(func() { codes[i], _ = serveBatch(t, h, context.Background(), "/acquire", oneAcquire) })
	}
	for range turns {
		<-store.entered
	}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	code, body := serveBatch(t, h, ctx, "/acquire", oneAcquire)
	var p api.Problem
	if err := json.Unmarshal([]byte(body), &p); err != nil || code != http.StatusServiceUnavailable || p.Code != api.CodeOverloaded {
		t.Errorf("an acquire batch past %d waiting ones, at its deadline: %d %s, want 503 overloaded", turns, code, body)
	}
	if n := store.calls.Load(); n != int64(turns) {
		t.Errorf("the store decided %d acquire batches, want the %d that had a turn", n, turns)
	}
	if w := waiting(); len(w) != 0 {
		t.Errorf("after the waiting batch's deadline, still waiting: %v, want none", w)
	}

	hctx, hcancel := context.WithTimeout(context.Background(), 10*time.Second) // bounds a heartbeat that waits a turn
	defer hcancel()
	if code, body := serveBatch(t, h, hctx, "/heartbeat", oneHeartbeat); code != http.StatusOK {
		t.Errorf("a heartbeat batch while acquire batches wait: %d %s, want 200", code, body)
	}

	close(store.gate)
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("waiting acquire batch %d: %d, want 200", i, c)
		}
	}
	if code, body := serveBatch(t, h, context.Background(), "/acquire", oneAcquire); code != http.StatusOK {
		t.Errorf("an acquire batch after the others: %d %s, want 200", code, body)
	}
}

// TestBatchTurnsRoundRobin: a freed turn goes to the credentials waiting in
// round robin, each credential's batches in their order of arrival, so a
// team's batch arriving behind another team's waiting herd is answered
// after one of the herd's batches, not after all of them.
func TestBatchTurnsRoundRobin(t *testing.T) {
	turns := handlers.BatchTurns()
	store := &gatedStore{gate: make(chan struct{}), entered: make(chan string, turns+3)}
	h, waiting := handlers.NewWithTurns(store, handlers.Options{APITokens: []string{"token-a", "token-b"},
		BatchTimeout: time.Hour, Logger: slog.New(slog.NewTextHandler(discard{}, nil))})
	const a, b = "api-token-1", "api-token-2" // the configured tokens' credentials
	body := func(owner string) string { return `{"owner":"` + owner + `","items":[{"jobId":"job-1"}]}` }

	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(store.gate) // lets every batch through if the test stops early
	send := func(token, owner string) {
		wg.Go(func() {
			if code, resp := serveBatchAs(t, h, context.Background(), token, "/acquire", body(owner)); code != http.StatusOK {
				t.Errorf("%s's batch: %d %s, want 200", owner, code, resp)
			}
		})
	}
	// awaitWaiting waits, bounded, until key has n batches waiting.
	awaitWaiting := func(key string, n int) {
		t.Helper()
		for range 10000 {
			if waiting()[key] == n {
				return
			}
			time.Sleep(time.Millisecond)
		}
		t.Fatalf("%s has %d batches waiting for a turn, want %d", key, waiting()[key], n)
	}

	for range turns {
		send("token-a", "a")
	}
	for range turns {
		if owner := <-store.entered; owner != "a" {
			t.Fatalf("a batch of %s entered the store, want a's", owner)
		}
	}
	send("token-a", "a-queued-1")
	awaitWaiting(a, 1)
	send("token-a", "a-queued-2")
	awaitWaiting(a, 2)
	send("token-b", "b")
	awaitWaiting(b, 1)

	var order []string
	for range 3 {
		store.gate <- struct{}{} // one batch in the store is answered: a turn frees
		order = append(order, <-store.entered)
	}
	if want := []string{"a-queued-1", "b", "a-queued-2"}; !slices.Equal(order, want) {
		t.Errorf("the waiting batches had their turns in the order %v, want %v", order, want)
	}
}
