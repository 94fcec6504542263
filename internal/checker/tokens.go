package checker

import (
	"sort"
	"strconv"
	"time"
)

// grantKey identifies a grant: a job and its token.
type grantKey struct {
	job   string
	token int64
}

// grantSeen is a grant as an answer showed it.
type grantSeen struct {
	owner      string
	acquiredAt time.Time
	at         time.Time // the return of the call that showed it
	client     string
}

// checkTokens is I1: per job, the run history's tokens strictly increase in
// insertion order; every grant a client was shown has one owner and one
// start, is in the run history, and later grants carry greater tokens; the
// lease row's token is at least every token a client saw; and no
// acknowledged grant or release is lost (a restart loses no completed tick).
func checkTokens(h *History, idx *index, r *Report) {
	// The run history in insertion (commit) order.
	byID := make(map[string][]Run)
	for _, run := range h.Runs {
		byID[run.Job] = append(byID[run.Job], run)
	}
	for job, runs := range byID {
		sort.Slice(runs, func(i, j int) bool { return runs[i].ID < runs[j].ID })
		for i := 1; i < len(runs); i++ {
			if runs[i].Token <= runs[i-1].Token {
				r.add("I1", job, "run history: token %d inserted after token %d", runs[i].Token, runs[i-1].Token)
			}
		}
	}

	// Every lease an answer carried is a grant that happened.
	seen := make(map[grantKey]grantSeen)
	maxSeen := make(map[string]int64)
	var order []grantKey
	for i := range h.Ops {
		o := &h.Ops[i]
		if o.Lease == nil || o.Lease.Token <= 0 || o.Return.IsZero() || readDuringFailover(h, o) {
			continue
		}
		r.Stats.Grants += boolInt(isGrant(o) && o.Lease.AcquiredAt.Equal(o.Lease.RenewedAt))
		k := grantKey{o.Job, o.Lease.Token}
		g := grantSeen{owner: o.Lease.Owner, acquiredAt: o.Lease.AcquiredAt, at: o.Return, client: o.Client}
		prev, ok := seen[k]
		switch {
		case !ok:
			seen[k] = g
			order = append(order, k)
		case prev.owner != g.owner || !prev.acquiredAt.Equal(g.acquiredAt):
			r.add("I1", o.Job, "token %d reused: granted to %s at %s (seen by %s) and to %s at %s (seen by %s)",
				k.token, prev.owner, fmtTime(prev.acquiredAt), prev.client, g.owner, fmtTime(g.acquiredAt), g.client)
			// report each reuse once
			seen[k] = g
		}
		if k.token > maxSeen[o.Job] {
			maxSeen[o.Job] = k.token
		}
	}

	runByToken := make(map[grantKey]Run)
	for _, run := range h.Runs {
		runByToken[grantKey{run.Job, run.Token}] = run
	}
	// Without a run history (a unit test of other checks) there is nothing
	// to compare with.
	if len(h.Runs) > 0 {
		for _, k := range order {
			g := seen[k]
			run, ok := runByToken[k]
			switch {
			case !ok:
				r.add("I1", k.job, "grant of token %d to %s at %s (seen by %s) is missing from the run history (lost on a restart?)",
					k.token, g.owner, fmtTime(g.acquiredAt), g.client)
			case run.Owner != g.owner || !sameMilli(run.StartedAt, g.acquiredAt):
				r.add("I1", k.job, "token %d: a client saw it granted to %s at %s, the run history says %s at %s",
					k.token, g.owner, fmtTime(g.acquiredAt), run.Owner, fmtTime(run.StartedAt))
			}
		}
	}

	// An acknowledged release is durable: its run ended released, with
	// the outcome asked for (a restart loses no completed tick).
	if len(h.Runs) > 0 {
		for i := range h.Ops {
			o := &h.Ops[i]
			if o.Kind != Release || o.Result != ResultOK || o.Lease == nil || o.Lease.Owner != o.Owner || o.Lease.Token != o.Token {
				continue
			}
			run, ok := runByToken[grantKey{o.Job, o.Token}]
			if !ok || (run.Outcome != "succeeded" && run.Outcome != "failed") {
				r.add("I1", o.Job, "release of token %d by %s acknowledged at %s is lost: the run history says %q",
					o.Token, o.Owner, fmtTime(o.Return), run.Outcome)
			}
		}
	}

	// Later grants carry greater tokens.
	perJob := make(map[string][]grantKey)
	for _, k := range order {
		perJob[k.job] = append(perJob[k.job], k)
	}
	for job, keys := range perJob {
		sort.Slice(keys, func(i, j int) bool {
			a, b := seen[keys[i]].acquiredAt, seen[keys[j]].acquiredAt
			if a.Equal(b) {
				return keys[i].token < keys[j].token
			}
			return a.Before(b)
		})
		for i := 1; i < len(keys); i++ {
			a, b := seen[keys[i-1]], seen[keys[i]]
			if b.acquiredAt.Sub(a.acquiredAt) >= time.Millisecond && keys[i].token <= keys[i-1].token {
				r.add("I1", job, "token %d granted at %s after token %d granted at %s",
					keys[i].token, fmtTime(b.acquiredAt), keys[i-1].token, fmtTime(a.acquiredAt))
			}
		}
	}

	for _, row := range h.Leases {
		if m := maxSeen[row.Job]; m > row.Token {
			r.add("I1", row.Job, "the lease row has token %d, but clients saw token %d", row.Token, m)
		}
	}
}

// checkExclusion is I2: no two grants of a job are valid at once. A grant
// is valid at least until the latest send time of a successful acquire or
// heartbeat for it plus its ttl (the store set expiresAt from its own clock
// after receiving the call), unless a release of it was sent earlier; no
// greater token may be known to exist before then. The run history must
// agree: each run ended before the next one started.
func checkExclusion(h *History, idx *index, r *Report) {
	for job, ops := range idx.byJob {
		superseded := idx.supersededAt(job)
		type validity struct {
			renewCall time.Time
			until     time.Time
			release   time.Time
			owner     string
			client    string
		}
		valid := make(map[int64]*validity)
		get := func(tok int64) *validity {
			v := valid[tok]
			if v == nil {
				v = &validity{}
				valid[tok] = v
			}
			return v
		}
		for _, o := range ops {
			if o.Result == ResultOK && o.Lease != nil && o.Lease.Owner == o.Owner &&
				(o.Kind == Acquire || (o.Kind == Heartbeat && o.Token == o.Lease.Token)) {
				v := get(o.Lease.Token)
				ttl := o.TTL
				if ttl <= 0 {
					ttl = o.Lease.TTL
				}
				if v.renewCall.IsZero() || o.Call.After(v.renewCall) {
					v.renewCall, v.until, v.owner, v.client = o.Call, o.Call.Add(ttl), o.Owner, o.Client
				}
			}
		}
		for _, o := range ops {
			if o.Kind == Release && (o.Result == ResultOK || o.Result.Uncertain()) {
				if v := valid[o.Token]; v != nil && v.owner == o.Owner && (v.release.IsZero() || o.Call.Before(v.release)) {
					v.release = o.Call
				}
			}
		}
		toks := make([]int64, 0, len(valid))
		for t := range valid {
			toks = append(toks, t)
		}
		sort.Slice(toks, func(i, j int) bool { return toks[i] < toks[j] })
		for _, tok := range toks {
			v := valid[tok]
			until := v.until
			if !v.release.IsZero() && v.release.Before(until) {
				until = v.release
			}
			next := superseded(tok)
			if !next.IsZero() && next.Add(clockTolerance).Before(until) {
				r.add("I2", job, "token %d (%s) was valid until at least %s, but a greater token existed at %s (%s earlier)",
					tok, v.client, fmtTime(until), fmtTime(next), until.Sub(next).Round(time.Millisecond))
			}
		}
	}

	// The database's own account.
	for job, runs := range idx.runs {
		for i := 1; i < len(runs); i++ {
			prev, cur := runs[i-1], runs[i]
			switch {
			case prev.EndedAt.IsZero():
				r.add("I2", job, "run history: token %d still running when token %d started at %s",
					prev.Token, cur.Token, fmtTime(cur.StartedAt))
			case prev.EndedAt.After(cur.StartedAt.Add(clockTolerance)):
				r.add("I2", job, "run history: token %d ended at %s, after token %d started at %s",
					prev.Token, fmtTime(prev.EndedAt), cur.Token, fmtTime(cur.StartedAt))
			}
		}
	}
}

// checkHolderOnly is I3: a heartbeat or release succeeds only for the
// current grant: its answer is the caller's own grant, and no greater token
// was known to exist before it was sent.
func checkHolderOnly(h *History, idx *index, r *Report) {
	for job, ops := range idx.byJob {
		superseded := idx.supersededAt(job)
		for _, o := range ops {
			if o.Result != ResultOK || (o.Kind != Heartbeat && o.Kind != Release) {
				continue
			}
			if o.Lease == nil || o.Lease.Owner != o.Owner || o.Lease.Token != o.Token {
				got := "no lease"
				if o.Lease != nil {
					got = o.Lease.Owner + " token " + strconv.FormatInt(o.Lease.Token, 10)
				}
				r.add("I3", job, "%s by %s with token %d (%s) succeeded on another grant: %s",
					o.Kind, o.Owner, o.Token, o.Client, got)
				continue
			}
			next := superseded(o.Token)
			if o.Kind == Release && !o.Lease.ReleasedAt.IsZero() && !next.IsZero() && o.Lease.ReleasedAt.Before(next) {
				// The release was applied (releasedAt, database clock)
				// before the greater grant: this answer is a retry that read
				// it back before that grant committed, and changed nothing.
				continue
			}
			if !next.IsZero() && next.Add(clockTolerance).Before(o.Call) {
				r.add("I3", job, "%s by %s with token %d (%s) sent at %s succeeded, but a greater token existed at %s",
					o.Kind, o.Owner, o.Token, o.Client, fmtTime(o.Call), fmtTime(next))
			}
		}
	}
}

// checkTicks is I6: a tick released succeeded is never granted or run
// again, whatever owed it (the schedule, a catch-up, a trigger), and no
// tick before it is granted after it (lastCompletedTick) but an owed manual
// tick. The run history
// has at most one succeeded run per tick and no grant of the tick, or of
// an earlier one, after it; no client is granted the tick after seeing
// its release succeed; the fenced effects run a tick twice only when the
// earlier run did not succeed (and never in the fault-free phase).
func checkTicks(h *History, idx *index, r *Report) {
	type tickKey struct {
		job  string
		tick int64
	}
	done := make(map[tickKey]Run)
	for job, runs := range idx.runs {
		for _, run := range runs {
			if run.Tick.IsZero() || run.Outcome != "succeeded" {
				continue
			}
			k := tickKey{job, run.Tick.UnixMilli()}
			if prev, ok := done[k]; ok {
				r.add("I6", job, "tick %s succeeded twice: tokens %d and %d", fmtTime(run.Tick), prev.Token, run.Token)
				continue
			}
			done[k] = run
		}
		// Grants follow each other in token order, so a run succeeded
		// before every grant of a greater token: from then on its tick,
		// and every tick before it (lastCompletedTick), is done.
		var last *Run // the succeeded run of the newest tick so far
		for i, run := range runs {
			if run.Tick.IsZero() {
				continue
			}
			if d, ok := done[tickKey{job, run.Tick.UnixMilli()}]; ok && run.Token > d.Token {
				r.add("I6", job, "tick %s granted again (token %d at %s) after token %d released it succeeded at %s",
					fmtTime(run.Tick), run.Token, fmtTime(run.StartedAt), d.Token, fmtTime(d.EndedAt))
			} else if last != nil && run.Tick.Before(last.Tick) && run.Trigger != TriggerManual {
				// (A manual tick the job owed has not run: a later tick
				// that completed before its claim does not make it done.
				// That it was owed is checkOwedTicks' to judge.)
				r.add("I6", job, "tick %s granted (token %d at %s) after the later tick %s was released succeeded (token %d at %s): it was done",
					fmtTime(run.Tick), run.Token, fmtTime(run.StartedAt), fmtTime(last.Tick), last.Token, fmtTime(last.EndedAt))
			}
			if run.Outcome == "succeeded" && (last == nil || run.Tick.After(last.Tick)) {
				last = &runs[i]
			}
		}
	}

	// A grant's trigger, from the run history: a manual tick before a
	// succeeded tick may be granted when it was owed (checkOwedTicks). A
	// run a repair discarded (its tick lay ahead of the clock) does not
	// make its tick done, though its release was seen to succeed.
	trigger := make(map[grantKey]string)
	discarded := make(map[grantKey]bool)
	for _, run := range h.Runs {
		trigger[grantKey{run.Job, run.Token}] = run.Trigger
		discarded[grantKey{run.Job, run.Token}] = run.Outcome == "discarded"
	}
	for job, ops := range idx.byJob {
		for _, rel := range ops {
			if rel.Kind != Release || rel.Result != ResultOK || rel.Outcome != "succeeded" ||
				rel.Lease == nil || rel.Lease.Tick.IsZero() || discarded[grantKey{job, rel.Token}] {
				continue
			}
			for _, g := range ops {
				if isGrant(g) && g.Call.After(rel.Return) && !g.Lease.Tick.IsZero() &&
					!g.Lease.Tick.After(rel.Lease.Tick) && g.Lease.Token > rel.Token &&
					(g.Lease.Tick.Equal(rel.Lease.Tick) || trigger[grantKey{job, g.Lease.Token}] != TriggerManual) {
					r.add("I6", job, "tick %s granted to %s (token %d) after %s saw its release succeed",
						fmtTime(g.Lease.Tick), g.Owner, g.Lease.Token, rel.Client)
				}
			}
		}
	}

	checkOwedTicks(h, idx, r)

	runOutcome := make(map[grantKey]string)
	for _, run := range h.Runs {
		runOutcome[grantKey{run.Job, run.Token}] = run.Outcome
	}
	starts := make(map[tickKey][]WitnessRun)
	for _, w := range h.Witness {
		if w.Tick.IsZero() {
			continue
		}
		k := tickKey{w.Job, w.Tick.UnixMilli()}
		starts[k] = append(starts[k], w)
	}
	for k, ws := range starts {
		if len(ws) < 2 {
			continue
		}
		sort.Slice(ws, func(i, j int) bool { return ws[i].Token < ws[j].Token })
		r.Stats.DuplicateTickRuns += len(ws) - 1
		for i := 1; i < len(ws); i++ {
			prev := ws[i-1]
			if out := runOutcome[grantKey{prev.Job, prev.Token}]; out == "succeeded" {
				r.add("I6", k.job, "tick %s executed again by token %d after token %d succeeded",
					fmtTime(prev.Tick), ws[i].Token, prev.Token)
			}
			if !h.FaultFreeUntil.IsZero() && ws[i].StartedAt.Before(h.FaultFreeUntil) {
				r.add("I6", k.job, "tick %s executed twice (tokens %d and %d) without any fault",
					fmtTime(prev.Tick), prev.Token, ws[i].Token)
			}
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
