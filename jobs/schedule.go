package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// specParser accepts standard five-field specs, six fields with leading
// seconds, and descriptors (@hourly, @every 10s).
var specParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Schedule computes a job's ticks: Next returns the first tick strictly after t.
// Ticks depend on the spec alone, never on when a replica started, so that
// every replica asks for the same tick values.
type Schedule interface {
	Next(t time.Time) time.Time
}

// ParseSchedule parses a cron spec: five fields (minute first), six fields
// (seconds first), a descriptor such as @hourly, or @every D. Fields are
// evaluated in loc (nil is UTC) unless the spec starts with CRON_TZ=<zone>.
// `@every D` ticks at the multiples of D since the Unix epoch, so that it is
// canonical too; D must be a positive whole number of milliseconds.
func ParseSchedule(spec string, loc *time.Location) (Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	if rest, ok := strings.CutPrefix(strings.TrimSpace(spec), "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return nil, fmt.Errorf("parse schedule %q: %w", spec, err)
		}
		if d < time.Millisecond || d%time.Millisecond != 0 {
			return nil, fmt.Errorf("parse schedule %q: the interval must be a positive whole number of milliseconds", spec)
		}
		return everySchedule{every: d}, nil
	}
	s, err := specParser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("parse schedule %q: %w", spec, err)
	}
	return zonedSchedule{s: s, loc: loc}, nil
}

// everySchedule ticks at the multiples of every since the Unix epoch.
// robfig/cron's ConstantDelaySchedule counts from the time it is asked, which
// would give every replica its own ticks.
type everySchedule struct {
	every time.Duration
}

// Next returns the first multiple of s.every after t.
func (s everySchedule) Next(t time.Time) time.Time {
	n := t.UnixNano()
	d := int64(s.every)
	next := n - n%d + d
	if n < 0 && n%d != 0 {
		next -= d
	}
	return time.Unix(0, next).In(t.Location())
}

// zonedSchedule evaluates a robfig/cron schedule in a fixed time zone. A
// spec without CRON_TZ= is evaluated in the zone of the time it is given.
type zonedSchedule struct {
	s   cron.Schedule
	loc *time.Location
}

// Next returns the first tick after t.
func (s zonedSchedule) Next(t time.Time) time.Time {
	return s.s.Next(t.In(s.loc))
}

// job is a registered job.
type job struct {
	id       string
	spec     string
	schedule Schedule
	fn       Func
	cfg      jobConfig
}

// Add registers fn to run under the lease of jobID at every tick of spec
// (see ParseSchedule; evaluated in Config.Location). It must be called before
// Serve. Every replica must register the same jobs with the same specs.
func (r *Runner) Add(jobID, spec string, fn Func, opts ...JobOption) error {
	if !leaseapi.ValidJobID(jobID) {
		return fmt.Errorf("add job %q: invalid job id: want ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", jobID)
	}
	if fn == nil {
		return fmt.Errorf("add job %q: nil job function", jobID)
	}
	sched, err := ParseSchedule(spec, r.location)
	if err != nil {
		return fmt.Errorf("add job %q: %w", jobID, err)
	}
	if sched.Next(r.clock.Now()).IsZero() {
		return fmt.Errorf("add job %q: schedule %q never fires", jobID, spec)
	}
	cfg, err := newJobConfig(opts)
	if err != nil {
		return fmt.Errorf("add job %q: %w", jobID, err)
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

// Serve runs the registered jobs at their ticks until ctx is cancelled.
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
		timer := r.clock.NewTimer(next.Sub(r.clock.Now()))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.Chan():
		}
		if ctx.Err() != nil {
			return // both were ready: shutdown wins
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
	rep, err := r.run(ctx, j.id, tick, next, j.fn, j.cfg)
	r.logNotRun(j.id, tick, rep, err)
}

// logNotRun logs a tick whose run did not start for a reason other than the
// normal ones (another replica has it, it is done, shutdown): finish logs
// every run that started, run logs skipped ticks at debug level.
func (r *Runner) logNotRun(jobID string, tick time.Time, rep Report, err error) {
	if err == nil || rep.Token != 0 ||
		errors.Is(err, leaseapi.ErrLeaseHeld) || errors.Is(err, leaseapi.ErrTickDone) || errors.Is(err, ErrShutdown) {
		return
	}
	r.logger.Warn("tick not run", slog.String("job_id", jobID), slog.String("owner", r.owner),
		slog.String("tick", api.FormatTime(tick)), slog.Any("error", err))
}
