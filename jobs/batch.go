package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api/client"
	"github.com/leaseapi/leaseapi/internal/groupcommit"
)

// Batches. The acquires of the jobs that fire at one tick, and the
// heartbeats of the runs in flight, go to leaseapi as one POST /acquire or
// POST /heartbeat, group commit as the server's store does it: while a
// batch is at the server, further calls queue; when it returns, the queued
// ones go as the next batch (at most leaseapi.MaxBatchItems, one per job:
// a second call for a job already in the batch waits for the next one).
// There is no timer: under light load every call goes alone, at once, as
// its single call. Each caller gets what its single call would have
// returned: the item's status and problem are read by the code that reads
// a single call's answer (responseError).

// errNoBatchRoute: the server answered a batch 404 or 405, so it is older
// than the batch routes; the runner sends single calls from then on.
var errNoBatchRoute = errors.New("leaseapi offers no batch route")

// callResult is the answer to one acquire or heartbeat.
type callResult struct {
	lease leaseapi.Lease
	err   error
}

// batched sends the calls of one kind (acquires or heartbeats) through
// group commit (groupcommit.Batcher). P is a call's request, key its job
// id. single makes one call alone, many the calls of a batch of two or
// more as one request: it returns one result per call, or
// errNoBatchRoute.
type batched[P any] struct {
	kind   string // "acquire" or "heartbeat", for the log
	key    func(*P) string
	single func(context.Context, *P) (leaseapi.Lease, error)
	many   func(context.Context, []*P) ([]callResult, error)
	logger *slog.Logger

	// off: the server has no batch route (or batches are turned off);
	// every call goes single, at once.
	off     atomic.Bool
	batcher groupcommit.Batcher[P, leaseapi.Lease]
}

func newBatched[P any](kind string, key func(*P) string, single func(context.Context, *P) (leaseapi.Lease, error),
	many func(context.Context, []*P) ([]callResult, error), logger *slog.Logger, off bool) *batched[P] {
	b := &batched[P]{kind: kind, key: key, single: single, many: many, logger: logger}
	b.off.Store(off)
	b.batcher = groupcommit.Batcher[P, leaseapi.Lease]{Key: key, Max: leaseapi.MaxBatchItems, Single: single, Run: b.run}
	return b
}

// do makes the call p, in the next batch unless batches are off, and
// returns its answer by the end of ctx (groupcommit.Batcher.Do): a call
// whose batch is at the server then returns ErrUnavailable, its outcome
// unknown, as a single call's that timed out. A call of a batch the server
// could not take is made again alone.
func (b *batched[P]) do(ctx context.Context, p *P) (leaseapi.Lease, error) {
	if b.off.Load() {
		return b.single(ctx, p)
	}
	l, err := b.batcher.Do(ctx, p)
	if errors.Is(err, groupcommit.ErrBatchFailed) {
		return b.single(ctx, p)
	}
	if err != nil && ctx.Err() != nil {
		return l, fmt.Errorf("%s %q: %w", b.kind, b.key(p), err)
	}
	return l, err
}

// run sends a batch of two or more as one request; when the server has no
// batch route, it turns batches off for good.
func (b *batched[P]) run(ctx context.Context, ps []*P) ([]leaseapi.Lease, []error, error) {
	got, err := b.many(ctx, ps)
	if err != nil {
		if b.off.CompareAndSwap(false, true) {
			b.logger.Info("leaseapi has no batch route; sending single calls from now on",
				slog.String("kind", b.kind), slog.Any("error", err))
		}
		return nil, nil, err
	}
	leases, errs := make([]leaseapi.Lease, len(got)), make([]error, len(got))
	for i, r := range got {
		leases[i], errs[i] = r.lease, r.err
	}
	return leases, errs, nil
}

// rawBatchClient is what *client.ClientWithResponses also offers: the
// batch routes with the answer unparsed, so that one item the generated
// client cannot read costs the others nothing.
type rawBatchClient interface {
	AcquireBatch(ctx context.Context, body client.AcquireBatchJSONRequestBody, reqEditors ...client.RequestEditorFn) (*http.Response, error)
	HeartbeatBatch(ctx context.Context, body client.HeartbeatBatchJSONRequestBody, reqEditors ...client.RequestEditorFn) (*http.Response, error)
}

// postAcquireBatch sends the acquires as (one POST /acquire, all of one
// owner and TTL) and returns each one's answer as postAcquire would.
func postAcquireBatch(ctx context.Context, c leaseClient, as []*acquireRequest) ([]callResult, error) {
	ttlMs := as[0].ttl.Milliseconds()
	owner := as[0].owner
	body := client.AcquireBatchRequest{Owner: &owner, TtlMs: &ttlMs, Items: make([]client.AcquireBatchItem, len(as))}
	for i, a := range as {
		f := a.fields()
		item := client.AcquireBatchItem{
			JobId: a.jobID, Tick: f.Tick, Schedule: f.Schedule, GraceMs: f.GraceMs,
			CatchUpWindowMs: f.CatchUpWindowMs, Group: f.Group, MinIntervalMs: f.MinIntervalMs,
		}
		if a.owner != owner {
			item.Owner = &a.owner
		}
		if ms := a.ttl.Milliseconds(); ms != ttlMs {
			item.TtlMs = &ms
		}
		if f.CatchUp != nil {
			policy := client.AcquireBatchItemCatchUp(*f.CatchUp)
			item.CatchUp = &policy
		}
		body.Items[i] = item
	}
	var resp *http.Response
	var answer []byte
	var err error
	if rc, ok := c.(rawBatchClient); ok {
		resp, answer, err = readAnswer(rc.AcquireBatch(ctx, body))
	} else {
		var r *client.AcquireBatchResponse
		if r, err = c.AcquireBatchWithResponse(ctx, body); err == nil {
			resp, answer = r.HTTPResponse, r.Body
		}
	}
	return batchResults(resp, answer, err, len(as), func(i int) string { return as[i].jobID },
		func(i int, err error) error { return acquireError(as[i], err) })
}

// postHeartbeatBatch sends the heartbeats hs (one POST /heartbeat) and
// returns each one's answer as postHeartbeat would.
func postHeartbeatBatch(ctx context.Context, c leaseClient, hs []*heartbeatRequest) ([]callResult, error) {
	ttlMs := hs[0].ttl.Milliseconds()
	owner := hs[0].owner
	body := client.HeartbeatBatchRequest{Owner: &owner, TtlMs: &ttlMs, Items: make([]client.HeartbeatBatchItem, len(hs))}
	for i, h := range hs {
		item := client.HeartbeatBatchItem{JobId: h.jobID, Token: h.token}
		if h.owner != owner {
			item.Owner = &h.owner
		}
		if ms := h.ttl.Milliseconds(); ms != ttlMs {
			item.TtlMs = &ms
		}
		body.Items[i] = item
	}
	var resp *http.Response
	var answer []byte
	var err error
	if rc, ok := c.(rawBatchClient); ok {
		resp, answer, err = readAnswer(rc.HeartbeatBatch(ctx, body))
	} else {
		var r *client.HeartbeatBatchResponse
		if r, err = c.HeartbeatBatchWithResponse(ctx, body); err == nil {
			resp, answer = r.HTTPResponse, r.Body
		}
	}
	return batchResults(resp, answer, err, len(hs), func(i int) string { return hs[i].jobID },
		func(i int, err error) error { return fmt.Errorf("heartbeat %q: %w", hs[i].jobID, err) })
}

// readAnswer reads the body of resp (at most a batch's answer can hold).
func readAnswer(resp *http.Response, err error) (*http.Response, []byte, error) {
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBatchAnswerBytes))
	return resp, body, err
}

// maxBatchAnswerBytes bounds the answer to a batch read: 1,000 results
// with a lease or a problem of at most a few KiB each.
const maxBatchAnswerBytes = 16 << 20

// batchResult is one result of a batch as read from the wire: the lease
// and the problem are read by the single calls' code.
type batchResult struct {
	JobID   string          `json:"jobId"`
	Status  int             `json:"status"`
	Lease   json.RawMessage `json:"lease"`
	Problem json.RawMessage `json:"problem"`
	// RetryAfter is the single call's Retry-After in seconds, 0 for none.
	RetryAfter int `json:"retryAfter"`
}

// batchResults turns the answer to a batch of n calls (resp with body, or
// the transport error err) into each call's result. jobID names call i;
// refused wraps the error of call i as its single call does. A server
// without the batch route yields errNoBatchRoute.
func batchResults(resp *http.Response, body []byte, err error, n int, jobID func(int) string, refused func(int, error) error) ([]callResult, error) {
	results := make([]callResult, n)
	unavailable := func(err error) []callResult {
		for i := range results {
			results[i].err = refused(i, fmt.Errorf("%w: %w", leaseapi.ErrUnavailable, err))
		}
		return results
	}
	if err != nil {
		return unavailable(err), nil
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		// A batch never answers 404 as a whole (an unknown job is one
		// item's 404): the route itself is missing.
		return nil, fmt.Errorf("%w: the batch answered %d", errNoBatchRoute, resp.StatusCode)
	default:
		// The request as a whole was refused (all items unavailable,
		// unauthorized, ...): every call gets that refusal.
		whole := responseError(resp, body)
		for i := range results {
			results[i].err = refused(i, whole)
		}
		return results, nil
	}
	var answer struct {
		Results []batchResult `json:"results"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return unavailable(fmt.Errorf("an answer the client cannot read: %w", err)), nil
	}
	if len(answer.Results) != n {
		return unavailable(fmt.Errorf("an answer of %d results to %d items", len(answer.Results), n)), nil
	}
	for i, res := range answer.Results {
		switch {
		case res.JobID != jobID(i):
			results[i].err = refused(i, fmt.Errorf("%w: result %d is of job %q", leaseapi.ErrUnavailable, i, res.JobID))
		case res.Status == http.StatusOK:
			var l client.Lease
			if string(res.Lease) == "null" || len(res.Lease) == 0 {
				err = errors.New("no lease")
			} else {
				err = json.Unmarshal(res.Lease, &l)
			}
			if err != nil {
				results[i].err = refused(i, fmt.Errorf("%w: a lease the client cannot read: %w", leaseapi.ErrUnavailable, err))
				continue
			}
			results[i].lease = fromWire(l)
		default:
			results[i].err = refused(i, problemError(res.Status, time.Duration(max(res.RetryAfter, 0))*time.Second, res.Problem))
		}
	}
	return results, nil
}
