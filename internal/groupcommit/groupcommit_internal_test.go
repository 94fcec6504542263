package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

// testBatcher records the batches it runs; the first call blocks until
// release is closed, so that the calls made meanwhile queue.
type testBatcher struct {
	b       *Batcher[string, string]
	mu      sync.Mutex
	batches [][]string
	started chan struct{}
	release chan struct{}
	fail    bool
}

func newTestBatcher() *testBatcher {
	tb := &testBatcher{started: make(chan struct{}), release: make(chan struct{})}
	record := func(keys []string) {
		tb.mu.Lock()
		first := len(tb.batches) == 0
		tb.batches = append(tb.batches, keys)
		tb.mu.Unlock()
		if first {
			close(tb.started)
			<-tb.release
		}
	}
	tb.b = &Batcher[string, string]{
		Max: 64,
		Key: func(s *string) string { return (*s)[:1] },
		Single: func(_ context.Context, s *string) (string, error) {
			record([]string{*s})
			return "one " + *s, nil
		},
		Run: func(_ context.Context, ps []*string) ([]string, []error, error) {
			keys := make([]string, len(ps))
			rows := make([]string, len(ps))
			for i, p := range ps {
				keys[i], rows[i] = *p, "batch "+*p
			}
			record(keys)
			if tb.fail {
				return nil, nil, errors.New("statement failed")
			}
			return rows, make([]error, len(ps)), nil
		},
	}
	return tb
}

// waitQueued waits until n calls queue behind the batch in flight.
func (tb *testBatcher) waitQueued(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		tb.b.mu.Lock()
		q := len(tb.b.queue)
		tb.b.mu.Unlock()
		if q == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("queued calls: want %d", n)
}

func TestBatcherGroupsQueuedCallsOnePerKey(t *testing.T) {
	tb := newTestBatcher()
	ctx := t.Context()
	results := make(map[string]string)
	var mu sync.Mutex
	var wg sync.WaitGroup
	call := func(p string) {
		wg.Go(func() {
			r, err := tb.b.Do(ctx, &p)
			if err != nil {
				t.Errorf("call %s: %v", p, err)
			}
			mu.Lock()
			results[p] = r
			mu.Unlock()
		})
	}
	call("a0")
	<-tb.started
	for i, p := range []string{"b1", "c1", "b2", "d1"} {
		call(p)
		tb.waitQueued(t, i+1) // in this order
	}
	close(tb.release)
	wg.Wait()
	want := [][]string{{"a0"}, {"b1", "c1", "d1"}, {"b2"}}
	if len(tb.batches) != len(want) {
		t.Fatalf("batches: got %v, want %v", tb.batches, want)
	}
	for i := range want {
		if len(tb.batches[i]) != len(want[i]) {
			t.Fatalf("batches: got %v, want %v", tb.batches, want)
		}
		for j := range want[i] {
			if tb.batches[i][j] != want[i][j] {
				t.Fatalf("batches: got %v, want %v", tb.batches, want)
			}
		}
	}
	for p, want := range map[string]string{"a0": "one a0", "b1": "batch b1", "c1": "batch c1", "d1": "batch d1", "b2": "one b2"} {
		if results[p] != want {
			t.Errorf("result of %s: got %q, want %q", p, results[p], want)
		}
	}
}

func TestBatcherDoesNotSendACallWhoseContextEnded(t *testing.T) {
	tb := newTestBatcher()
	done := make(chan struct{})
	go func() {
		defer close(done)
		p := "a0"
		if _, err := tb.b.Do(t.Context(), &p); err != nil {
			t.Errorf("first call: %v", err)
		}
	}()
	<-tb.started
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		p := "b1"
		_, err := tb.b.Do(ctx, &p)
		errc <- err
	}()
	tb.waitQueued(t, 1)
	cancel()
	if err := <-errc; !errors.Is(err, leaseapi.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: got %v, want ErrUnavailable and context.Canceled", err)
	}
	close(tb.release)
	<-done
	if len(tb.batches) != 1 {
		t.Errorf("batches: got %v, want only the first call's", tb.batches)
	}
}

func TestBatcherFailedBatchFailsEveryCall(t *testing.T) {
	tb := newTestBatcher()
	tb.fail = true
	var wg sync.WaitGroup
	errs := make(map[string]error)
	var mu sync.Mutex
	call := func(p string) {
		wg.Go(func() {
			_, err := tb.b.Do(t.Context(), &p)
			mu.Lock()
			errs[p] = err
			mu.Unlock()
		})
	}
	call("a0")
	<-tb.started
	call("b1")
	tb.waitQueued(t, 1)
	call("c1")
	tb.waitQueued(t, 2)
	close(tb.release)
	wg.Wait()
	if errs["a0"] != nil {
		t.Errorf("a0 (alone): %v", errs["a0"])
	}
	for _, p := range []string{"b1", "c1"} {
		if !errors.Is(errs[p], ErrBatchFailed) {
			t.Errorf("%s: got %v, want ErrBatchFailed", p, errs[p])
		}
	}
}

// A call returns when its context ends even while its batch is at the
// database (which is why a batched store call needs no goroutine of its
// own to keep its deadline); the batch goes on, and the batcher serves the
// calls after it.
func TestBatcherCallReturnsAtItsEndWhileItsBatchRuns(t *testing.T) {
	tb := newTestBatcher()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		p := "a0"
		_, err := tb.b.Do(ctx, &p)
		errc <- err
	}()
	<-tb.started // a0's batch is at the database, and stays there
	cancel()
	var err error
	select {
	case err = <-errc:
	case <-time.After(time.Minute): // a liveness bound, not a timing assertion
		close(tb.release)
		t.Fatal("the cancelled call did not return while its batch was at the database")
	}
	if !errors.Is(err, leaseapi.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("call cancelled at the database: got %v, want ErrUnavailable and context.Canceled", err)
	}
	if strings.Contains(err.Error(), "not sent") {
		t.Errorf("call cancelled at the database: %v says it was not sent", err)
	}
	close(tb.release)
	p := "b1"
	got, err := tb.b.Do(t.Context(), &p)
	if err != nil || got != "one b1" {
		t.Fatalf("call after: got %q, %v; want \"one b1\"", got, err)
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if len(tb.batches) != 2 || tb.batches[0][0] != "a0" || tb.batches[1][0] != "b1" {
		t.Errorf("batches: got %v, want [[a0] [b1]]", tb.batches)
	}
}

// DoAll queues its calls together, so that behind a batch in flight they
// go as the next batches (at most Max each, one per key), and answers each
// in its order.
func TestBatcherDoAllQueuesItsCallsTogether(t *testing.T) {
	tb := newTestBatcher()
	tb.b.Max = 2
	first := make(chan error, 1)
	go func() {
		p := "a0"
		_, err := tb.b.Do(t.Context(), &p)
		first <- err
	}()
	<-tb.started
	ps := []string{"b1", "c1", "d1"}
	calls := []*string{&ps[0], &ps[1], &ps[2]}
	done := make(chan struct{})
	var rows []string
	var errs []error
	go func() {
		rows, errs = tb.b.DoAll(t.Context(), calls)
		close(done)
	}()
	tb.waitQueued(t, len(ps))
	close(tb.release)
	<-done
	if err := <-first; err != nil {
		t.Fatalf("a0: %v", err)
	}
	for i, want := range []string{"batch b1", "batch c1", "one d1"} {
		if errs[i] != nil || rows[i] != want {
			t.Errorf("call %d: got %q, %v; want %q", i, rows[i], errs[i], want)
		}
	}
	if got := fmt.Sprint(tb.batches); got != "[[a0] [b1 c1] [d1]]" {
		t.Errorf("batches: got %s, want [[a0] [b1 c1] [d1]]", got)
	}
}
