package checker

import (
	"slices"
	"sort"
	"time"
)

// Owed ticks under I6. A job may owe one tick: a catch-up tick (the tick
// of its schedule the sweep decided missed, while no replica had run it
// since) or a manual tick (an operator's run now). Either is claimed with
// an ordinary acquire of that tick, so the rules of every grant hold for
// it (I1–I5, and a tick released succeeded is never granted again); these
// are the rules of owing:
//
//   - a catch-up run is of a job registered with catch-up, and of a tick
//     of its schedule that the sweep recorded missed before the grant (in
//     the run history's insertion order, the order of the job's row lock);
//     when the sweep decided that tick, the job's current grant had
//     started before the tick's grace ended (it had not run since); and no
//     grant of a later tick came between that decision and the catch-up
//     grant (a later tick that runs settles the debt);
//   - a manual run is of a tick that a run now of the operator was
//     answered with, or could have made (a call whose answer was lost),
//     and it starts after that call was sent; and not after the operator's
//     acknowledged cancellation of a tick that was owed before it was sent;
//   - either is owed once: the grant that claims it settles it, so no
//     (job, tick) has two catch-up runs or two manual runs;
//   - a run now that carries the Idempotency-Key of the job's last manual
//     tick answers that tick whatever became of it: a retry never owes a
//     second one.

// checkOwedTicks is I6 for owed ticks (see above), and counts the runs by
// trigger and the operator's calls.
func checkOwedTicks(h *History, idx *index, r *Report) {
	type tickKey struct {
		job  string
		tick int64
	}
	for _, run := range h.Runs {
		if run.Trigger != "" {
			if r.Stats.RunsByTrigger == nil {
				r.Stats.RunsByTrigger = make(map[string]int)
			}
			r.Stats.RunsByTrigger[run.Trigger]++
		}
	}
	countTriggers(h, r)

	missed := make(map[tickKey]Run)
	for _, m := range h.Missed {
		if !m.Tick.IsZero() && m.Trigger != TriggerManual {
			missed[tickKey{m.Job, m.Tick.UnixMilli()}] = m
		}
	}
	triggers := make(map[string][]*TriggerCall)
	for i := range h.Triggers {
		c := &h.Triggers[i]
		triggers[c.Job] = append(triggers[c.Job], c)
	}
	for _, cs := range triggers {
		sort.SliceStable(cs, func(i, j int) bool { return cs[i].Call.Before(cs[j].Call) })
	}

	for job, runs := range idx.runs {
		// The job's grants in insertion order: the order its row lock
		// was taken in, which the sweep's decisions share.
		byID := slices.Clone(runs)
		sort.Slice(byID, func(i, j int) bool { return byID[i].ID < byID[j].ID })
		type claim struct {
			trigger string
			tick    int64
		}
		claimed := make(map[claim]Run)
		for _, run := range runs { // by token
			if run.Trigger != TriggerCatchUp && run.Trigger != TriggerManual {
				continue
			}
			if run.Tick.IsZero() {
				r.add("I6", job, "%s run of token %d (%s) has no tick", run.Trigger, run.Token, run.Owner)
				continue
			}
			k := claim{run.Trigger, run.Tick.UnixMilli()}
			if prev, ok := claimed[k]; ok {
				r.add("I6", job, "%s tick %s was owed once but claimed twice: tokens %d (%s at %s) and %d (%s at %s)",
					run.Trigger, fmtTime(run.Tick), prev.Token, prev.Owner, fmtTime(prev.StartedAt),
					run.Token, run.Owner, fmtTime(run.StartedAt))
			} else {
				claimed[k] = run
			}
			if run.Trigger == TriggerCatchUp {
				m, ok := missed[tickKey{job, run.Tick.UnixMilli()}]
				checkCatchUp(h, r, job, run, m, ok, byID)
			} else if h.Triggers != nil {
				checkManual(r, job, run, triggers[job])
			}
		}
	}
	for job, cs := range triggers {
		checkTriggerRetries(r, job, cs)
	}
	countUnclaimed(h, triggers, r)
}

// countUnclaimed counts the manual ticks that run-now calls were answered
// with and that no run claimed, though no cancellation followed
// (Stats.ManualUnclaimed). It is reported, not judged: a tick answered
// near the end of a run may be claimed after it.
func countUnclaimed(h *History, triggers map[string][]*TriggerCall, r *Report) {
	type tickKey struct {
		job  string
		tick int64
	}
	ran := make(map[tickKey]bool)
	for _, run := range h.Runs {
		if run.Trigger == TriggerManual && !run.Tick.IsZero() {
			ran[tickKey{run.Job, run.Tick.UnixMilli()}] = true
		}
	}
	for job, cs := range triggers {
		counted := make(map[int64]bool)
		for i, c := range cs {
			m := c.ManualTick()
			if m.IsZero() || counted[m.UnixMilli()] || ran[tickKey{job, m.UnixMilli()}] {
				continue
			}
			counted[m.UnixMilli()] = true
			cancelled := false
			for _, x := range cs[i+1:] {
				cancelled = cancelled || x.Kind == CancelOwed
			}
			r.Stats.ManualUnclaimed += boolInt(!cancelled)
		}
	}
}

// checkCatchUp holds catch-up run c of job to the rules of a catch-up
// debt; m is the missed run of its tick (ok: there is one), byID the job's
// grants in insertion order.
func checkCatchUp(h *History, r *Report, job string, c, m Run, ok bool, byID []Run) {
	if h.CatchUpJobs != nil && !slices.Contains(h.CatchUpJobs, job) {
		r.add("I6", job, "catch-up run of token %d (%s) of tick %s, but the job was never registered with catch-up",
			c.Token, c.Owner, fmtTime(c.Tick))
	}
	if !ok {
		r.add("I6", job, "catch-up run of token %d (%s) is of tick %s, which was never recorded missed",
			c.Token, c.Owner, fmtTime(c.Tick))
		return
	}
	if c.StartedAt.Add(clockTolerance).Before(m.EndedAt) || (m.ID > 0 && c.ID > 0 && m.ID > c.ID) {
		r.add("I6", job, "catch-up run of token %d started at %s, before its tick %s was recorded missed (its grace ended at %s)",
			c.Token, fmtTime(c.StartedAt), fmtTime(c.Tick), fmtTime(m.EndedAt))
		return
	}
	if m.ID == 0 || c.ID == 0 {
		return // no insertion order to judge the debt by
	}
	// The grant current when the sweep decided the tick missed.
	var current *Run
	for i := range byID {
		if byID[i].ID > m.ID {
			break
		}
		current = &byID[i]
	}
	if current != nil && !current.StartedAt.Before(m.EndedAt) {
		r.add("I6", job, "catch-up run of token %d claims tick %s, but when the tick was decided missed the job had run since its grace ended (token %d at %s): nothing was owed",
			c.Token, fmtTime(c.Tick), current.Token, fmtTime(current.StartedAt))
	}
	for _, g := range byID {
		if g.ID > m.ID && g.ID < c.ID && !g.Tick.IsZero() && g.Tick.After(c.Tick) {
			r.add("I6", job, "catch-up run of token %d claims tick %s after the job ran a later tick %s (token %d at %s), which settled the debt",
				c.Token, fmtTime(c.Tick), fmtTime(g.Tick), g.Token, fmtTime(g.StartedAt))
			break
		}
	}
}

// checkManual holds manual run m of job to the operator's calls on the
// job, cs, in call order.
func checkManual(r *Report, job string, m Run, cs []*TriggerCall) {
	var made *TriggerCall
	for _, c := range cs {
		if c.Kind != RunNow || c.Call.After(m.StartedAt.Add(clockTolerance)) {
			continue
		}
		answered := c.ManualTick().Equal(m.Tick)
		// A call whose answer was lost may have made a manual tick: at
		// the database clock of its decision, after it was sent.
		lost := (c.Result.Uncertain() || c.Return.IsZero()) && !m.Tick.Before(c.Call.Add(-clockTolerance))
		if answered || lost {
			made = c
			break
		}
	}
	if made == nil {
		r.add("I6", job, "manual run of token %d (%s at %s) is of tick %s, which no run now sent before it was answered with or could have made",
			m.Token, m.Owner, fmtTime(m.StartedAt), fmtTime(m.Tick))
		return
	}
	// A cancellation acknowledged after the tick was answered owed, and
	// sent after the tick (so no later run now can owe the same tick
	// again), leaves nothing to claim.
	for _, x := range cs {
		if x.Kind != CancelOwed || x.Result != ResultOK || !x.Call.After(m.Tick.Add(clockTolerance)) ||
			!m.StartedAt.After(x.Return.Add(clockTolerance)) {
			continue
		}
		for _, c := range cs {
			if c.ManualTick().Equal(m.Tick) && !c.Return.IsZero() && c.Return.Before(x.Call) {
				r.add("I6", job, "manual run of token %d (%s) claims tick %s at %s, after its cancellation was acknowledged at %s",
					m.Token, m.Owner, fmtTime(m.Tick), fmtTime(m.StartedAt), fmtTime(x.Return))
				return
			}
		}
	}
}

// checkTriggerRetries: the run-now calls of one job (cs, in call order)
// that carry the same Idempotency-Key, with no call of another key between
// them, answer one manual tick. The exception is a key that made no tick:
// its first answer named a tick an earlier call of another key had made
// (or may have, its answer lost), and a retry after that tick was claimed
// makes a new one.
func checkTriggerRetries(r *Report, job string, cs []*TriggerCall) {
	var run []*TriggerCall // consecutive run-now calls with one key
	flush := func() {
		var first *TriggerCall
		for _, c := range run {
			if c.ManualTick().IsZero() {
				continue
			}
			if first == nil {
				first = c
				continue
			}
			if !c.ManualTick().Equal(first.ManualTick()) && !answeredForAnother(cs, first) {
				r.add("I6", job, "a retry of run now with Idempotency-Key %q sent at %s was answered with manual tick %s, though the key's call at %s made tick %s: a second run owed",
					c.Key, fmtTime(c.Call), fmtTime(c.ManualTick()), fmtTime(first.Call), fmtTime(first.ManualTick()))
				return
			}
		}
	}
	for _, c := range cs {
		if c.Kind != RunNow {
			continue
		}
		if len(run) > 0 && (c.Key == "" || c.Key != run[0].Key) {
			flush()
			run = run[:0]
		}
		if c.Key != "" {
			run = append(run, c)
		}
	}
	flush()
}

// answeredForAnother reports whether the manual tick first was answered
// with may have been made by an earlier run now of another key.
func answeredForAnother(cs []*TriggerCall, first *TriggerCall) bool {
	m := first.ManualTick()
	for _, c := range cs {
		if c.Kind != RunNow || c.Key == first.Key || !c.Call.Before(first.Call) {
			continue
		}
		if c.ManualTick().Equal(m) || ((c.Result.Uncertain() || c.Return.IsZero()) && !m.Before(c.Call.Add(-clockTolerance))) {
			return true
		}
	}
	return false
}

// countTriggers counts the operator's calls (Stats).
func countTriggers(h *History, r *Report) {
	r.Stats.TriggersRecorded = h.Triggers != nil
	keys := make(map[string]bool)
	for i := range h.Triggers {
		c := &h.Triggers[i]
		switch c.Kind {
		case RunNow:
			r.Stats.Triggers++
			if !c.ManualTick().IsZero() {
				r.Stats.TriggersAnswered++
			}
			k := c.Job + "\x00" + c.Key
			if c.Key != "" && keys[k] {
				r.Stats.TriggerRetries++
			}
			keys[k] = true
		case CancelOwed:
			r.Stats.Cancels++
		}
	}
}

// snapped is the tick of an every-period schedule (since the epoch) at or
// before t, which the service takes for an acquire of a tick that is not
// one of the schedule's (such as a manual tick no longer owed); t itself
// when it is one, or without a period.
func snapped(t time.Time, period time.Duration) time.Time {
	p := period.Milliseconds()
	if t.IsZero() || p <= 0 {
		return t
	}
	ms := t.UnixMilli()
	return time.UnixMilli(ms - ms%p).UTC()
}

// askedFor reports whether acquire o asked for the tick run was granted
// for: the same tick, or an off-schedule tick the service snapped to it.
func askedFor(o *Op, run Run, period time.Duration) bool {
	return o.Tick.Equal(run.Tick) || (!o.Tick.IsZero() && snapped(o.Tick, period).Equal(run.Tick))
}
