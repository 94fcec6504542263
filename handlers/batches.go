package handlers

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// A batch (POST /acquire, POST /heartbeat) answers each item as its single
// call would be answered: the same validation, scopes and rate, the same
// store decision, the same status and body, here one result per item in
// item order. What only the request as a whole can get wrong (its JSON, the
// number of items, an invalid or repeated jobId) is a 400 for the whole
// request; a 503 answers the whole request only when every item's answer
// would be 503.

func (h *handler) acquireBatch(w http.ResponseWriter, r *http.Request) {
	release, err := h.acquireTurns.take(r.Context(), principalFrom(r.Context()).key())
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	defer release()
	var req api.AcquireBatchRequest
	b, err := h.decodeBatch(w, r, &req, func() int { return len(req.Items) }, func(i int) string { return req.Items[i].JobID })
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	h.limitItems(r, b)
	ps, sent := parseItems(r, b, func(i int) (*leaseapi.AcquireParams, error) {
		q := req.Request(i)
		return h.acquireRequestParams(r, req.Items[i].JobID, &q)
	})
	answers := h.callBatch(r.Context(), "acquire_batch", len(ps), func(ctx context.Context) []leaseapi.Answer {
		return h.store.AcquireBatch(ctx, ps)
	})
	for k, i := range sent {
		a := answers[k]
		h.metrics.acquires.WithLabelValues(acquireResult(a.Lease, a.Err)).Inc()
		h.metrics.countGroupFull(a.Err)
		if a.Err == nil {
			h.observeTickStart(a.Lease)
		}
		b.answer(r, i, a)
	}
	b.write(w, r)
}

func (h *handler) heartbeatBatch(w http.ResponseWriter, r *http.Request) {
	release, err := h.heartbeatTurns.take(r.Context(), principalFrom(r.Context()).key())
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	defer release()
	var req api.HeartbeatBatchRequest
	b, err := h.decodeBatch(w, r, &req, func() int { return len(req.Items) }, func(i int) string { return req.Items[i].JobID })
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	ps, sent := parseItems(r, b, func(i int) (*leaseapi.HeartbeatParams, error) {
		q := req.Request(i)
		return h.heartbeatRequestParams(req.Items[i].JobID, &q)
	})
	answers := h.callBatch(r.Context(), "heartbeat_batch", len(ps), func(ctx context.Context) []leaseapi.Answer {
		return h.store.HeartbeatBatch(ctx, ps)
	})
	for k, i := range sent {
		h.metrics.heartbeats.WithLabelValues(holderResult(answers[k].Err)).Inc()
		b.answer(r, i, answers[k])
	}
	b.write(w, r)
}

// decodeBatch decodes the body of a batch into req, whose items n counts
// and jobID names, refuses what no item can be answered for (1 to
// leaseapi.MaxBatchItems items, each with a valid jobId given once), and
// returns the batch of its items' results.
func (h *handler) decodeBatch(w http.ResponseWriter, r *http.Request, req any, n func() int, jobID func(int) string) (*batch, error) {
	if _, err := query(r); err != nil {
		return nil, err
	}
	if err := decodeBodyUpTo(w, r, req, api.MaxBatchBodyBytes); err != nil {
		return nil, err
	}
	if n() == 0 {
		return nil, invalidf("items must hold 1 to %d items, one per job", leaseapi.MaxBatchItems)
	}
	b := &batch{results: make([]api.BatchResult, n())}
	seen := make(map[string]int, n())
	for i := range b.results {
		id := jobID(i)
		if err := leaseapi.ValidateJobID(id); err != nil {
			return nil, invalidf("items[%d].jobId: %v", i, err)
		}
		if j, ok := seen[id]; ok {
			return nil, invalidf("items[%d] and items[%d] are both job %s; send each job once per batch", j, i, clip(id))
		}
		seen[id] = i
		b.results[i].JobID = id
	}
	return b, nil
}

// parseItems makes the params of each item of b not answered yet with
// parse, after the item's scope, as a single call's are made after
// authorize; an item refused is answered with its problem. It returns the
// params and the indexes of their items.
func parseItems[P any](r *http.Request, b *batch, parse func(i int) (P, error)) (ps []P, sent []int) {
	for i := range b.results {
		if b.answered(i) {
			continue
		}
		if err := itemInScope(r, b.results[i].JobID); err != nil {
			b.fail(r, i, err)
			continue
		}
		p, err := parse(i)
		if err != nil {
			b.fail(r, i, err)
			continue
		}
		ps, sent = append(ps, p), append(sent, i)
	}
	return ps, sent
}

// itemInScope is the 403 of an item whose job lies outside the caller's
// scopes: what authorize answers a single call naming that job in its path.
func itemInScope(r *http.Request, jobID string) error {
	if p := principalFrom(r.Context()); !p.inScope(jobID) {
		return outOfScope(p, "job", jobID)
	}
	return nil
}

// callBatch makes the store call of a batch of n calls, as call makes a
// single one; a batch of none is not made.
func (h *handler) callBatch(ctx context.Context, op string, n int, fn func(context.Context) []leaseapi.Answer) []leaseapi.Answer {
	if n == 0 {
		return nil
	}
	answers, _ := call(ctx, h.metrics, op, func(ctx context.Context) ([]leaseapi.Answer, error) { return fn(ctx), nil })
	return answers
}

// limitItems spends one call of the caller's rate per item, in item order:
// the items beyond what its bucket holds are answered 429.
func (h *handler) limitItems(r *http.Request, b *batch) {
	p := principalFrom(r.Context())
	if p.open {
		return
	}
	allowed, wait := h.limits.takeUpTo("credential:"+p.key(), p.rate, len(b.results))
	for i := allowed; i < len(b.results); i++ {
		b.fail(r, i, rateLimited(wait))
	}
}

// batch holds the results of a batch while its items are answered.
type batch struct {
	results []api.BatchResult
	// unavailable is the first item's error while every item answered
	// so far is a 503.
	unavailable error
	// quiet is the request without its logger, for the problems of the
	// items unavailable after the first (which is logged, as a single
	// call's would be): a batch that misses its deadline would otherwise
	// log a line per item, up to 1,000, just when the instance is short
	// of CPU.
	quiet *http.Request
}

func (b *batch) answered(i int) bool { return b.results[i].Status != 0 }

// fail answers item i with the problem of err.
func (b *batch) fail(r *http.Request, i int, err error) {
	if errors.Is(err, leaseapi.ErrUnavailable) {
		if b.quiet != nil {
			r = b.quiet
		} else {
			b.quiet = r.WithContext(context.Background())
		}
	}
	p, retry, header := problemOf(r, err)
	if retry == "" {
		retry = header.Get("Retry-After")
	}
	b.results[i].Status, b.results[i].Problem = p.Status, &p
	if s, err := strconv.Atoi(retry); err == nil {
		b.results[i].RetryAfter = &s
	}
}

// answer answers item i with the store's answer a.
func (b *batch) answer(r *http.Request, i int, a leaseapi.Answer) {
	if a.Err != nil {
		b.fail(r, i, a.Err)
		if b.unavailable == nil && b.results[i].Status == http.StatusServiceUnavailable {
			b.unavailable = a.Err
		}
		return
	}
	l := api.FromLease(a.Lease)
	b.results[i].Status, b.results[i].Lease = http.StatusOK, &l
}

// write writes the results, or, when every item is answered 503, the
// problem of the first as the request's own.
func (b *batch) write(w http.ResponseWriter, r *http.Request) {
	if b.unavailable != nil && !slices.ContainsFunc(b.results, func(res api.BatchResult) bool { return res.Status != http.StatusServiceUnavailable }) {
		writeProblem(w, r, b.unavailable)
		return
	}
	buf := responseBuffers.Get().(*[]byte)
	defer responseBuffers.Put(buf)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	// Written in pieces of about batchChunk bytes, so that the answer to a
	// batch holds no more than that at once.
	body := append((*buf)[:0], `{"results":[`...)
	for i, res := range b.results {
		if i > 0 {
			body = append(body, ',')
		}
		body = res.AppendJSON(body)
		if len(body) >= batchChunk {
			if _, err := w.Write(body); err != nil {
				return
			}
			body = body[:0]
		}
	}
	body = append(body, "]}"...)
	_, _ = w.Write(body)
	*buf = body
}

// batchChunk is the size of the pieces a batch's answer is written in.
const batchChunk = 16 << 10

// takeUpTo spends up to n calls of key's bucket at perSecond (nil: the
// default), as many as it holds, and returns how many it spent and, when
// fewer than n, how long until the next call would be allowed.
func (l *rateLimiters) takeUpTo(key string, perSecond *float64, n int) (int, time.Duration) {
	lim := l.limiter(key, perSecond)
	if lim == nil {
		return n, 0
	}
	now := time.Now()
	k := min(n, int(lim.TokensAt(now)))
	if k > 0 {
		if res := lim.ReserveN(now, k); res.DelayFrom(now) > 0 {
			res.CancelAt(now) // spent meanwhile by a concurrent call
			k = 0
		}
	}
	if k == n {
		return n, 0
	}
	return k, max(time.Second/time.Duration(max(1, int(lim.Limit()))), time.Millisecond)
}
