package repotest

import (
	"context"

	"github.com/leaseapi/leaseapi"
)

// GateStore is a store for testing store decorators: each lease call sends
// on Started when it starts and returns when Unblock is closed. Acquire
// returns a lease of the requested job with token 1, the other calls zero
// values; a batch waits once and answers each call as the single call;
// Ready answers at once. Its other methods are not implemented.
type GateStore struct {
	leaseapi.Store // nil: calling a method not listed here panics
	Started        chan struct{}
	Unblock        chan struct{}
}

// NewGateStore returns a GateStore with an unbuffered Started and an open Unblock.
func NewGateStore() *GateStore {
	return &GateStore{Started: make(chan struct{}), Unblock: make(chan struct{})}
}

func (g *GateStore) wait() { g.Started <- struct{}{}; <-g.Unblock }

func (g *GateStore) Acquire(_ context.Context, p *leaseapi.AcquireParams) (leaseapi.Lease, error) {
	g.wait()
	return leaseapi.Lease{JobID: p.JobID, Owner: p.Owner, Token: 1}, nil
}

func (g *GateStore) Heartbeat(context.Context, *leaseapi.HeartbeatParams) (leaseapi.Lease, error) {
	g.wait()
	return leaseapi.Lease{}, nil
}

func (g *GateStore) AcquireBatch(_ context.Context, ps []*leaseapi.AcquireParams) []leaseapi.Answer {
	g.wait()
	out := make([]leaseapi.Answer, len(ps))
	for i, p := range ps {
		out[i].Lease = leaseapi.Lease{JobID: p.JobID, Owner: p.Owner, Token: 1}
	}
	return out
}

func (g *GateStore) HeartbeatBatch(_ context.Context, ps []*leaseapi.HeartbeatParams) []leaseapi.Answer {
	g.wait()
	return make([]leaseapi.Answer, len(ps))
}

func (g *GateStore) Release(context.Context, *leaseapi.ReleaseParams) (leaseapi.Lease, error) {
	g.wait()
	return leaseapi.Lease{}, nil
}

func (g *GateStore) Revoke(context.Context, *leaseapi.RevokeParams) (leaseapi.Lease, error) {
	g.wait()
	return leaseapi.Lease{}, nil
}

func (g *GateStore) Get(context.Context, string) (leaseapi.Lease, error) {
	g.wait()
	return leaseapi.Lease{}, nil
}

func (g *GateStore) List(context.Context, *leaseapi.ListParams) (leaseapi.LeasePage, error) {
	g.wait()
	return leaseapi.LeasePage{}, nil
}

func (g *GateStore) Runs(context.Context, string, int) ([]leaseapi.Run, error) {
	g.wait()
	return nil, nil
}

func (g *GateStore) Ready(context.Context) error { return nil }

func (g *GateStore) Pause(context.Context, *leaseapi.PauseParams) (leaseapi.Lease, error) {
	g.wait()
	return leaseapi.Lease{}, nil
}

func (g *GateStore) Resume(context.Context, string) (leaseapi.Lease, error) {
	g.wait()
	return leaseapi.Lease{}, nil
}

func (g *GateStore) ForgetSchedule(context.Context, string) (leaseapi.Lease, error) {
	g.wait()
	return leaseapi.Lease{}, nil
}

func (g *GateStore) Stats(context.Context, string) (leaseapi.Stats, error) {
	g.wait()
	return leaseapi.Stats{}, nil
}

func (g *GateStore) JobHealth(context.Context, int) (leaseapi.JobHealthPage, error) {
	g.wait()
	return leaseapi.JobHealthPage{}, nil
}

func (g *GateStore) RecentRuns(context.Context, *leaseapi.RecentRunsParams) (leaseapi.RunPage, error) {
	g.wait()
	return leaseapi.RunPage{}, nil
}
