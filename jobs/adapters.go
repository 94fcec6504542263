package jobs

import (
	"context"
	"errors"
	"sync"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/robfig/cron/v3"
)

// Adapters for the schedulers Go programs already use. Neither gocron nor
// robfig/cron tells a locker or a job wrapper the time a run was scheduled
// for, so the adapters take the tick to be the runner clock's time rounded
// to Config.TickPrecision (1s by default). That is canonical for schedules
// that fire at whole seconds (cron specs) as long as the replicas' clocks
// agree within half the precision; interval jobs that count from each
// replica's start time (gocron's DurationJob, robfig's @every) get
// different ticks on every replica, and may then run once per replica and
// interval. jobs.Runner's own schedule has neither limit.

// Locker is a gocron v2 Locker backed by leaseapi leases:
//
//	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(runner.Locker()))
//
// Lock acquires the lease of the job (the key is the gocron job's name,
// which must be a valid job id: set it with gocron.WithName), and the lease
// is heartbeated until Unlock releases it. gocron's job function cannot be
// cancelled by the locker: when the lease is lost while the job runs, the
// locker logs it and Unlock returns the error. Register JobFailed as an
// AfterJobRunsWithError listener to release failed runs as failed rather
// than succeeded.
type Locker struct {
	r *Runner

	mu sync.Mutex
	// failed holds the error a held lock's job reported through JobFailed.
	failed map[string]error
	// held is the set of keys this locker holds.
	held map[string]bool
}

// Locker returns a gocron Locker that uses this runner's client, owner, TTL
// and heartbeats.
func (r *Runner) Locker() *Locker {
	return &Locker{r: r, failed: make(map[string]error), held: make(map[string]bool)}
}

// Lock acquires the lease of key for the current tick. It returns an error
// wrapping leaseapi.ErrLeaseHeld or leaseapi.ErrTickDone when another
// replica has the tick, which makes gocron skip the run.
func (l *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	r := l.r
	tick := r.clock.Now().Round(r.tickPrecision)
	lk := &lock{
		locker:   l,
		key:      key,
		unlock:   make(chan error, 1),
		acquired: make(chan struct{}),
		done:     make(chan struct{}),
	}
	go func() {
		defer close(lk.done)
		// Detached from ctx: gocron cancels the job's context on shutdown
		// while the job may still run; the lease is held until Unlock.
		lk.report, lk.err = r.run(context.WithoutCancel(ctx), key, tick, tick.Add(r.tickPrecision/2),
			func(jobCtx context.Context) error {
				l.setHeld(key, true)
				close(lk.acquired)
				select {
				case err := <-lk.unlock:
					return err
				case <-jobCtx.Done():
					// Lost: nothing to release; Unlock reports it.
					return context.Cause(jobCtx)
				}
			}, jobConfig{})
		l.setHeld(key, false)
	}()
	select {
	case <-lk.acquired:
		return lk, nil
	case <-lk.done:
		return nil, lk.err
	}
}

// JobFailed records that the job named jobName failed with err, so that
// Unlock releases its lease with outcome failed. Register it with
// gocron.WithEventListeners(gocron.AfterJobRunsWithError(locker.JobFailed)).
func (l *Locker) JobFailed(_ uuid.UUID, jobName string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[jobName] {
		if err == nil {
			err = errors.New("job failed")
		}
		l.failed[jobName] = err
	}
}

func (l *Locker) setHeld(key string, held bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if held {
		l.held[key] = true
	} else {
		delete(l.held, key)
	}
	delete(l.failed, key)
}

func (l *Locker) takeFailure(key string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.failed[key]
	delete(l.failed, key)
	return err
}

// lock is a held lease, released by Unlock.
type lock struct {
	locker   *Locker
	key      string
	once     sync.Once
	unlock   chan error
	acquired chan struct{}
	done     chan struct{}
	// report and err are set by the run before done is closed.
	report Report
	err    error
}

// Unlock releases the lease: succeeded, or failed when JobFailed reported an
// error. It waits for the release (bounded by the lease's TTL, whatever ctx
// says, so that the outcome is recorded) and returns an error when the lease
// was lost while the job ran.
func (lk *lock) Unlock(context.Context) error {
	lk.once.Do(func() { lk.unlock <- lk.locker.takeFailure(lk.key) })
	<-lk.done
	if lk.report.Result == ResultLost {
		return lk.err
	}
	return nil
}

// CronJobWrapper returns a robfig/cron JobWrapper that runs the wrapped job
// under the lease of jobID:
//
//	c.AddJob("0 * * * *", cron.NewChain(runner.CronJobWrapper("hourly-report")).Then(job))
//
// A job that implements ContextJob gets the run's context (cancelled when
// the lease is lost; LeaseFromContext has the token), and its error releases
// the lease failed; for a plain cron.Job a panic does.
func (r *Runner) CronJobWrapper(jobID string) cron.JobWrapper {
	return func(j cron.Job) cron.Job {
		fn := func(context.Context) error {
			j.Run()
			return nil
		}
		if cj, ok := j.(ContextJob); ok {
			fn = cj.RunContext
		}
		return cron.FuncJob(func() {
			tick := r.clock.Now().Round(r.tickPrecision)
			rep, err := r.run(context.Background(), jobID, tick, tick.Add(r.tickPrecision/2), fn, jobConfig{})
			r.logNotRun(jobID, tick, rep, err)
		})
	}
}

// ContextJob is a robfig/cron job that accepts the run's context.
// CronJobWrapper calls RunContext instead of Run.
type ContextJob interface {
	cron.Job
	RunContext(ctx context.Context) error
}
