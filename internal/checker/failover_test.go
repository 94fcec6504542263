package checker

import (
	"strings"
	"testing"
	"time"
)

var failoverStatuses = []int{200, 409, 429, 503}

func TestAllowedStatuses(t *testing.T) {
	t.Parallel()
	opts := DefaultOptions()
	opts.LinearizabilityTimeout = 0
	opts.MinExecutedOutsideFaults = 0
	opts.AllowedStatuses = failoverStatuses
	if r := Check(legal(), opts); r.Caught("I9") {
		t.Errorf("a legal history (200, 409, 503) broke the allowed statuses: %v", r.Violations)
	}

	h := legal()
	h.Ops[6].Result, h.Ops[6].Status = ResultError, 500
	h.Ops[10].Result, h.Ops[10].Status = ResultNotFound, 404
	r := Check(h, opts)
	if r.Counts["I9"] != 3 {
		t.Fatalf("got I9 violations %v; want one for the 404 and one for the 500 (not allowed), and one for the 500 (a 5xx)", r.Violations)
	}
	for _, want := range []string{"status 404", "status 500"} {
		found := false
		for _, v := range r.Violations {
			found = found || strings.Contains(v.Detail, want)
		}
		if !found {
			t.Errorf("no violation names %q: %v", want, r.Violations)
		}
	}

	// The operator's and the clients' other calls are judged too, and the
	// violation names the first request of each status with its problem.
	h2 := legal()
	h2.Triggers = []TriggerCall{
		{Kind: CancelOwed, Client: "operator", Instance: 1, Job: "j", Call: at(2500), Return: at(2510), Status: 404, Result: ResultNotFound,
			Problem: "not_found: no lease j"},
		{Kind: RunNow, Client: "operator", Job: "j", Call: at(2600), Return: at(2605), Status: 200, Result: ResultOK},
	}
	h2.Calls = []Call{
		{Client: "r1.1", Instance: 0, Route: "POST /owed", Call: at(2700), Return: at(2702), Status: 200, Result: ResultOK},
		{Client: "r1.1", Instance: 1, Route: "POST /owed", Call: at(2800), Return: at(2802), Status: 400, Result: ResultRejected,
			Problem: "invalid_request: unknown field"},
		{Client: "r1.1", Instance: 1, Route: "POST /owed", Call: at(2900), Return: at(2902), Status: 400, Result: ResultRejected},
		{Client: "r2.1", Instance: 0, Route: "POST /owed", Call: at(3000), Status: 0, Result: ResultUnknown, Err: "EOF"},
	}
	r = Check(h2, opts)
	var details []string
	for _, v := range r.Violations {
		if v.Invariant == "I9" {
			details = append(details, v.Detail)
		}
	}
	want := []string{
		"2 answers with status 400 (only [200 409 429 503] are allowed); the first: POST /owed by r1.1 to instance 1 at " + fmtTime(at(2800)) + ", answered invalid_request: unknown field",
		"1 answers with status 404 (only [200 409 429 503] are allowed); the first: DELETE /leases/j/trigger by operator to instance 1 at " + fmtTime(at(2500)) + ", answered not_found: no lease j",
	}
	if strings.Join(details, "\n") != strings.Join(want, "\n") {
		t.Errorf("got I9 violations\n%s\nwant\n%s", strings.Join(details, "\n"), strings.Join(want, "\n"))
	}
	// A 500 is I9's without the option too.
	plain := DefaultOptions()
	plain.LinearizabilityTimeout = 0
	plain.MinExecutedOutsideFaults = 0
	if r := Check(h2, plain); r.Caught("I9") {
		t.Errorf("a 400 and a 404 broke I9 without AllowedStatuses: %v", r.Violations)
	}
	h2.Calls[1].Status, h2.Calls[1].Result, h2.Calls[1].Problem = 500, ResultError, ""
	if r := Check(h2, plain); !r.Caught("I9") {
		t.Errorf("a 500 to POST /owed did not break I9 without AllowedStatuses: %v", r.Violations)
	}

	// Without the option, a 404 is an answer like any other.
	opts.AllowedStatuses = nil
	h.Ops[6].Result, h.Ops[6].Status = ResultUnavailable, 503
	if r := Check(h, opts); r.Caught("I9") {
		t.Errorf("a 404 broke I9 without AllowedStatuses: %v", r.Violations)
	}
}

func TestFaultCosts(t *testing.T) {
	t.Parallel()
	h := legal()
	// A fault at 2.9 s: b's heartbeat (3.0–4.0 s) is answered 503, c's
	// acquire at 4.0 s is the first grant (returned 4.005 s). A second
	// fault at 6 s: a's acquire at 7.1 s is the first grant after it.
	h.Faults = []Fault{
		{Kind: "leader_kill", Instance: -1, Start: at(6000), End: at(6500)},
		{Kind: "switchover", Instance: -1, Start: at(2900), End: at(3100)},
	}
	h.Ops = append(h.Ops,
		acquireOp("d", 2, 3100, 3600, ResultUnavailable, nil), // overlaps the heartbeat's 503
		acquireOp("d", 3, 6100, 6300, ResultUnavailable, nil),
	)
	h.End = at(9000)
	costs := FaultCosts(h)
	if len(costs) != 2 {
		t.Fatalf("got %d costs, want 2", len(costs))
	}
	want := []FaultCost{
		{Kind: "switchover", Start: at(2900), FirstGrant: 1105 * time.Millisecond, Unavailable: time.Second, Answers503: 2},
		{Kind: "leader_kill", Start: at(6000), FirstGrant: 1105 * time.Millisecond, Unavailable: 200 * time.Millisecond, Answers503: 1},
	}
	for i := range want {
		if costs[i] != want[i] {
			t.Errorf("fault %d: got %+v, want %+v", i, costs[i], want[i])
		}
	}
	if got := FaultCosts(h, "leader_kill"); len(got) != 1 || got[0].Unavailable != 200*time.Millisecond {
		t.Errorf("only leader_kill: got %+v", got)
	}
}
