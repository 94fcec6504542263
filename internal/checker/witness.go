package checker

import (
	"sort"
	"time"
)

// checkFencedEffects is I5: the side effects jobs wrote through the fence
// (witness.runs) never overlap: an execution's accepted end comes before
// the start of any execution with a greater token, two executions never
// share a token at the same time, every execution's token was granted to
// its owner, and a rejected end never appears as accepted.
func checkFencedEffects(h *History, r *Report) {
	r.Stats.FencedRejections = len(h.Rejected)
	runOwner := make(map[grantKey]string)
	for _, run := range h.Runs {
		runOwner[grantKey{run.Job, run.Token}] = run.Owner
	}
	byJob := make(map[string][]WitnessRun)
	for _, w := range h.Witness {
		byJob[w.Job] = append(byJob[w.Job], w)
		if len(h.Runs) > 0 {
			if owner, ok := runOwner[grantKey{w.Job, w.Token}]; !ok || owner != w.Owner {
				r.add("I5", w.Job, "%s executed with token %d, which the run history grants to %q",
					w.Owner, w.Token, owner)
			}
		}
	}
	for job, ws := range byJob {
		sort.Slice(ws, func(i, j int) bool {
			if ws[i].Token != ws[j].Token {
				return ws[i].Token < ws[j].Token
			}
			return ws[i].StartedAt.Before(ws[j].StartedAt)
		})
		for i := range ws {
			a := ws[i]
			aEnd := a.EndedAt
			if aEnd.IsZero() {
				aEnd = a.StartedAt
			}
			for j := i + 1; j < len(ws); j++ {
				b := ws[j]
				if b.Token == a.Token {
					bEnd := b.EndedAt
					if bEnd.IsZero() {
						bEnd = b.StartedAt
					}
					if a.Owner != b.Owner && !a.StartedAt.After(bEnd) && !b.StartedAt.After(aEnd) {
						r.add("I5", job, "token %d executed by %s and %s at the same time (%s-%s, %s-%s)",
							a.Token, a.Owner, b.Owner, fmtTime(a.StartedAt), fmtTime(aEnd), fmtTime(b.StartedAt), fmtTime(bEnd))
					}
					continue
				}
				if !a.EndedAt.IsZero() && a.EndedAt.After(b.StartedAt) {
					r.add("I5", job, "token %d (%s) ended its effect at %s, after token %d (%s) started at %s",
						a.Token, a.Owner, fmtTime(a.EndedAt), b.Token, b.Owner, fmtTime(b.StartedAt))
				}
			}
		}
	}
	accepted := make(map[grantKey][]WitnessRun)
	for _, w := range h.Witness {
		accepted[grantKey{w.Job, w.Token}] = append(accepted[grantKey{w.Job, w.Token}], w)
	}
	for _, rej := range h.Rejected {
		if rej.Phase != "end" {
			continue
		}
		for _, w := range accepted[grantKey{rej.Job, rej.Token}] {
			if w.Owner == rej.Owner && !w.EndedAt.IsZero() && w.EndedAt.After(rej.At) {
				r.add("I5", rej.Job, "the end of token %d (%s) was rejected at %s yet accepted at %s",
					rej.Token, rej.Owner, fmtTime(rej.At), fmtTime(w.EndedAt))
			}
		}
	}
}

// checkBeliefs is I8: unfenced beliefs ("I hold the job with this token
// now") of two grants may overlap only when the earlier holder was paused
// (SIGSTOP) between asking for its lease and its last belief: a holder that
// is not paused stops at its own deadline, before its lease can pass to
// anyone else. Overlaps are counted
// and the longest is reported either way.
func checkBeliefs(h *History, r *Report) {
	type span struct {
		token      int64
		owner      string
		start, end time.Time
	}
	type key struct {
		job   string
		token int64
		owner string
	}
	spans := make(map[key]*span)
	for _, b := range h.Beliefs {
		k := key{b.Job, b.Token, b.Owner}
		s := spans[k]
		if s == nil {
			spans[k] = &span{token: b.Token, owner: b.Owner, start: b.At, end: b.At}
			continue
		}
		if b.At.Before(s.start) {
			s.start = b.At
		}
		if b.At.After(s.end) {
			s.end = b.At
		}
	}
	byJob := make(map[string][]*span)
	for k, s := range spans {
		byJob[k.job] = append(byJob[k.job], s)
	}
	// A holder's claim starts when it asked for the lease: a pause while
	// the acquire was in flight leaves it believing in a lease whose TTL ran
	// out meanwhile.
	runs := make(map[key]Run)
	for _, run := range h.Runs {
		runs[key{run.Job, run.Token, run.Owner}] = run
	}
	asked := func(k key, from time.Time) time.Time {
		run, ok := runs[k]
		if !ok {
			return from
		}
		if run.StartedAt.Before(from) {
			from = run.StartedAt
		}
		for i := range h.Ops {
			o := &h.Ops[i]
			if o.Kind == Acquire && o.Job == k.job && o.Owner == k.owner && askedFor(o, run, h.Period) &&
				!o.Call.After(run.StartedAt) && o.Call.Before(from) {
				from = o.Call
			}
		}
		return from
	}
	paused := func(owner string, from, to time.Time) bool {
		for _, f := range h.Faults {
			if f.Kind == ReplicaPause && f.Target == owner && !f.Start.After(to) && !f.End.Before(from) {
				return true
			}
		}
		return false
	}
	for job, ss := range byJob {
		sort.Slice(ss, func(i, j int) bool { return ss[i].token < ss[j].token })
		for i, a := range ss {
			for _, b := range ss[i+1:] {
				if b.token == a.token {
					continue
				}
				from, to := maxTime(a.start, b.start), minTime(a.end, b.end)
				if to.Before(from) {
					continue
				}
				overlap := to.Sub(from)
				r.Stats.BeliefOverlaps++
				if overlap > r.Stats.MaxBeliefOverlap {
					r.Stats.MaxBeliefOverlap = overlap
				}
				if !paused(a.owner, asked(key{job, a.token, a.owner}, a.start), a.end) {
					r.add("I8", job, "%s believed it held token %d until %s, while %s held token %d from %s, and %s was not paused",
						a.owner, a.token, fmtTime(a.end), b.owner, b.token, fmtTime(b.start), a.owner)
				}
			}
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
