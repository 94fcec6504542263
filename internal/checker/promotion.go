package checker

import "time"

// The faults of the failover suite (a Patroni cluster of three nodes).
const (
	LeaderKill     FaultKind = "leader_kill"     // SIGKILL of the leader's Patroni and Postgres, restarted once a new leader runs
	PostmasterKill FaultKind = "postmaster_kill" // SIGKILL of the leader's postmaster alone
	Switchover     FaultKind = "switchover"      // a planned switchover (Patroni REST /switchover)
	WALStall       FaultKind = "wal_stall"       // SIGSTOP of the leader's WAL senders past the request deadline, then SIGCONT
	WALStallKill   FaultKind = "wal_stall_kill"  // the same stall, ended by killing the leader
	LeaderFreeze   FaultKind = "leader_freeze"   // SIGSTOP of the leader's Patroni and Postgres until another node leads
	EtcdStop       FaultKind = "etcd_stop"       // the DCS stopped, then started again
)

// failover reports whether k is a fault of the failover suite.
func (k FaultKind) failover() bool {
	switch k {
	case LeaderKill, PostmasterKill, Switchover, WALStall, WALStallKill, LeaderFreeze, EtcdStop:
		return true
	}
	return false
}

// Promotion is what one fault of the failover suite did to the cluster:
// the leader and its WAL timeline before the fault, and once the cluster
// was healthy again (a leader, both standbys streaming, the old node back).
type Promotion struct {
	Kind FaultKind `json:"kind"`
	// Start is when the fault began, Healthy when the cluster was whole
	// again.
	Start, Healthy time.Time
	// MustPromote says the fault has to hand leadership to another node
	// (a kill, a switchover, a freeze); otherwise the timeline may stay
	// or move on (an etcd outage demotes the leader, which may come back).
	MustPromote              bool
	OldLeader, NewLeader     string
	OldTimeline, NewTimeline int
}

// timelineBase is the least token of a grant on timeline tl:
// (tl − 1) × 2^40.
func timelineBase[T int | int64](tl T) int64 { return int64(tl-1) << 40 }

// CheckPromotions adds to r (I1) what the promotions broke: a fault that
// must promote another node did, and the timeline advanced by exactly
// one; no fault took the timeline back; and every grant answered after
// the cluster was healthy again, until the next fault, carries a token of
// at least (timeline − 1) × 2^40, the new timeline's first token.
func CheckPromotions(h *History, r *Report, ps []Promotion) {
	for i, p := range ps {
		switch {
		case p.MustPromote && p.NewLeader == p.OldLeader:
			r.add("I1", "", "%s at %s: %s still leads once the cluster is healthy; no other node was promoted",
				p.Kind, fmtTime(p.Start), p.NewLeader)
		case p.MustPromote && p.NewTimeline != p.OldTimeline+1:
			r.add("I1", "", "%s at %s: the promotion of %s moved the timeline from %d to %d, not by one",
				p.Kind, fmtTime(p.Start), p.NewLeader, p.OldTimeline, p.NewTimeline)
		case p.NewTimeline < p.OldTimeline:
			r.add("I1", "", "%s at %s: the timeline went back from %d to %d", p.Kind, fmtTime(p.Start), p.OldTimeline, p.NewTimeline)
		}
		end := h.End // zero: open
		if i+1 < len(ps) {
			end = ps[i+1].Start
		}
		base := timelineBase(p.NewTimeline)
		for j := range h.Ops {
			o := &h.Ops[j]
			if !isGrant(o) || o.Call.Before(p.Healthy) || (!end.IsZero() && !o.Call.Before(end)) || o.Lease.AcquiredAt.Before(p.Healthy) {
				continue
			}
			if o.Lease.Token < base {
				r.add("I1", o.Job, "token %d granted to %s at %s on timeline %d is below that timeline's first token %d",
					o.Lease.Token, o.Lease.Owner, fmtTime(o.Lease.AcquiredAt), p.NewTimeline, base)
			}
		}
	}
}

// readDuringFailover reports whether o is a refusal (409) answered before
// the end of a fault of the failover suite. Such a refusal may have read a
// commit that a promotion then lost: a commit whose wait for the standby was
// cancelled is visible on the old primary alone until the failover, and was
// answered 503 to its caller. A refusal makes nobody run, so the service may
// answer it from such a read; it proves no grant, and the checks leave its
// lease out (I1's grants seen, I2's supersession, I4's history). Grants answered 200 to their
// holder, and every refusal after the last failover, still count.
func readDuringFailover(h *History, o *Op) bool {
	if o.Status != 409 || o.Return.IsZero() {
		return false
	}
	for _, f := range h.Faults {
		if f.Kind.failover() && (f.End.IsZero() || o.Call.Before(f.End)) {
			return true
		}
	}
	return false
}
