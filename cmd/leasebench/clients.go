package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/handlers"
)

// result classifies one operation's answer.
type result int

const (
	resultOK          result = iota // 200
	resultConflict                  // 409: lease_held, tick_done, lease_lost
	resultUnavailable               // 5xx, or ErrUnavailable from the store
	resultFailed                    // anything else: a transport error, an unexpected 4xx
)

// client is what a scenario does, either on the store directly (the floor)
// or over HTTP against a leaseapi process.
type client interface {
	acquire(ctx context.Context, jobID, owner string, tick *time.Time, ttl time.Duration) (token int64, r result, err error)
	// acquireBatch acquires every job of jobIDs for owner in one batch
	// (POST /acquire, Store.AcquireBatch) and classifies each item's answer
	// in item order; err is an item's unexpected error, or the request's.
	acquireBatch(ctx context.Context, jobIDs []string, owner string, tick *time.Time, ttl time.Duration) (rs []result, err error)
	heartbeat(ctx context.Context, jobID, owner string, token int64) (result, error)
	release(ctx context.Context, jobID, owner string, token int64) (result, error)
	// list reads one page of up to limit leases after the job id after. With
	// wantNext it returns the job id the next page starts after ("" at the end).
	list(ctx context.Context, after string, limit int, wantNext bool) (next string, r result, err error)
	// inGroups returns a client whose acquires put each job in the
	// concurrency group groupOf names for it ("" for none).
	inGroups(groupOf func(jobID string) string) client
}

// callTimeout is the deadline of one call, as the server's default
// LEASEAPI_REQUEST_TIMEOUT gives every request; batchTimeout that of a
// batch, as its default LEASEAPI_BATCH_TIMEOUT.
const (
	callTimeout  = handlers.DefaultRequestTimeout
	batchTimeout = handlers.DefaultBatchTimeout
)

// storeClient calls a leaseapi.Store as the handlers do, with the same
// per-call deadline, but without HTTP.
type storeClient struct {
	store   leaseapi.Store
	groupOf func(jobID string) string // nil: no job in a group
}

func (c storeClient) inGroups(groupOf func(jobID string) string) client {
	c.groupOf = groupOf
	return c
}

func (c storeClient) acquire(ctx context.Context, jobID, owner string, tick *time.Time, ttl time.Duration) (int64, result, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	p := &leaseapi.AcquireParams{JobID: jobID, Owner: owner, TTL: ttl, Tick: tick}
	if c.groupOf != nil {
		if g := c.groupOf(jobID); g != "" {
			p.Group = &g
		}
	}
	l, err := c.store.Acquire(ctx, p)
	r, err := classify(err)
	return l.Token, r, err
}

func (c storeClient) acquireBatch(ctx context.Context, jobIDs []string, owner string, tick *time.Time, ttl time.Duration) ([]result, error) {
	ctx, cancel := context.WithTimeout(ctx, batchTimeout)
	defer cancel()
	ps := make([]*leaseapi.AcquireParams, len(jobIDs))
	for i, job := range jobIDs {
		ps[i] = &leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: ttl, Tick: tick}
	}
	rs := make([]result, len(ps))
	var first error
	for i, a := range c.store.AcquireBatch(ctx, ps) {
		var err error
		rs[i], err = classify(a.Err)
		if first == nil && err != nil {
			first = fmt.Errorf("%s: %w", jobIDs[i], err)
		}
	}
	return rs, first
}

func (c storeClient) heartbeat(ctx context.Context, jobID, owner string, token int64) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := c.store.Heartbeat(ctx, &leaseapi.HeartbeatParams{JobID: jobID, Owner: owner, Token: token})
	return classify(err)
}

func (c storeClient) release(ctx context.Context, jobID, owner string, token int64) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := c.store.Release(ctx, &leaseapi.ReleaseParams{JobID: jobID, Owner: owner, Token: token, Outcome: leaseapi.OutcomeSucceeded})
	return classify(err)
}

func (c storeClient) list(ctx context.Context, after string, limit int, _ bool) (string, result, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	page, err := c.store.List(ctx, &leaseapi.ListParams{After: after, Limit: limit})
	r, err := classify(err)
	if err != nil || !page.More || len(page.Leases) == 0 {
		return "", r, err
	}
	return page.Leases[len(page.Leases)-1].JobID, r, nil
}

func classify(err error) (result, error) {
	var conflict *leaseapi.ConflictError
	switch {
	case err == nil:
		return resultOK, nil
	case errors.As(err, &conflict):
		return resultConflict, nil
	case errors.Is(err, leaseapi.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return resultUnavailable, err
	default:
		return resultFailed, err
	}
}

// httpClient calls a leaseapi server over keep-alive connections.
type httpClient struct {
	base    string
	http    *http.Client
	groupOf func(jobID string) string // nil: no job in a group
}

// newHTTPClient returns a client whose transport keeps up to idle
// connections to the server open, so that every worker reuses its own.
func newHTTPClient(base string, idle int) *httpClient {
	tr := &http.Transport{
		MaxIdleConns:        idle,
		MaxIdleConnsPerHost: idle,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &httpClient{base: base, http: &http.Client{Transport: tr, Timeout: batchTimeout + 5*time.Second}}
}

func (c *httpClient) close() {
	c.http.CloseIdleConnections()
}

// inGroups returns a client on c's connections.
func (c *httpClient) inGroups(groupOf func(jobID string) string) client {
	return &httpClient{base: c.base, http: c.http, groupOf: groupOf}
}

// wireTime is the wire format of times (api/openapi.yaml: RFC 3339, milliseconds, UTC).
const wireTime = "2006-01-02T15:04:05.000Z"

func (c *httpClient) acquire(ctx context.Context, jobID, owner string, tick *time.Time, ttl time.Duration) (int64, result, error) {
	body := fmt.Appendf(nil, `{"owner":%q,"ttlMs":%d`, owner, ttl.Milliseconds())
	if tick != nil {
		body = fmt.Appendf(body, `,"tick":%q`, tick.UTC().Format(wireTime))
	}
	if c.groupOf != nil {
		if g := c.groupOf(jobID); g != "" {
			body = fmt.Appendf(body, `,"group":%q`, g)
		}
	}
	body = append(body, '}')
	var lease struct {
		Token int64 `json:"token"`
	}
	r, err := c.post(ctx, "/leases/"+url.PathEscape(jobID)+"/acquire", body, &lease)
	return lease.Token, r, err
}

func (c *httpClient) acquireBatch(ctx context.Context, jobIDs []string, owner string, tick *time.Time, ttl time.Duration) ([]result, error) {
	body := fmt.Appendf(make([]byte, 0, 64+32*len(jobIDs)), `{"owner":%q,"ttlMs":%d`, owner, ttl.Milliseconds())
	if tick != nil {
		body = fmt.Appendf(body, `,"tick":%q`, tick.UTC().Format(wireTime))
	}
	body = append(body, `,"items":[`...)
	for i, job := range jobIDs {
		if i > 0 {
			body = append(body, ',')
		}
		body = fmt.Appendf(body, `{"jobId":%q`, job)
		if c.groupOf != nil {
			if g := c.groupOf(job); g != "" {
				body = fmt.Appendf(body, `,"group":%q`, g)
			}
		}
		body = append(body, '}')
	}
	body = append(body, "]}"...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/acquire", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	var answer []byte
	if r, err := c.do(req, &answer); r != resultOK {
		rs := make([]result, len(jobIDs))
		for i := range rs {
			rs[i] = r
		}
		return rs, err
	}
	statuses, at, err := batchStatuses(answer)
	if err == nil && len(statuses) != len(jobIDs) {
		err = fmt.Errorf("POST /acquire: %d results for %d items", len(statuses), len(jobIDs))
	}
	if err != nil {
		rs := make([]result, len(jobIDs))
		for i := range rs {
			rs[i] = resultFailed
		}
		return rs, err
	}
	rs := make([]result, len(statuses))
	var first error
	for i, status := range statuses {
		switch {
		case status == http.StatusOK:
			rs[i] = resultOK
		case status == http.StatusConflict:
			rs[i] = resultConflict
		case status >= 500:
			rs[i] = resultUnavailable
		default:
			rs[i] = resultFailed
		}
		if first == nil && rs[i] != resultOK && rs[i] != resultConflict {
			first = fmt.Errorf("POST /acquire: item %s: %d %s", jobIDs[i], status, answer[at[i]:min(at[i]+400, len(answer))])
		}
	}
	return rs, first
}

// batchStatuses returns the status of every result of a batch's answer
// ({"results":[{"jobId":…,"status":N,…},…]}) in order, and where each
// one is in body. It scans the bytes
// instead of decoding them, so that reading 1,000 results costs the load
// generator, which shares the cores with the server, little: a "status"
// key at the depth of a result object is the result's, never its lease's
// or problem's.
func batchStatuses(body []byte) (statuses, at []int, err error) {
	const resultDepth = 3 // the answer's object, its results array, a result
	key := []byte(`"status":`)
	depth, inString := 0, false
	for i := 0; i < len(body); i++ {
		c := body[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			if depth == resultDepth && bytes.HasPrefix(body[i:], key) {
				j := i + len(key)
				n := 0
				for ; j < len(body) && body[j] >= '0' && body[j] <= '9'; j++ {
					n = 10*n + int(body[j]-'0')
				}
				if j == i+len(key) {
					return nil, nil, fmt.Errorf("POST /acquire: a result's status at byte %d is not a number", i)
				}
				statuses, at = append(statuses, n), append(at, i)
				i = j - 1
				continue
			}
			inString = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
	}
	if depth != 0 || inString {
		return nil, nil, errors.New("POST /acquire: the answer is not complete JSON")
	}
	return statuses, at, nil
}

func (c *httpClient) heartbeat(ctx context.Context, jobID, owner string, token int64) (result, error) {
	body := fmt.Appendf(nil, `{"owner":%q,"token":%d}`, owner, token)
	return c.post(ctx, "/leases/"+url.PathEscape(jobID)+"/heartbeat", body, nil)
}

func (c *httpClient) release(ctx context.Context, jobID, owner string, token int64) (result, error) {
	body := fmt.Appendf(nil, `{"owner":%q,"token":%d,"outcome":"succeeded"}`, owner, token)
	return c.post(ctx, "/leases/"+url.PathEscape(jobID)+"/release", body, nil)
}

// cursor is the opaque cursor of GET /leases: base64url without padding
// of the last job id of the previous page (api/openapi.yaml).
func cursor(jobID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(jobID))
}

func (c *httpClient) list(ctx context.Context, after string, limit int, wantNext bool) (string, result, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if after != "" {
		q.Set("cursor", cursor(after))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/leases?"+q.Encode(), nil)
	if err != nil {
		return "", resultFailed, err
	}
	var page struct {
		NextCursor *string `json:"nextCursor"`
	}
	var into any
	if wantNext {
		into = &page
	}
	r, err := c.do(req, into)
	if err != nil || page.NextCursor == nil {
		return "", r, err
	}
	next, derr := base64.RawURLEncoding.DecodeString(*page.NextCursor)
	if derr != nil {
		return "", resultFailed, fmt.Errorf("nextCursor %q: %w", *page.NextCursor, derr)
	}
	return string(next), r, nil
}

func (c *httpClient) post(ctx context.Context, path string, body []byte, into any) (result, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return resultFailed, err
	}
	req.Header.Set("Content-Type", "application/json")
	return c.do(req, into)
}

// do sends req and classifies the answer; on 200 it decodes the body into
// into, when given (a *[]byte gets the body as it is). The body is always read to the end, so the connection
// is reused.
func (c *httpClient) do(req *http.Request, into any) (result, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return resultFailed, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
		if raw, ok := into.(*[]byte); ok {
			*raw, err = io.ReadAll(resp.Body)
			return resultOK, err
		}
		if into != nil {
			if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
				return resultFailed, fmt.Errorf("%s %s: decode: %w", req.Method, req.URL.Path, err)
			}
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resultOK, nil
	case resp.StatusCode == http.StatusConflict:
		buf := conflictBodies.Get().(*bytes.Buffer)
		defer conflictBodies.Put(buf)
		buf.Reset()
		_, _ = buf.ReadFrom(resp.Body)
		// Every group the benchmark creates has room for all its holders,
		// so a group_full refusal is a failure, not a lost race.
		if b := buf.Bytes(); bytes.Contains(b, groupFullCode) {
			return resultFailed, fmt.Errorf("%s %s: 409 %s", req.Method, req.URL.Path, bytes.TrimSpace(b[:min(len(b), 512)]))
		}
		return resultConflict, nil
	default:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		_, _ = io.Copy(io.Discard, resp.Body)
		err := fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, bytes.TrimSpace(b))
		if resp.StatusCode >= 500 {
			if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 {
				err = &retryAfterError{after: time.Duration(s) * time.Second, err: err}
			}
			return resultUnavailable, err
		}
		return resultFailed, err
	}
}

// conflictBodies are the buffers the 409 answers are read into.
var conflictBodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// groupFullCode is how a group_full problem names its code.
var groupFullCode = []byte(`"code":"` + api.CodeGroupFull + `"`)

// retryAfterError is a 5xx answer that asked the client to retry after a
// while (Retry-After).
type retryAfterError struct {
	after time.Duration
	err   error
}

func (e *retryAfterError) Error() string { return fmt.Sprintf("%v (retry after %s)", e.err, e.after) }
func (e *retryAfterError) Unwrap() error { return e.err }

// waitRetryAfter sleeps as long as err asks (a retryAfterError), at most
// maxRetryAfter, so that a shedding server is not hammered by clients that
// ignore it.
func waitRetryAfter(err error) {
	var ra *retryAfterError
	if errors.As(err, &ra) {
		time.Sleep(min(ra.after, maxRetryAfter))
	}
}

// maxRetryAfter bounds the wait of waitRetryAfter.
const maxRetryAfter = 2 * time.Second
