//go:build chaos

package main

import (
	"net/http"
	"testing"

	"github.com/leaseapi/leaseapi/test/chaos/record"
)

// TestBatchRecordedAsSingleCalls: each item of a batch is recorded as the
// single call it stands for, with the fields it takes from the defaults,
// and its own answer.
func TestBatchRecordedAsSingleCalls(t *testing.T) {
	body := []byte(`{"owner":"r0.1","ttlMs":3000,"tick":"2026-12-07T05:00:00.000Z","items":[` +
		`{"jobId":"a"},{"jobId":"b","tick":"2026-12-07T05:00:02.000Z","ttlMs":4000},{"jobId":"c","nearestTick":true,"owner":"r9.9"}]}`)
	kind, cs := calls("/acquire", body)
	want := []call{
		{job: "a", cb: callBody{Owner: "r0.1", TTLMs: 3000, Tick: "2026-12-07T05:00:00.000Z"}},
		{job: "b", cb: callBody{Owner: "r0.1", TTLMs: 4000, Tick: "2026-12-07T05:00:02.000Z"}},
		{job: "c", cb: callBody{Owner: "r9.9", TTLMs: 3000}},
	}
	if kind != "acquire" || len(cs) != len(want) {
		t.Fatalf("calls: got %q %+v, want acquire %+v", kind, cs, want)
	}
	for i := range want {
		if cs[i] != want[i] {
			t.Errorf("item %d: got %+v, want %+v", i, cs[i], want[i])
		}
	}
	kind, cs = calls("/heartbeat", []byte(`{"owner":"r0.1","ttlMs":3000,"items":[{"jobId":"a","token":7}]}`))
	if kind != "heartbeat" || len(cs) != 1 || cs[0] != (call{job: "a", cb: callBody{Owner: "r0.1", TTLMs: 3000, Token: 7}}) {
		t.Errorf("heartbeat calls: got %q %+v", kind, cs)
	}
	if !leaseCallPath("/acquire") || !leaseCallPath("/leases/a/release") || leaseCallPath("/owed") || leaseCallPath("/leases/a") {
		t.Error("leaseCallPath: wrong paths")
	}

	answer := []byte(`{"results":[{"jobId":"a","status":200,"lease":{"jobId":"a","owner":"r0.1","token":5}},` +
		`{"jobId":"b","status":409,"problem":{"status":409,"code":"lease_held","lease":{"jobId":"b","owner":"r1.1","token":3}}},` +
		`{"jobId":"c","status":503,"problem":{"status":503,"code":"unavailable"}}]}`)
	statuses, bodies := itemAnswers(http.StatusOK, answer, 3)
	results := []string{"ok", "lease_held", "unavailable"}
	tokens := []int64{5, 3, 0}
	for i := range 3 {
		result, lease := record.Classify(statuses[i], bodies[i])
		var token int64
		if lease != nil {
			token = lease.Token
		}
		if result != results[i] || token != tokens[i] {
			t.Errorf("item %d: got %s token %d, want %s token %d", i, result, token, results[i], tokens[i])
		}
	}
	statuses, bodies = itemAnswers(http.StatusServiceUnavailable, []byte(`{"status":503,"code":"unavailable"}`), 2)
	for i := range 2 {
		if result, _ := record.Classify(statuses[i], bodies[i]); result != "unavailable" {
			t.Errorf("whole 503, item %d: got %s", i, result)
		}
	}
	statuses, bodies = itemAnswers(http.StatusOK, []byte(`{"results":[]}`), 2)
	for i := range 2 {
		if result, _ := record.Classify(statuses[i], bodies[i]); result != "unknown" {
			t.Errorf("unreadable answer, item %d: got %s, want unknown", i, result)
		}
	}
}
