package checker

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// maxListed bounds the examples one violation message lists.
const maxListed = 5

// checkRows is I7: once every job has its lease row, the table keeps
// exactly one row per job through every fault; no row expires further
// ahead than the maximum TTL; and after the replicas stopped, a fresh owner
// acquired every job within the allowance (TTL + 2·heartbeat + slack).
func checkRows(h *History, r *Report) {
	m := len(h.Jobs)
	samples := append([]Sample(nil), h.Samples...)
	sort.Slice(samples, func(i, j int) bool { return samples[i].At.Before(samples[j].At) })
	reached := false
	for _, s := range samples {
		if s.Err != "" {
			continue
		}
		if s.OverMaxTTL > 0 {
			r.add("I7", "", "at %s, %d lease rows expired more than the maximum TTL (%s) ahead", fmtTime(s.At), s.OverMaxTTL, h.MaxTTL)
		}
		switch {
		case s.Leases > m:
			r.add("I7", "", "at %s the leases table had %d rows for %d jobs", fmtTime(s.At), s.Leases, m)
		case s.Leases == m:
			reached = true
		case reached:
			r.add("I7", "", "at %s the leases table had %d rows, after it had held all %d (rows lost)", fmtTime(s.At), s.Leases, m)
		}
	}
	if h.Leases != nil && len(h.Leases) != m {
		r.add("I7", "", "after the run the leases table has %d rows for %d jobs", len(h.Leases), m)
	}
	if h.ProbeMax == 0 {
		return
	}
	probed := make(map[string]Probe)
	for _, p := range h.Probes {
		probed[p.Job] = p
	}
	for _, job := range h.Jobs {
		p, ok := probed[job]
		switch {
		case !ok:
			r.add("I7", job, "not probed")
		case !p.OK:
			r.add("I7", job, "a fresh owner could not acquire it within %s after the replicas stopped: %s", h.ProbeMax, p.Err)
		case p.Elapsed > h.ProbeMax:
			r.add("I7", job, "a fresh owner acquired it only after %s (allowance %s)", p.Elapsed.Round(time.Millisecond), h.ProbeMax)
		}
	}
}

// outage reports whether a fault makes calls to the instances it affects
// fail: database outages and instance faults (not mere latency).
func outage(k FaultKind) bool {
	switch k {
	case DBReset, DBBlackhole, PGRestart, PGCrash, PGFreeze, InstancePause, InstanceKill:
		return true
	}
	return k.failover()
}

// disrupts reports whether a fault can make calls to the instances it
// affects fail or miss their deadline: the outages, and latency, which
// stretches a call's round trips to the database (or its answer) past the
// request deadline. Only a replica's own faults do not.
func disrupts(k FaultKind) bool {
	return outage(k) || k == DBLatency || k == APILatency
}

// excluded reports whether a call's timing says nothing about the service:
// its client was paused while it was in flight, or the instance it was sent
// to was paused or killed meanwhile (their timeouts are the client's).
func excluded(h *History, o *Op) bool {
	end := o.Return
	if end.IsZero() {
		return true // the client died with the call in flight
	}
	for i := range h.Faults {
		f := &h.Faults[i]
		if f.Start.After(end) || f.End.Before(o.Call) {
			continue
		}
		switch f.Kind {
		case ReplicaPause, ReplicaKill:
			if f.Target == o.Client || f.Target == o.Owner {
				return true
			}
		case InstancePause, InstanceKill:
			if f.Affects(o.Instance) {
				return true
			}
		}
	}
	return false
}

// clientGaveUp reports whether o's client stopped waiting at its own
// deadline without an answer after the service's request deadline had
// passed. A client's deadline is at most Max503 but may start before the
// call is recorded (a runner's budget for a tick), so such a call can end
// a little short of Max503 and still be one that got no answer in time;
// one that ended before the request deadline was cut short by its client
// (a holder whose lease ran out while it was paused) and says nothing
// about the service.
func clientGaveUp(o *Op, requestDeadline time.Duration) bool {
	return (strings.Contains(o.Err, "context deadline exceeded") || strings.Contains(o.Err, "Client.Timeout exceeded")) &&
		o.Latency() >= requestDeadline
}

// checkAvailability is I9: no 500s, no service process that died or
// panicked on its own; no call waits for an answer past the clients'
// timeout (Max503), the 503s of database faults (sent between the start of
// one and Recovery after its end) included, whose p99 is reported; after
// every database outage the service answers again soon (first answer
// within Recovery); the share of the calls sent from Recovery to
// 2·Recovery after it that were answered is reported.
func checkAvailability(h *History, r *Report, opts Options) {
	for _, inc := range h.Incidents {
		r.add("I9", "", "%s", inc)
	}
	inDBFault := func(o *Op) bool {
		for i := range h.Faults {
			f := &h.Faults[i]
			if f.Kind.DB() && f.Affects(o.Instance) && !o.Call.Before(f.Start) && !o.Call.After(f.End.Add(opts.Recovery)) {
				return true
			}
		}
		return false
	}
	var errs, timeouts []string
	var lat []time.Duration
	for i := range h.Ops {
		o := &h.Ops[i]
		if o.Result == ResultError {
			errs = append(errs, fmt.Sprintf("%s %s by %s at %s: %d", o.Kind, o.Job, o.Client, fmtTime(o.Call), o.Status))
		}
		if excluded(h, o) {
			continue
		}
		switch {
		case o.Result == ResultUnavailable:
			if inDBFault(o) {
				lat = append(lat, o.Latency())
			} else {
				r.Stats.Other503++
			}
		case o.Result == ResultUnknown && opts.Max503 > 0 && (o.Latency() >= opts.Max503 || clientGaveUp(o, opts.RequestDeadline)):
			timeouts = append(timeouts, fmt.Sprintf("%s %s by %s to instance %d at %s", o.Kind, o.Job, o.Client, o.Instance, fmtTime(o.Call)))
		}
	}
	for i := range h.Triggers {
		if c := &h.Triggers[i]; c.Result == ResultError {
			errs = append(errs, fmt.Sprintf("%s %s by %s at %s: %d", c.Kind, c.Job, c.Client, fmtTime(c.Call), c.Status))
		}
	}
	for i := range h.Calls {
		if c := &h.Calls[i]; c.Result == ResultError {
			errs = append(errs, fmt.Sprintf("%s by %s at %s: %d", c.Route, c.Client, fmtTime(c.Call), c.Status))
		}
	}
	if len(errs) > 0 {
		r.add("I9", "", "%d calls answered with a 5xx other than 503: %s", len(errs), listed(errs))
	}
	r.Stats.FaultTimeouts = len(timeouts)
	if len(timeouts) > 0 {
		r.add("I9", "", "%d calls got no answer within %s: %s", len(timeouts), opts.Max503, listed(timeouts))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r.Stats.Fault503 = len(lat)
	if len(lat) > 0 {
		r.Stats.Fault503P99 = lat[(len(lat)*99+99)/100-1]
		r.Stats.Fault503Max = lat[len(lat)-1]
		if opts.Max503 > 0 && r.Stats.Fault503Max > opts.Max503 {
			r.add("I9", "", "503 latency max %s exceeds %s", fmtDur(r.Stats.Fault503Max), fmtDur(opts.Max503))
		}
	}

	// Recovery after each database outage, on the instances it affected.
	r.Stats.RecoveryRate = 1
	faults := append([]Fault(nil), h.Faults...)
	sort.Slice(faults, func(i, j int) bool { return faults[i].Start.Before(faults[j].Start) })
	for i := range faults {
		f := &faults[i]
		if !f.Kind.DB() || !outage(f.Kind) {
			continue
		}
		r.Stats.DBFaults++
		// The window ends one request deadline before another fault that
		// can fail the same calls begins (at once when one is still going
		// on): a call sent then is still in flight when it begins, and
		// what follows is that fault's cost, not a slow recovery from
		// this one.
		cut := f.End.Add(2 * opts.Recovery)
		for j := range faults {
			g := &faults[j]
			if j != i && disrupts(g.Kind) && g.End.After(f.End) && g.Start.Add(-opts.RequestDeadline).Before(cut) &&
				(g.Instance < 0 || f.Instance < 0 || g.Instance == f.Instance) {
				cut = maxTime(g.Start.Add(-opts.RequestDeadline), f.End)
			}
		}
		var firstOK time.Time
		var answered, total int
		for k := range h.Ops {
			o := &h.Ops[k]
			if !f.Affects(o.Instance) || o.Call.Before(f.End) || !o.Call.Before(cut) || excluded(h, o) ||
				o.Result == ResultNotSent || o.Result == ResultRejected {
				continue
			}
			if o.Result.Answered() && (firstOK.IsZero() || o.Return.Before(firstOK)) {
				firstOK = o.Return
			}
			if !o.Call.Before(f.End.Add(opts.Recovery)) {
				total++
				answered += boolInt(o.Result.Answered())
			}
		}
		if !firstOK.IsZero() {
			d := firstOK.Sub(f.End)
			if d > r.Stats.RecoveryFirstOK {
				r.Stats.RecoveryFirstOK = d
			}
			if d > opts.Recovery {
				r.add("I9", "", "after %s ended at %s, the first answer came %s later (goal %s)",
					f.Kind, fmtTime(f.End), d.Round(time.Millisecond), opts.Recovery)
			}
		}
		// The share answered from then on is reported, not judged: the
		// service also answers 503 at the deadline when the machine is too
		// busy to finish a tick's herd of acquires in time, by design, and
		// nothing in the history tells those 503s from a slow recovery.
		if total > 0 {
			if rate := float64(answered) / float64(total); rate < r.Stats.RecoveryRate {
				r.Stats.RecoveryRate = rate
			}
		}
	}
}

// checkProgress is I10: the scheduled ticks of every job ran (their fenced
// effect was accepted, start and end). A tick that an earlier tick's run
// still held the lease for, or whose lease an owed tick's grant took within
// its grace, is skipped by design and not counted. Ticks in
// the fault-free warm-up must all run; ticks away from fault windows must
// run at the rate the plan sets. A fault window is [start - MaxRun, end +
// TTL + 2·heartbeat] of a fault that can fail calls (disrupts), and of a
// replica fault for the jobs the replica held then (and, for a job of a
// concurrency group, for the jobs of the group when it held one of them:
// the slot it held is theirs too): the run of a tick
// lasts at most MaxRun, and a lease its holder lost to the fault is free
// again within TTL, taken within two heartbeats more. A tick the sweep
// recorded missed with groupFull (every slot of the job's group in use at
// the end of its grace) is not counted either, nor one whose group the run
// history shows full then (the sweep's rule, judged from the grants' slot
// holds, which I13 also reads). Each job ticks on its own schedule
// (History.Schedules, else every Period).
func checkProgress(h *History, idx *index, r *Report, opts Options) {
	if h.Period <= 0 || !h.End.After(h.Start) {
		return
	}
	type tk struct {
		job  string
		tick int64
	}
	executed := make(map[tk]bool)
	for _, w := range h.Witness {
		if !w.EndedAt.IsZero() && !w.Tick.IsZero() {
			executed[tk{w.Job, w.Tick.UnixMilli()}] = true
		}
	}
	runs := make(map[string][]Run)
	for _, run := range h.Runs {
		runs[run.Job] = append(runs[run.Job], run)
	}
	tail := h.TTL + 2*h.HeartbeatInterval
	lead := h.MaxRun
	if lead <= 0 {
		lead = h.Period
	}
	// A replica's fault reaches the jobs it held, and when one of them is
	// in a group, every job of the group: the slot it held is theirs too.
	groupJobs := make(map[string][]string)
	for _, g := range h.Groups {
		for _, job := range g.Jobs {
			groupJobs[job] = g.Jobs
		}
	}
	peers := func(job string) []string {
		if js, ok := groupJobs[job]; ok {
			return js
		}
		return []string{job}
	}
	inFault := func(job string, t time.Time) bool {
		for i := range h.Faults {
			f := &h.Faults[i]
			if t.Before(f.Start.Add(-lead)) || t.After(f.End.Add(tail)) {
				continue
			}
			switch {
			case disrupts(f.Kind):
				return true
			case f.Kind == ReplicaPause || f.Kind == ReplicaKill:
				for _, peer := range peers(job) {
					for _, run := range runs[peer] {
						end := run.EndedAt
						if end.IsZero() {
							end = h.End
						}
						if run.Owner == f.Target && !run.StartedAt.After(f.End) && !end.Before(f.Start.Add(-lead)) {
							return true
						}
					}
				}
			}
		}
		return false
	}
	grace := h.Grace
	if grace <= 0 {
		grace = h.Period
	}
	busy := func(job string, t time.Time) bool {
		for _, run := range runs[job] {
			if (run.Trigger == TriggerCatchUp || run.Trigger == TriggerManual) &&
				!run.StartedAt.Before(t) && !run.StartedAt.After(t.Add(grace)) {
				// An owed tick's grant took the lease within the tick's
				// grace: the tick is skipped, the job ran.
				return true
			}
			if run.Tick.IsZero() || !run.Tick.Before(t) || (run.Outcome != "succeeded" && run.Outcome != "failed") {
				continue
			}
			if !run.StartedAt.After(t) && run.EndedAt.After(t) {
				return true
			}
		}
		return false
	}
	// A tick the sweep recorded missed because its group had every slot in
	// use at the end of its grace was refused by design (I13 judges the
	// group's limit), like a busy one.
	groupFull := make(map[tk]bool)
	for _, m := range h.Missed {
		if m.GroupFull && !m.Tick.IsZero() {
			groupFull[tk{m.Job, m.Tick.UnixMilli()}] = true
		}
	}
	fullAt := groupFullAt(h, idx)
	var sched, exec, outSched, outExec, ffSched, ffExec int
	var missedFF, missedOut []string
	for _, job := range h.Jobs {
		js := h.schedule(job)
		// The first tick at or after Start + one period.
		from := h.Start.Add(js.Period).Add(-js.Offset)
		first := from.Truncate(js.Period)
		if first.Before(from) {
			first = first.Add(js.Period)
		}
		first = first.Add(js.Offset)
		jgrace := grace
		if js.Grace > 0 {
			jgrace = js.Grace
		}
		for t := first; !t.After(h.End.Add(-js.Period)); t = t.Add(js.Period) {
			ran := executed[tk{job, t.UnixMilli()}]
			if !ran && (groupFull[tk{job, t.UnixMilli()}] || fullAt(job, t.Add(jgrace))) {
				r.Stats.TicksGroupFull++
				continue
			}
			if !ran && busy(job, t) {
				r.Stats.TicksBusy++
				continue
			}
			sched++
			exec += boolInt(ran)
			switch {
			case !h.FaultFreeUntil.IsZero() && t.Before(h.FaultFreeUntil):
				ffSched++
				ffExec += boolInt(ran)
				if !ran {
					missedFF = append(missedFF, job+"@"+fmtTime(t))
				}
			case !inFault(job, t):
				outSched++
				outExec += boolInt(ran)
				if !ran {
					missedOut = append(missedOut, job+"@"+fmtTime(t))
				}
			}
		}
	}
	pct := func(a, b int) float64 {
		if b == 0 {
			return 100
		}
		return 100 * float64(a) / float64(b)
	}
	r.Stats.TicksScheduled, r.Stats.TicksExecuted = sched, exec
	r.Stats.ExecutedPct = pct(exec, sched)
	r.Stats.OutsideFaultsPct = pct(outExec+ffExec, outSched+ffSched)
	r.Stats.FaultFreePct = pct(ffExec, ffSched)
	r.Stats.FaultFreeTicks = ffSched
	if ffExec < ffSched {
		r.add("I10", "", "%d of %d ticks of the fault-free warm-up did not run: %s", ffSched-ffExec, ffSched, listed(missedFF))
	}
	if opts.MinExecutedOutsideFaults > 0 && r.Stats.OutsideFaultsPct < 100*opts.MinExecutedOutsideFaults {
		r.add("I10", "", "only %.1f%% of the ticks away from faults ran (goal %.0f%%); missed: %s",
			r.Stats.OutsideFaultsPct, 100*opts.MinExecutedOutsideFaults, listed(missedOut))
	}
}

func listed(items []string) string {
	if len(items) <= maxListed {
		return strings.Join(items, "; ")
	}
	return strings.Join(items[:maxListed], "; ") + fmt.Sprintf("; and %d more", len(items)-maxListed)
}
