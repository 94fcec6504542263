package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/schedule"
)

// job is a registered job.
type job struct {
	id       string
	spec     string
	schedule *schedule.Schedule
	fn       Func
	cfg      jobConfig
}

// Add registers fn to run under the lease of jobID at every tick of spec
// (package schedule's syntax, its fields read in Config.Location unless it
// names a zone). It must be called before Serve. Every replica must register
// the same jobs with the same specs.
func (r *Runner) Add(jobID, spec string, fn Func, opts ...JobOption) error {
	if !leaseapi.ValidJobID(jobID) {
		return fmt.Errorf("add job %q: invalid job id: want ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", jobID)
	}
	if fn == nil {
		return fmt.Errorf("add job %q: nil job function", jobID)
	}
	sched, err := schedule.ParseIn(spec, r.location)
	if err != nil {
		return fmt.Errorf("add job %q: schedule %q: %w", jobID, spec, err)
	}
	cfg, err := newJobConfig(opts)
	if err != nil {
		return fmt.Errorf("add job %q: %w", jobID, err)
	}
	if cfg.schedule == "" {
		// leaseapi reads a spec without a zone in UTC: name this runner's.
		if cfg.schedule, err = schedule.InZone(spec, r.location); err != nil {
			return fmt.Errorf("add job %q: %w", jobID, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.serving {
		return fmt.Errorf("add job %q: the runner is already serving", jobID)
	}
	for _, j := range r.jobs {
		if j.id == jobID {
			return fmt.Errorf("add job %q: already added", jobID)
		}
	}
	r.jobs = append(r.jobs, &job{id: jobID, spec: spec, schedule: sched, fn: fn, cfg: cfg})
	return nil
}

// Serve runs the registered jobs at their ticks, and the ticks they owe
// (polled every OwedPollInterval), until ctx is cancelled.
// Then it takes no new ticks, cancels the running jobs (cause ErrShutdown),
// and returns when their leases are released, or with an error when
// ShutdownTimeout passes first. A Runner serves once.
func (r *Runner) Serve(ctx context.Context) error {
	r.mu.Lock()
	if r.serving {
		r.mu.Unlock()
		return errors.New("serve: the runner is already serving")
	}
	r.serving = true
	jobs := r.jobs
	r.mu.Unlock()
	if len(jobs) == 0 {
		return errors.New("serve: no jobs added")
	}

	r.logger.Info("runner started", slog.String("owner", r.owner), slog.Int("jobs", len(jobs)))
	var loops, runs sync.WaitGroup
	for _, j := range jobs {
		loops.Go(func() { r.schedule(ctx, j, &runs) })
	}
	if r.owedPollInterval > 0 {
		loops.Go(func() { r.pollOwed(ctx, jobs, &runs) })
	}
	// The loops return once ctx is done; after that no run is added.
	loops.Wait()

	r.logger.Info("runner stopping: waiting for running jobs", slog.Duration("timeout", r.shutdownTimeout))
	done := make(chan struct{})
	go func() {
		runs.Wait()
		close(done)
	}()
	timer := r.clock.NewTimer(r.shutdownTimeout)
	defer timer.Stop()
	select {
	case <-done:
		r.logger.Info("runner stopped")
		return nil
	case <-timer.Chan():
		return fmt.Errorf("serve: jobs still running %s after shutdown began", r.shutdownTimeout)
	}
}

// schedule fires j at its ticks until ctx is done. Each tick runs in its own
// goroutine, so that a long run does not delay the next tick; the next tick
// of a job still running here is skipped by Run.
func (r *Runner) schedule(ctx context.Context, j *job, runs *sync.WaitGroup) {
	next := j.schedule.Next(r.clock.Now())
	for !next.IsZero() {
		if !r.sleep(ctx, next.Sub(r.clock.Now())) {
			return
		}
		// After a pause (a stopped process, a suspended machine) several
		// ticks may be due: only the newest runs, the others are past.
		now := r.clock.Now()
		tick := next
		for n := j.schedule.Next(tick); !n.IsZero() && !n.After(now); n = j.schedule.Next(n) {
			tick = n
		}
		next = j.schedule.Next(tick)
		until := next // the tick is current until the next one
		runs.Go(func() { r.runTick(ctx, j, tick, until) })
	}
}

// runTick runs one tick of j; acquires are retried until the next tick.
func (r *Runner) runTick(ctx context.Context, j *job, tick, next time.Time) {
	rep, err := r.run(ctx, j.id, tick, next, next, j.fn, j.cfg)
	r.logNotRun(j.id, tick, rep, err)
}

// logNotRun logs a tick whose run did not start for a reason other than the
// normal ones (another replica has it, it is done, shutdown): finish logs
// every run that started, run logs skipped ticks at debug level.
func (r *Runner) logNotRun(jobID string, tick time.Time, rep Report, err error) {
	if err == nil || rep.Token != 0 ||
		Skipped(err) || errors.Is(err, ErrShutdown) {
		return
	}
	r.logger.Warn("tick not run", slog.String("job_id", jobID), slog.String("owner", r.owner),
		slog.String("tick", api.FormatTime(tick)), slog.Any("error", err))
}
