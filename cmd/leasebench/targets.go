package main

import (
	"fmt"
	"slices"
	"strings"
)

// Target is one of issue 6's targets with what this run measured.
type Target struct {
	Name string `json:"name"`
	// Met is nil when the run did not measure it.
	Met    *bool  `json:"met"`
	Detail string `json:"detail"`
}

func (t Target) status() string {
	switch {
	case t.Met == nil:
		return "n/a"
	case *t.Met:
		return "met"
	}
	return "MISSED"
}

func boolp(b bool) *bool { return &b }

// find returns the row of scenario, mode and acquire mode.
func find(rows []Row, scenario, mode, acquire string) (Row, bool) {
	i := slices.IndexFunc(rows, func(r Row) bool {
		return r.Scenario == scenario && r.Mode == mode && r.Acquire == acquire
	})
	if i < 0 {
		return Row{}, false
	}
	return rows[i], true
}

// atLeast is a target "got >= want" on a quantity where more is better.
func atLeast(name string, got, want float64, format, what string) Target {
	t := Target{Name: name, Met: boolp(got >= want)}
	t.Detail = fmt.Sprintf(what+" "+format+" (target ≥ "+format+")", got, want)
	if got < want {
		t.Detail += fmt.Sprintf(": missed by %.0f%%", 100*(want-got)/want)
	}
	return t
}

// atMost is a target "got <= want" on a quantity where less is better.
func atMost(name string, got, want float64, format, what string) Target {
	t := Target{Name: name, Met: boolp(got <= want)}
	t.Detail = fmt.Sprintf(what+" "+format+" (target ≤ "+format+")", got, want)
	if got > want {
		t.Detail += fmt.Sprintf(": missed by %.0f%% (%.1f× the target)", 100*(got-want)/want, got/want)
	}
	return t
}

func notMeasured(name string) Target {
	return Target{Name: name, Detail: "not measured in this run"}
}

// evaluateTargets holds the report to issue 6's targets. With -quick, or
// other sizes than the issue's, the names say which sizes were measured.
func evaluateTargets(rep *Report, o options) []Target {
	rows := rep.Rows
	var ts []Target

	name := "cycle: leaseapi ≥ 0.8 × floor throughput"
	if h, ok := find(rows, "cycle", "http", "fast"); ok && h.RatioToFloor != nil {
		ts = append(ts, atLeast(name, *h.RatioToFloor, 0.8, "%.2f", "ratio"))
	} else {
		ts = append(ts, notMeasured(name))
	}

	herdSize := fmt.Sprintf("%d×%d", o.herdReplicas, o.herdJobs)
	naive, naiveOK := find(rows, "herd", "http", "naive")
	for _, scenario := range []string{"herd", "herd-shuffled"} {
		fast, ok := find(rows, scenario, "http", "fast")
		if !ok && scenario == "herd-shuffled" {
			continue // only with -herd-shuffled
		}
		name := fmt.Sprintf("%s %s: ≥ 5 × faster than the naive path", scenario, herdSize)
		if ok && naiveOK && fast.Seconds > 0 {
			ts = append(ts, atLeast(name, naive.Seconds/fast.Seconds, 5, "%.1f×",
				fmt.Sprintf("naive %.2f s / fast %.2f s =", naive.Seconds, fast.Seconds)))
		} else {
			ts = append(ts, notMeasured(name))
		}
		name = fmt.Sprintf("%s %s: ≥ 20,000 decisions/s over HTTP", scenario, herdSize)
		if ok {
			t := atLeast(name, fast.OpsPerSec, 20000, "%.0f/s", "fast path")
			if cal, ok := find(rows, "calibration", "trivial", "-"); ok {
				t.Detail += fmt.Sprintf("; a trivial handler serves %.0f/s here (%.0f%% of it)", cal.OpsPerSec, 100*fast.OpsPerSec/cal.OpsPerSec)
			}
			ts = append(ts, t)
		} else {
			ts = append(ts, notMeasured(name))
		}
	}
	name = fmt.Sprintf("herd %s: exactly %d grants and zero 5xx in every herd run", herdSize, o.herdJobs)
	groupHerds := slices.ContainsFunc(rows, func(r Row) bool { return r.Group != nil && r.TotalSeconds != nil })
	mainHerds := slices.ContainsFunc(rows, func(r Row) bool { return r.Group == nil && r.TotalSeconds != nil })
	switch groupSize := fmt.Sprintf("%d×%d", o.groupHerdReplicas, o.groupHerdJobs); {
	case groupHerds && mainHerds:
		name = fmt.Sprintf("herd %s and the group phase's %s: one grant per job and zero 5xx in every herd run", herdSize, groupSize)
	case groupHerds:
		name = fmt.Sprintf("the group phase's herds %s: exactly %d grants and zero 5xx in every herd run", groupSize, o.groupHerdJobs)
	}
	var bad []string
	seen := 0
	for _, r := range rows {
		if r.TotalSeconds == nil {
			continue
		}
		seen++
		jobs := o.herdJobs
		if r.Group != nil {
			jobs = o.groupHerdJobs
		}
		if r.Grants != int64(jobs) || r.Status5xx != 0 || r.Errors != 0 {
			bad = append(bad, fmt.Sprintf("%s %s %s: %d grants, %d 5xx, %d errors", r.Scenario, r.Mode, r.Acquire, r.Grants, r.Status5xx, r.Errors))
		}
	}
	switch {
	case seen == 0:
		ts = append(ts, notMeasured(name))
	case len(bad) > 0:
		ts = append(ts, Target{Name: name, Met: boolp(false), Detail: fmt.Sprint(bad)})
	default:
		ts = append(ts, Target{Name: name, Met: boolp(len(rep.Bugs) == 0),
			Detail: fmt.Sprintf("%d herd runs, each one grant per job, 0 5xx; database checked (rows, tokens, runs)", seen)})
	}

	ts = append(ts, batchTargets(rows, herdSize)...)

	name = "p99 acquire latency ≤ 10 ms at half of saturation"
	if r, ok := find(rows, "acquire@half-saturation", "http", "fast"); ok {
		ts = append(ts, atMost(name, r.P99Ms, 10, "%.2f ms", fmt.Sprintf("at %.0f acquires/s, p99", r.OpsPerSec)))
	} else {
		ts = append(ts, notMeasured(name))
	}

	small, large := slices.Min(o.listSizes), slices.Max(o.listSizes)
	for _, page := range []string{"first", "deep"} {
		name := fmt.Sprintf("list %s page: latency at %s ≤ 2 × at %s", page, sizeName(large), sizeName(small))
		s, ok1 := find(rows, fmt.Sprintf("list-%s-%s", sizeName(small), page), "http", "fast")
		l, ok2 := find(rows, fmt.Sprintf("list-%s-%s", sizeName(large), page), "http", "fast")
		if ok1 && ok2 && s.P50Ms > 0 {
			t := atMost(name, l.P50Ms/s.P50Ms, 2, "%.2f×",
				fmt.Sprintf("p50 %.2f ms / %.2f ms =", l.P50Ms, s.P50Ms))
			t.Detail += fmt.Sprintf("; p99 %.2f ms / %.2f ms", l.P99Ms, s.P99Ms)
			ts = append(ts, t)
		} else {
			ts = append(ts, notMeasured(name))
		}
	}

	name = fmt.Sprintf("leaseapi RSS ≤ 64 MiB with %s leases and %d clients", sizeName(o.rssLeases), o.rssClients)
	if r, ok := find(rows, fmt.Sprintf("rss-%s-leases", sizeName(o.rssLeases)), "http", "fast"); ok && r.PeakRSSMiB != nil {
		t := atMost(name, *r.PeakRSSMiB, 64, "%.1f MiB", "peak RSS (VmHWM)")
		if r.Status5xx > 0 {
			t.Detail += fmt.Sprintf("; %d of %d requests answered 5xx", r.Status5xx, r.Ops)
		}
		ts = append(ts, t)
	} else {
		ts = append(ts, notMeasured(name))
	}
	ts = append(ts, sweepTargets(rows, o)...)
	ts = append(ts, lockTarget(rep))
	return append(ts, consoleTargets(rows)...)
}

// batchTargets hold the batches to their issue: the herd through batches
// against the herd of single acquires in the same run, and the latency of
// the largest batch at half of the batch rate at saturation.
func batchTargets(rows []Row, herdSize string) []Target {
	var ts []Target
	batch, ok := find(rows, "herd-batch", "http", "fast")
	name := fmt.Sprintf("herd-batch %s: ≥ 100,000 decisions/s over HTTP", herdSize)
	if ok {
		ts = append(ts, atLeast(name, batch.OpsPerSec, 100000, "%.0f/s", "one batch per replica"))
	} else {
		ts = append(ts, notMeasured(name))
	}
	name = fmt.Sprintf("herd-batch %s: ≥ 5 × the decisions/s of the herd of single acquires (herd-next-tick)", herdSize)
	if single, ok1 := find(rows, "herd-next-tick", "http", "fast"); ok && ok1 && single.OpsPerSec > 0 {
		ts = append(ts, atLeast(name, batch.OpsPerSec/single.OpsPerSec, 5, "%.1f×",
			fmt.Sprintf("batches %.0f/s / single acquires %.0f/s =", batch.OpsPerSec, single.OpsPerSec)))
	} else {
		ts = append(ts, notMeasured(name))
	}
	name = fmt.Sprintf("a batch of %d: p99 ≤ 100 ms at half of saturation", batchItems)
	if r, ok := find(rows, fmt.Sprintf("batch-%d@half-saturation", batchItems), "http", "fast"); ok {
		t := atMost(name, r.P99Ms, 100, "%.2f ms", fmt.Sprintf("at %.1f batches/s, p99", r.OpsPerSec/batchItems))
		if r.Errors > 0 {
			t.Met = boolp(false)
			t.Detail += fmt.Sprintf("; %d items failed (first: %s)", r.Errors, r.FirstError)
		}
		ts = append(ts, t)
	} else {
		ts = append(ts, notMeasured(name))
	}
	return ts
}

// sweepTargets hold the sweep to the store's contract: a pass costs the
// due jobs, never all jobs (the counters of the rows it reads, which noise
// cannot move), decides them as seeded, and keeps up (the large pass's
// decided ticks per second and the median of its idle passes). The time of
// the large pass is not held to the small one's: the small table is in
// shared buffers, the large one's due rows are not, and the first write of
// each of their pages after a checkpoint logs the whole page.
func sweepTargets(rows []Row, o options) []Target {
	large, small := sizeName(o.sweepJobs), sizeName(o.sweepDue)
	l, okL := find(rows, sweepScenario(o.sweepJobs, o.sweepDue), "floor", "-")
	s, okS := find(rows, sweepScenario(o.sweepDue, o.sweepDue), "floor", "-")
	measured := okL && okS && l.Sweep != nil && s.Sweep != nil

	var ts []Target
	// The small table's rows may be read sequentially: for a batch of its
	// 1,000 rows a scan of its few pages is the planner's cheapest plan.
	name := fmt.Sprintf("sweep: rows read at %s ≤ 2 × at %s (pass and idle pass), none sequentially at %s", large, small, large)
	if measured {
		lr := l.Sweep.Pass.rowsRead() + l.Sweep.Idle.rowsRead()
		sr := s.Sweep.Pass.rowsRead() + s.Sweep.Idle.rowsRead()
		t := atMost(name, float64(lr), 2*float64(sr), "%.0f", fmt.Sprintf("rows of leases and runs read at %s", large))
		var seq, seqRows int64
		for _, c := range []SweepCounters{l.Sweep.Pass, l.Sweep.Idle} {
			seq += c.seqScans()
			seqRows += c.Leases.SeqTupRead + c.Runs.SeqTupRead
		}
		t.Detail += fmt.Sprintf("; at %s %d; the idle pass alone %d at %s and %d at %s; at %s %d rows read by %d sequential scans",
			small, sr, l.Sweep.Idle.rowsRead(), large, s.Sweep.Idle.rowsRead(), small, large, seqRows, seq)
		if seqRows > 0 {
			t.Met = boolp(false)
		}
		ts = append(ts, t)
	} else {
		ts = append(ts, notMeasured(name))
	}

	name = fmt.Sprintf("sweep: each pass decides exactly the %s due jobs as seeded (ran, missed, catch-up owed, manual ticks unclaimed)", small)
	var bad []string
	for _, r := range []Row{s, l} {
		if d := r.Sweep; d != nil && !d.correct() {
			bad = append(bad, r.Scenario+": "+d.problem())
		}
	}
	switch {
	case !measured:
		ts = append(ts, notMeasured(name))
	case len(bad) > 0:
		ts = append(ts, Target{Name: name, Met: boolp(false), Detail: strings.Join(bad, "; ")})
	default:
		w := l.Sweep.Want
		ts = append(ts, Target{Name: name, Met: boolp(true), Detail: fmt.Sprintf(
			"both passes: %d decided (%d ran, %d missed), none due after, %d unclaimed manual ticks recorded, %d jobs owing their missed tick, %d still a manual one; database checked",
			l.Sweep.Decided, l.Sweep.Ran, l.Sweep.Missed, w.Unclaimed, w.OwedCatchUp, w.Claimable)})
	}

	name = fmt.Sprintf("sweep: ≥ 10,000 decided ticks/s in the pass over %s jobs (goal 20,000)", large)
	if measured {
		t := atLeast(name, l.Sweep.TicksPerSecond, 10000, "%.0f/s", fmt.Sprintf("%d ticks in %.3f s, batch %d:", l.Sweep.Ticks, l.Seconds, l.Sweep.Batch))
		if l.Sweep.TicksPerSecond >= 10000 && l.Sweep.TicksPerSecond < 20000 {
			t.Detail += "; goal 20,000/s not met"
		}
		ts = append(ts, t)
	} else {
		ts = append(ts, notMeasured(name))
	}

	name = fmt.Sprintf("sweep: the idle pass over %s jobs < 10 ms", large)
	if measured && len(l.Sweep.IdleMs) > 0 {
		t := atMost(name, l.Sweep.idleMedianMs(), 10, "%.1f ms", fmt.Sprintf("median of %d passes", len(l.Sweep.IdleMs)))
		t.Detail += fmt.Sprintf("; max %.1f ms, the first on a new connection %.1f ms", slices.Max(l.Sweep.IdleMs), 1000*l.Sweep.IdleSeconds)
		ts = append(ts, t)
	} else {
		ts = append(ts, notMeasured(name))
	}
	return ts
}

// consoleTargets are the budget of the operations console: what its first
// load transfers, and how long a lease page takes to render.
func consoleTargets(rows []Row) []Target {
	// The operations console's budget.
	name := "console: first load ≤ 150 KB transferred"
	var ts []Target
	var console *Row
	for i := range rows {
		if rows[i].Console != nil {
			console = &rows[i]
		}
	}
	if console != nil {
		ts = append(ts, atMost(name, float64(console.Console.FirstLoadBytes)/1000, 150, "%.1f KB",
			fmt.Sprintf("%d responses,", console.Console.FirstLoadResponses)))
	} else {
		ts = append(ts, notMeasured(name))
	}
	name = "console: a lease page renders in < 100 ms with 1M leases"
	if console != nil {
		t := atMost(name, console.Console.RenderMaxMs, 100, "%.1f ms",
			fmt.Sprintf("%s leases, %d renders: p50 %.1f ms, max", sizeName(console.Console.Leases), console.Ops, console.Console.RenderP50Ms))
		if console.Console.Leases < consoleLeases {
			t.Name = fmt.Sprintf("console: a lease page renders in < 100 ms with %s leases", sizeName(console.Console.Leases))
		}
		ts = append(ts, t)
	} else {
		ts = append(ts, notMeasured(name))
	}
	return ts
}
