package checker

import (
	"sort"
	"time"
)

// checkRetries is I11: an acquire is idempotent for its holder. The run
// history never shows the same owner granted a second token for the same
// tick while its previous grant was live — a retried acquire (its first
// attempt's answer lost, a 503 or a timeout) must renew the grant it made,
// not make another. A grant is live from its start for at least the ttl
// its owner asked for, unless released or revoked earlier.
//
// The client history alone cannot see this: when the first attempt's answer
// was lost, the retry's new token is explained by the first attempt never
// having happened (token gaps are legal). The run history is the ground
// truth of which uncertain acquires took effect; checkRetries also counts
// them (Stats.UncertainAcquires, UncertainAcquiresGranted, and
// UncertainAcquiresRetried: granted and retried while that grant was live),
// since a run without any cannot exercise this invariant.
func checkRetries(h *History, idx *index, r *Report) {
	for job, runs := range idx.runs {
		ops := idx.byJob[job]
		// acquires[owner] are the owner's acquire calls for this job.
		acquires := make(map[string][]*Op)
		for _, o := range ops {
			if o.Kind == Acquire {
				acquires[o.Owner] = append(acquires[o.Owner], o)
			}
		}
		granted, retried := make(map[*Op]bool), make(map[*Op]bool)
		for _, run := range runs {
			for _, o := range acquires[run.Owner] {
				if !o.Result.Uncertain() || !o.Tick.Equal(run.Tick) || !grantedBy(o, run, h.End) {
					continue
				}
				granted[o] = true
				// Retried while the grant it made was live: the case I11 is for.
				live := run.StartedAt.Add(askedTTL(acquires[run.Owner], run, h.TTL))
				for _, retry := range acquires[run.Owner] {
					if retry.Tick.Equal(run.Tick) && retry.Call.After(o.Call) && retry.Call.Before(live) {
						retried[o] = true
						break
					}
				}
			}
		}
		for _, o := range ops {
			if o.Kind == Acquire && o.Result.Uncertain() {
				r.Stats.UncertainAcquires++
				r.Stats.UncertainAcquiresGranted += boolInt(granted[o])
				r.Stats.UncertainAcquiresRetried += boolInt(retried[o])
			}
		}

		for i := 1; i < len(runs); i++ {
			prev, cur := runs[i-1], runs[i]
			// The correct acquire renews when the owner is the same and the
			// new call names no tick or the same tick.
			if cur.Owner != prev.Owner || (!cur.Tick.IsZero() && !cur.Tick.Equal(prev.Tick)) {
				continue
			}
			ttl := askedTTL(acquires[prev.Owner], prev, h.TTL)
			if ttl <= 0 {
				continue
			}
			live := prev.StartedAt.Add(ttl)
			if ended := prev.EndedAt; !ended.IsZero() && ended.Before(live) &&
				(prev.Outcome == "succeeded" || prev.Outcome == "failed" || prev.Outcome == "revoked") {
				live = ended
			}
			if !cur.StartedAt.Add(clockTolerance).Before(live) {
				continue
			}
			how := "its answer was seen"
			for _, o := range acquires[prev.Owner] {
				if granted[o] && grantedBy(o, prev, h.End) {
					how = "its answer was lost (" + string(o.Result) + "), and the run history shows it took effect"
					break
				}
			}
			r.add("I11", job, "%s was granted token %d for tick %s at %s while its own token %d of %s was live until at least %s (%s)",
				cur.Owner, cur.Token, fmtTime(cur.Tick), fmtTime(cur.StartedAt), prev.Token, fmtTime(prev.StartedAt), fmtTime(live), how)
		}
	}
}

// grantedBy reports whether run can be the effect of acquire o: it started
// (database clock) between o's call and its return, or the end of the run
// for a call that never returned.
func grantedBy(o *Op, run Run, end time.Time) bool {
	ret := o.Return
	if ret.IsZero() {
		ret = end
	}
	return !run.StartedAt.Before(o.Call.Add(-clockTolerance)) && (ret.IsZero() || !run.StartedAt.After(ret.Add(clockTolerance)))
}

// askedTTL is the shortest ttl the owner asked for in the acquires that may
// have made run, or fallback when none is known.
func askedTTL(acquires []*Op, run Run, fallback time.Duration) time.Duration {
	var ttls []time.Duration
	for _, o := range acquires {
		if o.TTL > 0 && o.Tick.Equal(run.Tick) && !o.Call.After(run.StartedAt.Add(clockTolerance)) {
			ttls = append(ttls, o.TTL)
		}
	}
	if len(ttls) == 0 {
		return fallback
	}
	sort.Slice(ttls, func(i, j int) bool { return ttls[i] < ttls[j] })
	return ttls[0]
}
