package jobs

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// DefaultOwedPollInterval is how often Serve asks leaseapi what its jobs
// owe, when Config.OwedPollInterval is zero.
const DefaultOwedPollInterval = 10 * time.Second

// owedBatch is the most job ids one POST /owed names (the server's limit).
const owedBatch = leaseapi.MaxOwedJobs

// batches splits ids into consecutive slices of at most n ids each, in
// order; none for no ids.
func batches(ids []string, n int) [][]string {
	var out [][]string
	for len(ids) > n {
		out = append(out, ids[:n:n])
		ids = ids[n:]
	}
	if len(ids) > 0 {
		out = append(out, ids)
	}
	return out
}

// pollJitter returns a wait in [0.8d, 1.2d): replicas started together do
// not poll together.
func pollJitter(d time.Duration) time.Duration {
	return d*4/5 + rand.N(d*2/5+1)
}

// pollOwed asks leaseapi every poll interval (jittered) what jobs owe, and
// claims each owed tick, until ctx is done. The first poll comes after a
// random share of one interval, so that a fleet restarted at once spreads
// its polls, and a replica back from an outage claims what is owed soon.
func (r *Runner) pollOwed(ctx context.Context, jobs []*job, runs *sync.WaitGroup) {
	byID := make(map[string]*job, len(jobs))
	ids := make([]string, 0, len(jobs))
	for _, j := range jobs {
		byID[j.id] = j
		ids = append(ids, j.id)
	}
	wait := rand.N(r.owedPollInterval + 1)
	for r.sleep(ctx, wait) {
		r.pollOnce(ctx, ids, byID, runs)
		wait = pollJitter(r.owedPollInterval)
	}
}

// pollOnce sends one POST /owed per batch of ids and starts a claim of each
// owed tick whose job does not run on this replica already. A job that runs
// here (its scheduled tick, or an earlier claim) is left for the next poll:
// a job never runs twice at once on one replica.
func (r *Runner) pollOnce(ctx context.Context, ids []string, byID map[string]*job, runs *sync.WaitGroup) {
	for _, batch := range batches(ids, owedBatch) {
		reqCtx, cancel := context.WithTimeout(ctx, r.requestTimeout)
		owed, skipped, err := postOwed(reqCtx, r.client, batch)
		cancel()
		for _, e := range skipped {
			r.logger.Error("owed tick skipped", slog.String("owner", r.owner), slog.Any("error", e))
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.logger.Warn("owed ticks not polled", slog.String("owner", r.owner),
				slog.Int("jobs", len(batch)), slog.Any("error", err))
			continue
		}
		for _, o := range owed {
			j, ok := byID[o.JobID]
			if !ok || r.isRunning(j.id) {
				continue
			}
			runs.Go(func() { r.claimOwed(ctx, j, o) })
		}
	}
}

// claimOwed runs j for the tick it owes, with an ordinary acquire of that
// tick: exactly one replica is granted it, the others skip quietly
// (lease_held, tick_done). Acquires are retried until the next poll, which
// asks again.
func (r *Runner) claimOwed(ctx context.Context, j *job, o leaseapi.Owed) {
	r.logger.Debug("claiming owed tick", slog.String("job_id", j.id), slog.String("owner", r.owner),
		slog.String("tick", api.FormatTime(o.Tick)), slog.String("reason", string(o.Reason)))
	retryUntil := r.clock.Now().Add(r.owedPollInterval)
	rep, err := r.run(ctx, j.id, o.Tick, retryUntil, time.Time{}, j.fn, j.cfg)
	r.logNotRun(j.id, o.Tick, rep, err)
}

func (r *Runner) isRunning(jobID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[jobID]
}

// errNoOwedRoute is why a poll failed against a leaseapi that has no
// POST /owed (an older version): the runner keeps its schedule and says so.
var errNoOwedRoute = errors.New("this leaseapi does not serve POST /owed (an older version?); set Config.OwedPollInterval to -1 to stop polling")
