package checker

import (
	"testing"
	"time"
)

// promoted is legal() with the last grant (token 4, acquired at 7.102 s)
// answered with token tok on timeline tl; every earlier answer names
// timeline 1. A promotion at 6 s, healthy again at 7 s, puts the cluster
// on timeline 2, whose first token is 2^40.
func promoted(tok, tl int64) *History {
	h := legal()
	for i := range h.Ops {
		l := h.Ops[i].Lease
		if l == nil {
			continue
		}
		c := *l
		c.Timeline = 1
		if c.Token == 4 {
			c.Token, c.Timeline = tok, tl
		}
		h.Ops[i].Lease = &c
	}
	for i := range h.Runs {
		if h.Runs[i].Token == 4 {
			h.Runs[i].Token = tok
		}
	}
	for i := range h.Leases {
		if h.Leases[i].Token == 4 {
			h.Leases[i].Token = tok
		}
	}
	for i := range h.Witness {
		if h.Witness[i].Token == 4 {
			h.Witness[i].Token = tok
		}
	}
	for i := range h.Beliefs {
		if h.Beliefs[i].Token == 4 {
			h.Beliefs[i].Token = tok
		}
	}
	h.Faults = append(h.Faults, Fault{Kind: LeaderKill, Start: at(6000), End: at(7000)})
	return h
}

// promotion is the leader kill of promoted: pg0 on timeline 1, then pg1
// on timeline 2.
func promotion() Promotion {
	return Promotion{
		Kind: LeaderKill, Start: at(6000), Healthy: at(7000), MustPromote: true,
		OldLeader: "pg0", NewLeader: "pg1", OldTimeline: 1, NewTimeline: 2,
	}
}

// TestTimelineJump: after a promotion a grant's token is the greater of
// the previous token + 1 and the new timeline's first token, (timeline −
// 1) × 2^40 — and I4 allows that one jump only when the answer names the
// new timeline.
func TestTimelineJump(t *testing.T) {
	t.Parallel()
	first := timelineBase(2)
	for _, tt := range []struct {
		name  string
		tok   int64
		tl    int64
		legal bool
	}{
		{"FirstTokenOfTheNewTimeline", first, 2, true},
		{"NoTimelineChangeNoJump", 4, 1, true},
		{"TimelineUnnamed", 4, 0, true},
		{"JumpWithoutTimelineChange", first, 1, false},
		{"JumpWithoutTimelineNamed", first, 0, false},
		{"JumpPastTheFirstToken", first + 1, 2, false},
		{"NewTimelineButPlusOne", 4, 2, false},
		{"JumpOfTwoTimelines", timelineBase(3), 2, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := check(t, promoted(tt.tok, tt.tl))
			if got := !r.Caught("I4"); got != tt.legal {
				t.Errorf("token %d on timeline %d: legal %v, want %v; violations %v", tt.tok, tt.tl, got, tt.legal, r.Violations)
			}
		})
	}
}

// TestUnknownGrantOnTheNewTimeline: an acquire whose answer was lost may
// have been granted on a timeline another answer named; a heartbeat that
// later shows its token explains it.
func TestUnknownGrantOnTheNewTimeline(t *testing.T) {
	t.Parallel()
	first := timelineBase(2)
	h := promoted(first, 2)
	// a's acquire at 7.1 s lost its answer; a's heartbeat at 7.5 s shows
	// the grant (token 2^40, timeline 2).
	for i := range h.Ops {
		o := &h.Ops[i]
		if o.Kind == Acquire && o.Lease != nil && o.Lease.Token == first {
			hb := lease("a", first, 7102, 7502, 3, 1)
			hb.Timeline = 2
			h.Ops = append(h.Ops, heartbeatOp("a", first, 7500, 7505, ResultOK, hb))
			o.Result, o.Status, o.Lease, o.Return = ResultUnknown, 0, nil, time.Time{}
			o.Err = "connection reset by peer"
			break
		}
	}
	if r := check(t, h); r.Caught("I4") {
		t.Errorf("violations %v", r.Violations)
	}
}

// TestCheckPromotions: each way a promotion can break its promises is
// named by I1, on the run history as read once the cluster was whole.
func TestCheckPromotions(t *testing.T) {
	t.Parallel()
	first := timelineBase(2)
	for _, tt := range []struct {
		name   string
		h      func() *History
		p      func(p *Promotion)
		caught bool
	}{
		{name: "Legal", h: func() *History { return promoted(first, 2) }},
		{name: "EtcdStopKeepsTheLeader", h: func() *History { return promoted(4, 1) }, p: func(p *Promotion) {
			p.Kind, p.MustPromote, p.NewLeader, p.NewTimeline = EtcdStop, false, "pg0", 1
		}},
		{name: "NoOtherNodePromoted", h: func() *History { return promoted(first, 2) }, p: func(p *Promotion) {
			p.NewLeader = "pg0"
		}, caught: true},
		{name: "TimelineSkipped", h: func() *History { return promoted(first, 2) }, p: func(p *Promotion) {
			p.NewTimeline = 3
		}, caught: true},
		{name: "TimelineStayedAfterPromotion", h: func() *History { return promoted(4, 1) }, p: func(p *Promotion) {
			p.NewTimeline = 1
		}, caught: true},
		{name: "TimelineWentBack", h: func() *History { return promoted(4, 1) }, p: func(p *Promotion) {
			p.Kind, p.MustPromote, p.OldTimeline, p.NewTimeline = EtcdStop, false, 2, 1
		}, caught: true},
		{name: "TokenBelowTheNewTimeline", h: func() *History { return promoted(4, 2) }, caught: true},
		{name: "AcknowledgedGrantLost", h: func() *History {
			h := promoted(first, 2)
			h.Runs = h.Runs[:len(h.Runs)-1] // the run of token 2^40 is gone
			return h
		}, caught: true},
		{name: "AcknowledgedReleaseLost", h: func() *History {
			h := promoted(first, 2)
			h.Runs[1].Outcome, h.Runs[1].EndedAt = "running", time.Time{} // b's release of token 2
			return h
		}, caught: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := tt.h()
			p := promotion()
			if tt.p != nil {
				tt.p(&p)
			}
			r := check(t, h)
			CheckPromotions(h, r, []Promotion{p})
			if got := r.Caught("I1"); got != tt.caught {
				t.Errorf("I1 caught %v, want %v; violations %v", got, tt.caught, r.Violations)
			}
		})
	}
}

// TestRefusalDuringFailoverProvesNoGrant: a refusal answered while the
// leader was being replaced may show a grant whose commit the promotion
// lost (its caller was answered 503); it is left out of I1 and I4. The
// same refusal outside a failover fault must be a grant that happened.
func TestRefusalDuringFailoverProvesNoGrant(t *testing.T) {
	t.Parallel()
	refusal := func(h *History) *History {
		ghost := lease("c", 5, 6400, 6400, 3, 1)
		ghost.Timeline = 1
		h.Ops = append(h.Ops, acquireOp("b", 3, 6500, 6505, ResultHeld, ghost))
		return h
	}
	if r := check(t, refusal(promoted(timelineBase(2), 2))); r.Failed() {
		t.Errorf("during the failover: violations %v", r.Violations)
	}
	h := refusal(promoted(timelineBase(2), 2))
	h.Faults = nil
	if r := check(t, h); !r.Caught("I1") {
		t.Errorf("without a failover: I1 not caught; violations %v", r.Violations)
	}
}
