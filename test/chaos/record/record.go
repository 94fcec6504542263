//go:build chaos

// Package record is the history format the chaos replicas write and the
// harness reads: one JSON line when a call is sent and one when it returns,
// so that a call whose client was killed in flight is still in the history
// (with an unknown outcome).
package record

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sync"

	"github.com/leaseapi/leaseapi/api"
)

// Event is one line of a history file.
type Event struct {
	// Ev is "call" or "ret"; ID pairs them within one file.
	Ev string `json:"ev"`
	ID int64  `json:"id"`
	// T is the client's wall clock, unix nanoseconds.
	T int64 `json:"t"`

	// Call fields.
	Client   string `json:"client,omitempty"`
	Instance int    `json:"instance,omitempty"`
	Job      string `json:"job,omitempty"`
	Kind     string `json:"kind,omitempty"`
	Owner    string `json:"owner,omitempty"`
	Token    int64  `json:"token,omitempty"`
	TTLMs    int64  `json:"ttlMs,omitempty"`
	Tick     string `json:"tick,omitempty"`
	Outcome  string `json:"outcome,omitempty"`
	// Key is the Idempotency-Key of an operator's run now (kind
	// "trigger"; "cancel_trigger" is its cancellation).
	Key string `json:"key,omitempty"`
	// Route is the method and path of a call that is no lease call and
	// no operator's ("POST /owed"), whose Kind is empty.
	Route string `json:"route,omitempty"`

	// Return fields. Result is one of checker.Result.
	Status int        `json:"status,omitempty"`
	Result string     `json:"result,omitempty"`
	Lease  *api.Lease `json:"lease,omitempty"`
	Err    string     `json:"err,omitempty"`
	// Problem is what an answer other than 200, 409 and 503 said
	// (ProblemOf).
	Problem string `json:"problem,omitempty"`
}

// Writer appends events to a file, one write(2) per line, so that a line
// is either whole or absent when the process is killed.
type Writer struct {
	mu sync.Mutex
	f  *os.File
}

// Create opens path for appending.
func Create(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open history %s: %w", path, err)
	}
	return &Writer{f: f}, nil
}

// Write appends one event.
func (w *Writer) Write(e *Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	b = append(b, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.f.Write(b); err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	return nil
}

// Close closes the file.
func (w *Writer) Close() error { return w.f.Close() }

// Classify maps an answer of leaseapi to a checker result (see
// checker.Result) and the lease it carried.
func Classify(status int, body []byte) (string, *api.Lease) {
	switch {
	case status == http.StatusOK:
		var l api.Lease
		if err := json.Unmarshal(body, &l); err != nil {
			return "unknown", nil
		}
		return "ok", &l
	case status == http.StatusConflict:
		var p api.Problem
		if err := json.Unmarshal(body, &p); err != nil {
			return "unknown", nil
		}
		return p.Code, p.Lease
	case status == http.StatusNotFound:
		return "not_found", nil
	case status == http.StatusServiceUnavailable:
		return "unavailable", nil
	case status >= 500:
		return "error", nil
	}
	return "rejected", nil
}

// maxProblem bounds the text ProblemOf keeps of an answer.
const maxProblem = 300

// ProblemOf is what an answer with status and body said, for an answer
// that is neither a 200, a 409 nor a 503 (those are the workload's
// ordinary answers): the problem's code and detail ("invalid_request:
// unknown field ..."), or the start of a body that is no problem; "" for
// the others.
func ProblemOf(status int, body []byte) string {
	switch status {
	case http.StatusOK, http.StatusConflict, http.StatusServiceUnavailable:
		return ""
	}
	var p api.Problem
	s := string(body)
	if err := json.Unmarshal(body, &p); err == nil && p.Code != "" {
		s = p.Code + ": " + p.Detail
	}
	if len(s) > maxProblem {
		s = s[:maxProblem] + "..."
	}
	return s
}
