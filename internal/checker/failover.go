package checker

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// FaultCost is what one fault cost the clients: how long after it began
// the first grant came, and for how long calls were answered 503.
type FaultCost struct {
	Kind  FaultKind `json:"kind"`
	Start time.Time `json:"start"`
	// FirstGrant is the time from the fault's start to the return of the
	// first successful acquire sent after it (zero: none before the next
	// fault or the end of the history).
	FirstGrant time.Duration `json:"firstGrant"`
	// Unavailable is the length of the union of the calls answered 503
	// that were sent from the fault's start until the next fault's.
	Unavailable time.Duration `json:"unavailable"`
	Answers503  int           `json:"answers503"`
}

// FaultCosts measures every fault of kinds (all faults when kinds is
// empty), in the order they started. A fault's window runs to the next
// measured fault's start, or to the end of the history.
func FaultCosts(h *History, kinds ...FaultKind) []FaultCost {
	var faults []Fault
	for _, f := range h.Faults {
		if len(kinds) == 0 || slices.Contains(kinds, f.Kind) {
			faults = append(faults, f)
		}
	}
	sort.Slice(faults, func(i, j int) bool { return faults[i].Start.Before(faults[j].Start) })
	ops := make([]*Op, 0, len(h.Ops))
	for i := range h.Ops {
		ops = append(ops, &h.Ops[i])
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].Call.Before(ops[j].Call) })
	out := make([]FaultCost, 0, len(faults))
	for i, f := range faults {
		end := h.End
		if i+1 < len(faults) {
			end = faults[i+1].Start
		}
		c := FaultCost{Kind: f.Kind, Start: f.Start}
		var spans [][2]time.Time
		for _, o := range ops {
			if o.Call.Before(f.Start) {
				continue
			}
			if !end.IsZero() && !o.Call.Before(end) {
				break
			}
			if c.FirstGrant == 0 && isGrant(o) && !o.Return.IsZero() {
				c.FirstGrant = o.Return.Sub(f.Start)
			}
			if o.Status == 503 && !o.Return.IsZero() {
				c.Answers503++
				spans = append(spans, [2]time.Time{o.Call, o.Return})
			}
		}
		c.Unavailable = unionLength(spans)
		out = append(out, c)
	}
	return out
}

// unionLength is the total length covered by spans sorted by start.
func unionLength(spans [][2]time.Time) time.Duration {
	var total time.Duration
	var cur [2]time.Time
	for i, s := range spans {
		switch {
		case i == 0:
			cur = s
		case !s[0].After(cur[1]):
			if s[1].After(cur[1]) {
				cur[1] = s[1]
			}
		default:
			total += cur[1].Sub(cur[0])
			cur = s
		}
	}
	if len(spans) > 0 {
		total += cur[1].Sub(cur[0])
	}
	return total
}

// checkStatuses is the part of I9 that is not about timing: every answer's
// HTTP status is one of allowed (200, 409, 503, and 429 when limited, for a
// failover or an upgrade run), the answers to lease calls, to the
// operator's and to the clients' other calls alike. A status outside them
// is one violation, which counts its answers and names the first of them:
// the request, its client, the instance it went to, and what the answer's
// problem said.
func checkStatuses(h *History, r *Report, allowed []int) {
	if len(allowed) == 0 {
		return
	}
	type answer struct {
		at       time.Time
		job, req string
	}
	count := make(map[int]int)
	first := make(map[int]answer)
	note := func(status int, ret time.Time, job, req string) {
		if ret.IsZero() || status == 0 || slices.Contains(allowed, status) {
			return
		}
		count[status]++
		if f, ok := first[status]; !ok || ret.Before(f.at) {
			first[status] = answer{at: ret, job: job, req: req}
		}
	}
	problem := func(p string) string {
		if p == "" {
			return ""
		}
		return ", answered " + p
	}
	for i := range h.Ops {
		o := &h.Ops[i]
		note(o.Status, o.Return, o.Job, fmt.Sprintf("POST /leases/%s/%s by %s to instance %d at %s%s",
			o.Job, o.Kind, o.Client, o.Instance, fmtTime(o.Call), problem(o.Problem)))
	}
	for i := range h.Triggers {
		c := &h.Triggers[i]
		method := "POST"
		if c.Kind == CancelOwed {
			method = "DELETE"
		}
		note(c.Status, c.Return, c.Job, fmt.Sprintf("%s /leases/%s/trigger by %s to instance %d at %s%s",
			method, c.Job, c.Client, c.Instance, fmtTime(c.Call), problem(c.Problem)))
	}
	for i := range h.Calls {
		c := &h.Calls[i]
		note(c.Status, c.Return, "", fmt.Sprintf("%s by %s to instance %d at %s%s",
			c.Route, c.Client, c.Instance, fmtTime(c.Call), problem(c.Problem)))
	}
	statuses := make([]int, 0, len(count))
	for s := range count {
		statuses = append(statuses, s)
	}
	sort.Ints(statuses)
	for _, s := range statuses {
		f := first[s]
		r.add("I9", f.job, "%d answers with status %d (only %v are allowed); the first: %s", count[s], s, allowed, f.req)
	}
}
