package api

import (
	"encoding/json"
	"strconv"
)

// MaxBatchBodyBytes is the largest body of POST /acquire and POST
// /heartbeat (1 MiB): 1,000 items of the longest job ids fit.
const MaxBatchBodyBytes = 1 << 20

// AcquireBatchRequest is the body of POST /acquire: Items are the
// acquires, 1 to leaseapi.MaxBatchItems; the other fields are the
// defaults of every item that does not send its own (the fields of an
// AcquireRequest).
type AcquireBatchRequest struct {
	Owner           *string            `json:"owner,omitempty"`
	TTLMs           *int64             `json:"ttlMs,omitempty"`
	Tick            *string            `json:"tick,omitempty"`
	NearestTick     *bool              `json:"nearestTick,omitempty"`
	Group           *string            `json:"group,omitempty"`
	Schedule        *string            `json:"schedule,omitempty"`
	GraceMs         *int64             `json:"graceMs,omitempty"`
	CatchUp         *string            `json:"catchUp,omitempty"`
	CatchUpWindowMs *int64             `json:"catchUpWindowMs,omitempty"`
	MinIntervalMs   *int64             `json:"minIntervalMs,omitempty"`
	Items           []AcquireBatchItem `json:"items"`
}

// AcquireBatchItem is one acquire of a batch: the job, and the fields of
// an AcquireRequest it sends itself. An item that sends tick or
// nearestTick takes neither from the defaults.
type AcquireBatchItem struct {
	JobID           string  `json:"jobId"`
	Owner           *string `json:"owner,omitempty"`
	TTLMs           *int64  `json:"ttlMs,omitempty"`
	Tick            *string `json:"tick,omitempty"`
	NearestTick     *bool   `json:"nearestTick,omitempty"`
	Group           *string `json:"group,omitempty"`
	Schedule        *string `json:"schedule,omitempty"`
	GraceMs         *int64  `json:"graceMs,omitempty"`
	CatchUp         *string `json:"catchUp,omitempty"`
	CatchUpWindowMs *int64  `json:"catchUpWindowMs,omitempty"`
	MinIntervalMs   *int64  `json:"minIntervalMs,omitempty"`
}

// Request is the AcquireRequest of item i of r: its own fields, else r's.
func (r *AcquireBatchRequest) Request(i int) AcquireRequest {
	it := &r.Items[i]
	q := AcquireRequest{
		TTLMs: or(it.TTLMs, r.TTLMs), Group: or(it.Group, r.Group), Schedule: or(it.Schedule, r.Schedule),
		GraceMs: or(it.GraceMs, r.GraceMs), CatchUp: or(it.CatchUp, r.CatchUp), CatchUpWindowMs: or(it.CatchUpWindowMs, r.CatchUpWindowMs),
		MinIntervalMs: or(it.MinIntervalMs, r.MinIntervalMs),
	}
	if o := or(it.Owner, r.Owner); o != nil {
		q.Owner = *o
	}
	tick, nearest := it.Tick, it.NearestTick
	if tick == nil && nearest == nil {
		tick, nearest = r.Tick, r.NearestTick
	}
	q.Tick, q.NearestTick = tick, nearest != nil && *nearest
	return q
}

// HeartbeatBatchRequest is the body of POST /heartbeat: Items are the
// heartbeats, 1 to leaseapi.MaxBatchItems; Owner and TTLMs are the
// defaults of every item that does not send its own.
type HeartbeatBatchRequest struct {
	Owner *string              `json:"owner,omitempty"`
	TTLMs *int64               `json:"ttlMs,omitempty"`
	Items []HeartbeatBatchItem `json:"items"`
}

// HeartbeatBatchItem is one heartbeat of a batch.
type HeartbeatBatchItem struct {
	JobID string  `json:"jobId"`
	Token int64   `json:"token"`
	Owner *string `json:"owner,omitempty"`
	TTLMs *int64  `json:"ttlMs,omitempty"`
}

// Request is the HeartbeatRequest of item i of r: its own fields, else
// r's.
func (r *HeartbeatBatchRequest) Request(i int) HeartbeatRequest {
	it := &r.Items[i]
	q := HeartbeatRequest{Token: it.Token, TTLMs: or(it.TTLMs, r.TTLMs)}
	if o := or(it.Owner, r.Owner); o != nil {
		q.Owner = *o
	}
	return q
}

func or[T any](p, def *T) *T {
	if p != nil {
		return p
	}
	return def
}

// BatchResponse is the answer of a batch: one result per item, in item
// order.
type BatchResponse struct {
	Results []BatchResult `json:"results"`
}

// BatchResult is one item's answer: the status its single call would have
// been answered with, and the lease (200) or the problem (any other).
type BatchResult struct {
	JobID   string   `json:"jobId"`
	Status  int      `json:"status"`
	Lease   *Lease   `json:"lease,omitempty"`
	Problem *Problem `json:"problem,omitempty"`
	// RetryAfter is the seconds the single call's Retry-After header would
	// have said, nil when it would have sent none.
	RetryAfter *int `json:"retryAfter,omitempty"`
}

var _ json.Marshaler = BatchResponse{}

// MarshalJSON encodes r as AppendJSON does.
func (r BatchResponse) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

// AppendJSON appends r's JSON object to b, as encoding/json would write
// it (see Lease.AppendJSON).
func (r BatchResponse) AppendJSON(b []byte) []byte {
	b = append(b, `{"results":[`...)
	for i, res := range r.Results {
		if i > 0 {
			b = append(b, ',')
		}
		b = res.AppendJSON(b)
	}
	return append(b, "]}"...)
}

// AppendJSON appends res's JSON object to b.
func (res BatchResult) AppendJSON(b []byte) []byte {
	b = append(b, `{"jobId":`...)
	b = appendString(b, res.JobID)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(res.Status), 10)
	if res.Lease != nil {
		b = append(b, `,"lease":`...)
		b = res.Lease.AppendJSON(b)
	}
	if res.Problem != nil {
		b = append(b, `,"problem":`...)
		b = res.Problem.AppendJSON(b)
	}
	if res.RetryAfter != nil {
		b = append(b, `,"retryAfter":`...)
		b = strconv.AppendInt(b, int64(*res.RetryAfter), 10)
	}
	return append(b, '}')
}
