package checker

import (
	"fmt"
	"hash/fnv"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// The porcupine model of one job's lease (I4). Time matters to a lease: a
// grant is legal only when the previous one has expired, by the store's
// clock at the moment of the decision. The model knows that clock only
// through the calls: the decision of a call happened between its send and
// its return (one host, one clock), and a successful answer names the
// decision's instant (renewedAt, releasedAt; truncated to milliseconds).
// The state therefore keeps the expiry as an interval [ExpLo, ExpHi) and a
// lower bound Now of the store clock at the last write, and a refusal is
// legal when some instant in its window makes it so. A refusal that carried
// the lease it read (every 409 does) is checked against that lease.
//
// Calls whose outcome is unknown (503, no answer) never return, for
// porcupine: they may take effect at any later point or not at all, and
// their effect may have happened at any instant after their send. The
// nondeterministic model branches on both.

const (
	msNS  = int64(time.Millisecond)
	never = int64(math.MaxInt64)
)

// mState is the lease of one job as the model knows it.
type mState struct {
	Exists bool
	Owner  string
	Token  int64
	Tick   int64 // unix ms; 0: none
	// The expiry is in [ExpLo, ExpHi) (unix ns); ExpHi is never when an
	// unknown renewal may have extended it by an unknown amount.
	ExpLo, ExpHi int64
	// Ended: released by its holder. (The suite revokes nothing.)
	Ended    bool
	LastDone int64 // unix ms of lastCompletedTick; 0: none
	// TickOwed: the grant took its tick as it was owed (a manual tick);
	// OwedDone is the newest such tick released succeeded (unix ms; 0:
	// none). Manual ticks only grow, so one that is not after it was owed
	// and has run: it is done whatever lastCompletedTick says.
	TickOwed bool
	OwedDone int64
	// Now is a lower bound of the store clock when the last write (in
	// linearization order) executed. Writes take the row lock, so their
	// execution times follow their order. Refusals do not move it: a
	// refusal reads the committed state, and a write that executed (and
	// stamped its time) before the refusal's read may commit after it.
	Now int64
}

// mInput is a call.
type mInput struct {
	Kind   OpKind
	Client string
	Owner  string
	Token  int64
	Tick   int64 // unix ms; 0: none
	// Snap is the newest tick of the schedule before Tick when Tick is
	// not one (a manual tick), else 0: an acquire of a manual tick that
	// is no longer owed is snapped to it, as any off-schedule tick is.
	Snap int64
	// Owed: the branch of an acquire of a manual tick that takes it as it
	// is, because the job owes it. An owed tick has not run, so it is not
	// done when a later tick completed before its claim; whether it was
	// owed at all is judged apart (checkOwedTicks).
	Owed      bool
	TTL       int64 // ns
	Succeeded bool  // release outcome
	Call      int64 // unix ns
	Return    int64 // unix ns; never for an unknown outcome
	// Timelines are the WAL timelines the history's answers named,
	// ascending: a grant of unknown outcome may have been written on any.
	Timelines []int64
}

// mOutput is its answer: the lease of a 200, or the lease a 409 carried
// (HasLease).
type mOutput struct {
	Result   Result
	HasLease bool
	Lease    mLease
}

// mLease is the part of an answered lease the model reads (times in unix
// ns, truncated to ms as on the wire; ticks in unix ms).
type mLease struct {
	Owner      string
	Token      int64
	State      string
	Tick       int64
	AcquiredAt int64
	RenewedAt  int64
	ExpiresAt  int64
	ReleasedAt int64
	LastDone   int64
	Timeline   int64 // 0: not named
}

func unixMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func unixNS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// window reports whether a decision named by an answer at tw (truncated to
// the millisecond) can lie after the model's clock and inside the call.
func window(s mState, in mInput, tw int64) bool {
	return tw+msNS > s.Now && tw+msNS > in.Call && tw <= in.Return
}

func maxI(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

func minI(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}

func addSat(a, b int64) int64 {
	if a == never || b == never || a > never-b {
		return never
	}
	return a + b
}

func tickDone(s mState, tick int64) bool {
	return tick != 0 && s.LastDone != 0 && tick <= s.LastDone
}

// doneFor is tickDone for the acquire in: the tick of an owed branch is
// done only once it ran as an owed tick (OwedDone).
func doneFor(s mState, in mInput) bool {
	if in.Owed {
		return in.Tick != 0 && in.Tick <= s.OwedDone
	}
	return tickDone(s, in.Tick)
}

// heldBySame reports whether the caller would renew: it holds the lease for
// the same tick (or asks for none).
func heldBySame(s mState, in mInput) bool {
	return s.Exists && !s.Ended && s.Owner == in.Owner && (in.Tick == 0 || s.Tick == in.Tick)
}

func step(s mState, in mInput, out mOutput) []mState {
	if in.Snap != 0 {
		// The service decides whether the tick is still owed (then it is
		// asked for as it is) or not (then it is snapped); both are legal.
		snapped := in
		snapped.Tick, snapped.Snap = in.Snap, 0
		in.Snap, in.Owed = 0, true
		return append(step(s, in, out), step(s, snapped, out)...)
	}
	if out.Result.Uncertain() {
		return append([]mState{s}, effects(s, in)...)
	}
	switch in.Kind {
	case Acquire:
		return stepAcquire(s, in, out)
	case Heartbeat:
		return stepHeartbeat(s, in, out)
	case Release:
		return stepRelease(s, in, out)
	}
	return nil
}

func stepAcquire(s mState, in mInput, out mOutput) []mState {
	t0 := maxI(s.Now, in.Call)
	switch out.Result {
	case ResultOK:
		l := out.Lease
		tw := l.RenewedAt
		if !window(s, in, tw) || l.Owner != in.Owner || (doneFor(s, in) && !heldBySame(s, in)) || l.LastDone != s.LastDone {
			return nil
		}
		ns := s
		ns.Now = maxI(s.Now, tw)
		ns.ExpLo, ns.ExpHi = l.ExpiresAt, l.ExpiresAt+msNS
		if s.Exists && l.Token == s.Token {
			// A renewal: the caller held it, for this tick, at the decision.
			if !heldBySame(s, in) || s.ExpHi <= tw || (in.Tick != 0 && l.Tick != in.Tick) {
				return nil
			}
			return []mState{ns}
		}
		if l.Token != nextToken(s, l.Timeline) || l.AcquiredAt != l.RenewedAt || l.Tick != in.Tick {
			return nil
		}
		// A grant: the previous one was over at the decision.
		if s.Exists && !s.Ended && s.ExpLo >= tw+msNS {
			return nil
		}
		ns.Exists, ns.Owner, ns.Token, ns.Tick, ns.Ended, ns.TickOwed = true, in.Owner, l.Token, in.Tick, false, in.Owed
		return []mState{ns}
	case ResultHeld:
		if !s.Exists || s.Ended || doneFor(s, in) || heldBySame(s, in) || t0 > in.Return {
			return nil
		}
		if l := out.Lease; out.HasLease && l.State == "held" {
			// The refusal came with the lease as it was read in the call:
			// held by someone else then, so the refusal holds at that read.
			if l.Owner == in.Owner && (in.Tick == 0 || l.Tick == in.Tick) {
				return nil
			}
			if ns, ok := constrain(s, in, l); ok {
				return []mState{ns}
			}
			return nil
		}
		if s.ExpHi <= t0 {
			return nil
		}
		ns := s
		ns.ExpLo = maxI(s.ExpLo, t0+1)
		return []mState{ns}
	case ResultTickDone:
		if !tickDone(s, in.Tick) || t0 > in.Return {
			return nil
		}
		return afterRefusal(s, in, out)
	case ResultGroupFull:
		// Refused for the job's group, a refusal that comes after
		// tick_done, a renewal and lease_held: the tick was not done and
		// the lease was not held at the decision. Nothing was written.
		if doneFor(s, in) || t0 > in.Return {
			return nil
		}
		ns := s
		if out.HasLease {
			var ok bool
			if ns, ok = constrain(s, in, out.Lease); !ok {
				return nil
			}
		}
		if ns.Exists && !ns.Ended {
			// Expired by the decision, which lies in the call.
			if ns.ExpLo > in.Return {
				return nil
			}
			ns.ExpHi = minI(ns.ExpHi, in.Return+1)
		}
		return []mState{ns}
	}
	// lease_lost and not_found are not answers to an acquire.
	return nil
}

func stepHeartbeat(s mState, in mInput, out mOutput) []mState {
	t0 := maxI(s.Now, in.Call)
	mine := s.Exists && !s.Ended && s.Owner == in.Owner && s.Token == in.Token
	switch out.Result {
	case ResultOK:
		l := out.Lease
		tw := l.RenewedAt
		if !mine || !window(s, in, tw) || l.Owner != in.Owner || l.Token != in.Token || s.ExpHi <= tw {
			return nil
		}
		ns := s
		ns.Now = maxI(s.Now, tw)
		ns.ExpLo, ns.ExpHi = l.ExpiresAt, l.ExpiresAt+msNS
		return []mState{ns}
	case ResultLost:
		if !s.Exists || t0 > in.Return {
			return nil
		}
		if l := out.Lease; out.HasLease {
			// The lease read after the refusal must refuse it too.
			if l.Owner == in.Owner && l.Token == in.Token && l.State == "held" {
				return nil
			}
			if ns, ok := constrain(s, in, l); ok {
				return []mState{ns}
			}
			return nil
		}
		ns := s
		if !mine {
			return []mState{ns}
		}
		// Still this caller's grant: it must have expired by the decision.
		te := maxI(t0, s.ExpLo)
		if te > in.Return {
			return nil
		}
		ns.ExpHi = minI(s.ExpHi, te+1)
		return []mState{ns}
	case ResultNotFound:
		if s.Exists || t0 > in.Return {
			return nil
		}
		return []mState{s}
	}
	return nil
}

func stepRelease(s mState, in mInput, out mOutput) []mState {
	t0 := maxI(s.Now, in.Call)
	mine := s.Exists && s.Owner == in.Owner && s.Token == in.Token
	switch out.Result {
	case ResultOK:
		l := out.Lease
		if !mine || l.Owner != in.Owner || l.Token != in.Token {
			return nil
		}
		if s.Ended {
			return []mState{s} // a retried release changes nothing
		}
		tw := l.ReleasedAt
		if tw == 0 || !window(s, in, tw) {
			return nil
		}
		ns := released(s, in)
		ns.Now = maxI(s.Now, tw)
		ns.ExpLo, ns.ExpHi = tw, tw+msNS
		if l.LastDone != ns.LastDone {
			return nil
		}
		return []mState{ns}
	case ResultLost:
		if !s.Exists || mine || t0 > in.Return {
			return nil
		}
		return afterRefusal(s, in, out)
	case ResultNotFound:
		if s.Exists || t0 > in.Return {
			return nil
		}
		return []mState{s}
	}
	return nil
}

// afterRefusal is the state after a refusal that changed nothing: s,
// narrowed to the lease the refusal carried if it carried one (constrain),
// or no state when that lease contradicts s.
func afterRefusal(s mState, in mInput, out mOutput) []mState {
	if !out.HasLease {
		return []mState{s}
	}
	if ns, ok := constrain(s, in, out.Lease); ok {
		return []mState{ns}
	}
	return nil
}

// constrain narrows s to the lease l that a refusal read during call in:
// the same grant (owner, token, tick, last completed tick), released or
// not as l says, its expiry within l's millisecond. The read happened
// after l's last renewal and inside the call; a held l was held then.
func constrain(s mState, in mInput, l mLease) (mState, bool) {
	if !s.Exists || s.Owner != l.Owner || s.Token != l.Token || s.Tick != l.Tick || s.LastDone != l.LastDone {
		return s, false
	}
	tr := maxI(maxI(s.Now, in.Call), l.RenewedAt)
	if tr > in.Return {
		return s, false
	}
	ns := s
	switch l.State {
	case "released":
		return ns, s.Ended
	case "held", "expired":
		if s.Ended {
			return s, false
		}
		ns.ExpLo, ns.ExpHi = maxI(s.ExpLo, l.ExpiresAt), minI(s.ExpHi, l.ExpiresAt+msNS)
		if ns.ExpLo >= ns.ExpHi {
			return s, false
		}
		if l.State == "held" && ns.ExpHi <= tr {
			return s, false
		}
		if l.State == "expired" && ns.ExpLo > in.Return {
			return s, false
		}
		return ns, true
	}
	return s, false
}

func released(s mState, in mInput) mState {
	ns := s
	ns.Ended = true
	if in.Succeeded && s.Tick != 0 && s.Tick > s.LastDone {
		ns.LastDone = s.Tick
	}
	if in.Succeeded && s.TickOwed && s.Tick > s.OwedDone {
		ns.OwedDone = s.Tick
	}
	return ns
}

// nextToken is the token of the grant after s written on timeline tl
// (0: not named): the previous token + 1, or the timeline's first token
// (timeline − 1) × 2^40 when that is greater — the one jump a promotion
// allows, and only when the answer names the new timeline.
func nextToken(s mState, tl int64) int64 {
	want := int64(1)
	if s.Exists {
		want = s.Token + 1
	}
	if tl > 0 {
		want = max(want, timelineBase(tl))
	}
	return want
}

// effects are the states a call of unknown outcome may have produced, had
// it taken effect (the caller adds "no effect").
func effects(s mState, in mInput) []mState {
	t0 := maxI(s.Now, in.Call)
	var out []mState
	switch in.Kind {
	case Acquire:
		if doneFor(s, in) {
			return nil
		}
		if heldBySame(s, in) && s.ExpHi > t0 {
			ns := s
			ns.ExpLo, ns.ExpHi = t0+in.TTL, addSat(s.ExpHi, in.TTL)
			ns.Now = t0
			out = append(out, ns)
		}
		d := t0
		if s.Exists && !s.Ended {
			d = maxI(t0, s.ExpLo)
		}
		toks := []int64{nextToken(s, 0)}
		for _, tl := range in.Timelines {
			if t := nextToken(s, tl); t != toks[len(toks)-1] {
				toks = append(toks, t)
			}
		}
		for _, tok := range toks {
			out = append(out, mState{
				Exists: true, Owner: in.Owner, Token: tok, Tick: in.Tick,
				ExpLo: d + in.TTL, ExpHi: never, LastDone: s.LastDone, Now: d,
				TickOwed: in.Owed, OwedDone: s.OwedDone,
			})
		}
	case Heartbeat:
		if s.Exists && !s.Ended && s.Owner == in.Owner && s.Token == in.Token && s.ExpHi > t0 {
			ns := s
			ns.ExpLo, ns.ExpHi = t0+in.TTL, addSat(s.ExpHi, in.TTL)
			ns.Now = t0
			out = append(out, ns)
		}
	case Release:
		if s.Exists && !s.Ended && s.Owner == in.Owner && s.Token == in.Token {
			ns := released(s, in)
			ns.ExpLo, ns.ExpHi = t0, never
			ns.Now = t0
			out = append(out, ns)
		}
	}
	return out
}

// leaseModel is the porcupine model of one job's lease.
func leaseModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []interface{} { return []interface{}{mState{}} },
		Step: func(state, input, output interface{}) []interface{} {
			next := step(state.(mState), input.(mInput), output.(mOutput))
			out := make([]interface{}, len(next))
			for i := range next {
				out[i] = next[i]
			}
			return out
		},
		Equal: func(a, b interface{}) bool { return a.(mState) == b.(mState) },
		Hash: func(state interface{}) uint64 {
			s := state.(mState)
			h := fnv.New64a()
			fmt.Fprintf(h, "%t|%s|%d|%d|%d|%d|%t|%d|%t|%d|%d", s.Exists, s.Owner, s.Token, s.Tick, s.ExpLo, s.ExpHi, s.Ended, s.LastDone, s.TickOwed, s.OwedDone, s.Now)
			return h.Sum64()
		},
		DescribeOperation: func(input, output interface{}) string {
			in, out := input.(mInput), output.(mOutput)
			var call string
			switch in.Kind {
			case Acquire:
				call = fmt.Sprintf("acquire(%s, tick %s)", in.Owner, msTime(in.Tick))
			case Heartbeat:
				call = fmt.Sprintf("heartbeat(%s, %d)", in.Owner, in.Token)
			case Release:
				call = fmt.Sprintf("release(%s, %d, succeeded=%t)", in.Owner, in.Token, in.Succeeded)
			}
			if out.Result != ResultOK {
				return call + " -> " + string(out.Result)
			}
			return fmt.Sprintf("%s -> ok %s #%d renewed %s expires %s", call, out.Lease.Owner, out.Lease.Token,
				nsTime(out.Lease.RenewedAt), nsTime(out.Lease.ExpiresAt))
		},
		DescribeState: func(state interface{}) string {
			s := state.(mState)
			if !s.Exists {
				return "none"
			}
			st := "held"
			if s.Ended {
				st = "released"
			}
			return fmt.Sprintf("%s #%d %s tick %s exp [%s, %s) done %s now %s", s.Owner, s.Token, st,
				msTime(s.Tick), nsTime(s.ExpLo), nsTime(s.ExpHi), msTime(s.LastDone), nsTime(s.Now))
		},
	}
	return nm.ToModel()
}

func msTime(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format("15:04:05.000")
}

func nsTime(ns int64) string {
	switch ns {
	case 0:
		return "-"
	case never:
		return "∞"
	}
	return time.Unix(0, ns).UTC().Format("15:04:05.000")
}

// timelines are the WAL timelines the answers of h named, ascending.
func timelines(h *History) []int64 {
	var out []int64
	for i := range h.Ops {
		if l := h.Ops[i].Lease; l != nil && l.Timeline > 0 && !slices.Contains(out, l.Timeline) {
			out = append(out, l.Timeline)
		}
	}
	slices.Sort(out)
	return out
}

// toOperations turns the calls of one job into porcupine operations. Calls
// that never reached the service or were refused as bad input had no effect
// and are left out. timelines are the WAL timelines the history's answers
// named. period is the jobs' schedule (every period since the epoch; zero
// for none): an acquire of a tick between two of its ticks may be snapped
// to the earlier one.
func toOperations(ops []*Op, horizon int64, timelines []int64, period time.Duration) []porcupine.Operation {
	clients := make(map[string]int)
	var out []porcupine.Operation
	for _, o := range ops {
		if o.Result == ResultNotSent || o.Result == ResultRejected {
			continue
		}
		id, ok := clients[o.Client]
		if !ok {
			id = len(clients)
			clients[o.Client] = id
		}
		in := mInput{
			Kind: o.Kind, Client: o.Client, Owner: o.Owner, Token: o.Token, Tick: unixMS(o.Tick),
			TTL: int64(o.TTL), Succeeded: o.Outcome != "failed", Call: o.Call.UnixNano(), Return: horizon,
			Timelines: timelines,
		}
		if p := period.Milliseconds(); p > 0 && in.Tick != 0 && in.Tick%p != 0 {
			in.Snap = in.Tick - in.Tick%p
		}
		res := mOutput{Result: o.Result}
		if o.Result.Uncertain() || o.Return.IsZero() {
			res.Result = ResultUnknown
		} else {
			in.Return = o.Return.UnixNano()
		}
		if res.Result != ResultUnknown && o.Lease != nil {
			l := o.Lease
			res.HasLease = true
			res.Lease = mLease{
				Owner: l.Owner, Token: l.Token, State: l.State, Tick: unixMS(l.Tick),
				AcquiredAt: unixNS(l.AcquiredAt), RenewedAt: unixNS(l.RenewedAt),
				ExpiresAt: unixNS(l.ExpiresAt), ReleasedAt: unixNS(l.ReleasedAt),
				LastDone: unixMS(l.LastCompletedTick), Timeline: l.Timeline,
			}
		}
		out = append(out, porcupine.Operation{
			ClientId: id, Input: in, Call: in.Call, Output: res, Return: in.Return,
		})
	}
	return out
}

// linearizability keeps what is needed to visualize failed jobs.
type linearizability struct {
	model  porcupine.Model
	failed map[string][]porcupine.Operation
}

// checkLinearizable is I4: porcupine checks every job's calls against the
// lease model, jobs in parallel, each within timeout. Unknown (the search
// timed out) counts as a failure: an unchecked history proves nothing.
func checkLinearizable(h *History, r *Report, timeout time.Duration) {
	model := leaseModel()
	var horizon int64
	for i := range h.Ops {
		horizon = maxI(horizon, h.Ops[i].Call.UnixNano())
		if !h.Ops[i].Return.IsZero() {
			horizon = maxI(horizon, h.Ops[i].Return.UnixNano())
		}
	}
	horizon += int64(time.Hour)
	// A call of unknown outcome could only have taken effect on a grant
	// to its owner: an acquire's grant (or renewal) is a run of its owner
	// for its tick, a heartbeat's or release's the run of its token. The
	// run history resolves the calls that had none, which keeps the search
	// from branching on hundreds of retried acquires that were refused.
	type runKey struct {
		job, owner  string
		tick, token int64
	}
	runs := make(map[runKey]bool)
	for _, run := range h.Runs {
		runs[runKey{run.Job, run.Owner, unixMS(run.Tick), 0}] = true
		runs[runKey{run.Job, run.Owner, 0, run.Token}] = true
	}
	byJob := make(map[string][]*Op)
	for i := range h.Ops {
		o := &h.Ops[i]
		if readDuringFailover(h, o) {
			continue // a read that proves nothing, and changed nothing
		}
		if len(h.Runs) > 0 && (o.Result.Uncertain() || o.Return.IsZero()) {
			k := runKey{o.Job, o.Owner, unixMS(o.Tick), 0}
			if o.Kind != Acquire {
				k = runKey{o.Job, o.Owner, 0, o.Token}
			}
			// An acquire of a manual tick may have been snapped to the
			// schedule's tick before it (see toOperations).
			snapped := k
			if p := h.Period.Milliseconds(); o.Kind == Acquire && p > 0 && k.tick%p != 0 {
				snapped.tick -= k.tick % p
			}
			if !runs[k] && !runs[snapped] {
				continue
			}
		}
		byJob[o.Job] = append(byJob[o.Job], o)
	}
	jobs := make([]string, 0, len(byJob))
	for j := range byJob {
		jobs = append(jobs, j)
	}
	sort.Strings(jobs)
	tls := timelines(h)

	type verdict struct {
		job string
		res porcupine.CheckResult
		ops []porcupine.Operation
	}
	results := make(chan verdict, len(jobs))
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for _, job := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			ops := toOperations(byJob[job], horizon, tls, h.Period)
			res := porcupine.CheckOperationsTimeout(model, ops, timeout)
			results <- verdict{job, res, ops}
		}()
	}
	wg.Wait()
	close(results)
	r.lin = &linearizability{model: model, failed: make(map[string][]porcupine.Operation)}
	r.Stats.Linearizability = make(map[string]string)
	for v := range results {
		r.Stats.Linearizability[v.job] = string(v.res)
		switch v.res {
		case porcupine.Illegal:
			r.add("I4", v.job, "the history of %d calls is not linearizable with the lease model", len(v.ops))
			r.lin.failed[v.job] = v.ops
		case porcupine.Unknown:
			r.add("I4", v.job, "porcupine could not decide within %s (%d calls)", timeout, len(v.ops))
		}
	}
}

// WriteVisualizations writes one porcupine HTML visualization per job that
// failed I4 into dir, named history-<job>.html, and returns their paths.
// Each search is repeated with partial linearizations, bounded by timeout.
func (r *Report) WriteVisualizations(dir string, timeout time.Duration) ([]string, error) {
	if r.lin == nil {
		return nil, nil
	}
	var paths []string
	jobs := make([]string, 0, len(r.lin.failed))
	for j := range r.lin.failed {
		jobs = append(jobs, j)
	}
	sort.Strings(jobs)
	for _, job := range jobs {
		_, info := porcupine.CheckOperationsVerbose(r.lin.model, r.lin.failed[job], timeout)
		p := filepath.Join(dir, "history-"+job+".html")
		if err := porcupine.VisualizePath(r.lin.model, info, p); err != nil {
			return paths, fmt.Errorf("visualize %s: %w", job, err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}
