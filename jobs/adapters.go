package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/robfig/cron/v3"

	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/schedule"
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
//
// Given the job's spec (the Schedule option of CronJobWrapper or
// Locker.Job), an adapter sends it with its acquires and takes the tick
// from package schedule, as the runner does: the schedule's tick within
// half the precision of the firing. A firing with no tick there does not
// run (ErrNotATick): gocron and robfig/cron fire a daily 02:30 twice on the
// day the clock goes back, where the schedule has one tick, the first.
// They also skip a time the clock jumps over; that tick is recorded missed.

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
	// jobs holds the options of the keys set with Job.
	jobs map[string]adapterJob
	// failed holds the error a held lock's job reported through JobFailed.
	failed map[string]error
	// held is the set of keys this locker holds.
	held map[string]bool
}

// Locker returns a gocron Locker that uses this runner's client, owner, TTL
// and heartbeats.
func (r *Runner) Locker() *Locker {
	return &Locker{r: r, jobs: make(map[string]adapterJob), failed: make(map[string]error), held: make(map[string]bool)}
}

// Job sets the options of the gocron job named key: with Schedule(spec),
// the spec of its gocron.CronJob as leaseapi reads it (name the zone of
// gocron.WithLocation with CRON_TZ=), Lock sends spec and takes the tick
// from it; MaxRunTime and ProgressWindow are not available to a lock.
func (l *Locker) Job(key string, opts ...JobOption) error {
	j, err := l.r.adapterJob(opts)
	if err != nil {
		return fmt.Errorf("locker job %q: %w", key, err)
	}
	if j.cfg.maxRunTime != 0 || j.cfg.progressWindow != 0 {
		return fmt.Errorf("locker job %q: MaxRunTime and ProgressWindow need a job function the runner calls: use CronJobWrapper or Runner.Add", key)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.jobs[key] = j
	return nil
}

// Lock acquires the lease of key for the current tick. It returns an error
// wrapping leaseapi.ErrLeaseHeld or leaseapi.ErrTickDone when another
// replica has the tick, or ErrNotATick when gocron fired at a time that is
// not a tick of key's schedule (Job), which makes gocron skip the run.
func (l *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	r := l.r
	l.mu.Lock()
	j := l.jobs[key]
	l.mu.Unlock()
	tick, err := j.tick(r.clock.Now(), r.tickPrecision)
	if err != nil {
		return nil, fmt.Errorf("lock %q: %w", key, err)
	}
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
		lk.report, lk.err = r.run(context.WithoutCancel(ctx), key, tick, tick.Add(r.tickPrecision/2), j.nextTick(tick),
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
			}, j.cfg)
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
// under the lease of jobID, with opts as for Runner.Add:
//
//	c.AddJob("0 * * * *", cron.NewChain(runner.CronJobWrapper("hourly-report", jobs.Schedule("0 * * * *"))).Then(job))
//
// With Schedule(spec), the entry's spec as leaseapi reads it (name the zone
// of cron.WithLocation with CRON_TZ=), the acquires send spec and take the
// tick from it. A job that implements ContextJob gets the run's context
// (cancelled when the lease is lost; LeaseFromContext has the token), and
// its error releases the lease failed; for a plain cron.Job a panic does.
// An invalid option panics, as cron.NewChain has no error to return.
func (r *Runner) CronJobWrapper(jobID string, opts ...JobOption) cron.JobWrapper {
	aj, err := r.adapterJob(opts)
	if err != nil {
		panic(fmt.Sprintf("jobs: CronJobWrapper(%q): %v", jobID, err))
	}
	return func(j cron.Job) cron.Job {
		fn := func(context.Context) error {
			j.Run()
			return nil
		}
		if cj, ok := j.(ContextJob); ok {
			fn = cj.RunContext
		}
		return cron.FuncJob(func() {
			now := r.clock.Now()
			tick, err := aj.tick(now, r.tickPrecision)
			if err != nil {
				r.logger.Debug("tick not run", slog.String("job_id", jobID), slog.String("owner", r.owner),
					slog.String("fired", api.FormatTime(now)), slog.Any("error", err))
				return
			}
			rep, err := r.run(context.Background(), jobID, tick, tick.Add(r.tickPrecision/2), aj.nextTick(tick), fn, aj.cfg)
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

// adapterJob is what an adapter knows of a job: its options and, with a
// Schedule option, the parsed schedule.
type adapterJob struct {
	cfg      jobConfig
	schedule *schedule.Schedule // nil without a Schedule option
}

func (r *Runner) adapterJob(opts []JobOption) (adapterJob, error) {
	cfg, err := newScheduledJobConfig(opts)
	if err != nil {
		return adapterJob{}, err
	}
	j := adapterJob{cfg: cfg}
	if cfg.schedule != "" {
		if j.schedule, err = schedule.Parse(cfg.schedule); err != nil {
			return adapterJob{}, err
		}
	}
	return j, nil
}

// nextTick is the tick of j's schedule after tick, zero without a
// schedule: a group_full refusal is retried within the tick's grace, but
// not past it.
func (j adapterJob) nextTick(tick time.Time) time.Time {
	if j.schedule == nil {
		return time.Time{}
	}
	return j.schedule.Next(tick)
}

// tick is the tick a scheduler's firing at now is for: with a schedule, its
// newest tick at or before now + precision/2, which must not be more than
// precision/2 before now (ErrNotATick); without one, now rounded to
// precision.
func (j adapterJob) tick(now time.Time, precision time.Duration) (time.Time, error) {
	if j.schedule == nil {
		return now.Round(precision), nil
	}
	tick := j.schedule.Latest(now.Add(precision / 2))
	if tick.IsZero() || now.Sub(tick) > precision/2 {
		return time.Time{}, fmt.Errorf("fired at %s, %w %q (its newest tick was %s)",
			api.FormatTime(now), ErrNotATick, j.schedule, api.FormatTime(tick))
	}
	return tick, nil
}
