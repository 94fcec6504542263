package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// Backoff of retried acquires and releases; heartbeats retry faster (see
// heartbeatRetry) because they race the deadline.
const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// Run runs fn once under the lease of jobID for tick (the zero time sends no
// tick): it acquires the lease, runs fn with a context that carries the lease
// (LeaseFromContext) and is cancelled when the lease is lost or about to be,
// heartbeats every HeartbeatInterval, and releases the lease with outcome
// succeeded when fn returns nil, else failed.
//
// A refused acquire returns an error wrapping leaseapi.ErrLeaseHeld or
// leaseapi.ErrTickDone (another replica has it or had it: skip), or
// leaseapi.ErrTooSoon (with the MinInterval option: the job's last run
// started too recently), without calling fn. An acquire refused group_full (a job with the Group option)
// is retried after its Retry-After while the tick's grace lasts (without a
// tick or a grace, until ctx is done), then returns the
// *leaseapi.GroupFullError. An acquire that fails because leaseapi or the
// network did not answer is retried with backoff until ctx is done. When ctx is cancelled
// while fn runs, fn is cancelled with cause ErrShutdown and its run released
// failed.
//
// When the lease was acquired, the Report describes the run, and the error
// is nil only when it succeeded.
func (r *Runner) Run(ctx context.Context, jobID string, tick time.Time, fn Func, opts ...JobOption) (Report, error) {
	jc, err := newScheduledJobConfig(opts)
	if err != nil {
		return Report{}, fmt.Errorf("run %q: %w", jobID, err)
	}
	return r.run(ctx, jobID, tick, time.Time{}, time.Time{}, fn, jc)
}

// run is Run with a retry horizon: acquires are retried while the clock is
// before retryUntil (the next tick), or until ctx is done when it is zero.
// An acquire refused group_full is retried while the tick's grace lasts,
// never past nextTick (zero: retryUntil); see groupFullUntil.
func (r *Runner) run(ctx context.Context, jobID string, tick, retryUntil, nextTick time.Time, fn Func, jc jobConfig) (Report, error) {
	if !leaseapi.ValidJobID(jobID) {
		return Report{}, fmt.Errorf("run %q: invalid job id: want ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", jobID)
	}
	if fn == nil {
		return Report{}, fmt.Errorf("run %q: nil job function", jobID)
	}
	if !r.startRunning(jobID) {
		// The lease would be granted again to this owner as an idempotent
		// retry; the job must not run twice at once on one replica.
		return Report{}, fmt.Errorf("run %q: %w: this runner is still running it", jobID, leaseapi.ErrLeaseHeld)
	}
	// A job abandoned after cancellation stays marked as running until it
	// returns (execute hands the mark over), so this replica never starts a
	// second copy of a job that hangs.
	handedOver := false
	defer func() {
		if !handedOver {
			r.stopRunning(jobID)
		}
	}()

	log := r.logger.With(slog.String("job_id", jobID), slog.String("owner", r.owner))
	if !tick.IsZero() {
		log = log.With(slog.String("tick", api.FormatTime(tick)))
	}
	lease, sentAt, err := r.acquireRetry(ctx, log, jobID, tick, retryUntil, nextTick, jc)
	if err != nil {
		return Report{}, err
	}
	s := &runState{
		r:          r,
		log:        log.With(slog.Int64("token", lease.Token)),
		jobID:      jobID,
		tick:       tick,
		jc:         jc,
		lease:      lease,
		validUntil: r.validUntil(sentAt, lease),
	}
	if ctx.Err() != nil {
		// Shutdown began while the acquire was on its way: give the lease
		// back at once instead of starting the job.
		s.cause = ErrShutdown
		return s.finish(r.clock.Now()), ErrShutdown
	}
	if now := r.clock.Now(); !now.Before(s.validUntil) {
		// The grant's answer arrived after its local deadline (the process
		// was paused while the acquire was on its way): another replica may
		// hold the lease by now, so the job must not start.
		s.loseLease(lostDeadline, ErrDeadline)
		return s.finish(now), ErrDeadline
	}
	rep := s.execute(ctx, fn)
	handedOver = s.abandoned
	return rep, rep.Err
}

func (r *Runner) startRunning(jobID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running[jobID] {
		return false
	}
	r.running[jobID] = true
	return true
}

func (r *Runner) stopRunning(jobID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.running, jobID)
}

// validUntil is the local deadline a grant or renewal sent at sentAt
// proves: the store set expiresAt = its now + ttl after receiving the
// request, so the lease is ours until at least sentAt + ttl by our clock,
// less the margin for clock rate differences and cancellation.
func (r *Runner) validUntil(sentAt time.Time, lease leaseapi.Lease) time.Time {
	ttl := lease.TTL
	if ttl <= 0 {
		ttl = r.ttl
	}
	return sentAt.Add(ttl - r.margin)
}

// acquireRetry acquires the lease, retrying with backoff while leaseapi or
// the network does not answer. It returns the lease and the send time of the
// request that got it.
func (r *Runner) acquireRetry(ctx context.Context, log *slog.Logger, jobID string, tick, retryUntil, nextTick time.Time, jc jobConfig) (leaseapi.Lease, time.Time, error) {
	backoff := minBackoff
	for {
		sentAt := r.clock.Now()
		// The request does not inherit ctx's cancellation: an acquire cut
		// short by shutdown could still have been granted, and the lease
		// would then sit unused until it expires. Run releases it instead.
		reqCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.requestTimeout)
		lease, err := r.acquires.do(reqCtx, &acquireRequest{
			jobID: jobID, owner: r.owner, ttl: r.ttl, tick: tick, schedule: jc.schedule, grace: jc.grace,
			catchUp: jc.catchUp, catchUpWindow: jc.catchUpWindow, group: jc.group, minInterval: jc.minInterval,
		})
		cancel()
		if err == nil {
			log.Debug("lease acquired", slog.Int64("token", lease.Token))
			return lease, sentAt, nil
		}
		if full, ok := errors.AsType[*leaseapi.GroupFullError](err); ok {
			// Another job of the group may end its run before the tick's
			// grace is over: try again after the slot's expected end (at
			// least a second, as leaseapi says, when the answer lost it).
			after := max(full.RetryAfter, time.Second)
			wait := after + rand.N(after/4+1)
			until := groupFullUntil(tick, retryUntil, nextTick, jc.grace, full)
			if ctx.Err() != nil {
				return leaseapi.Lease{}, time.Time{}, fmt.Errorf("%w (%w)", ErrShutdown, err)
			}
			if !until.IsZero() && !r.clock.Now().Add(wait).Before(until) {
				log.Debug("tick skipped", slog.String("reason", err.Error()))
				return leaseapi.Lease{}, time.Time{}, fmt.Errorf("%w; the tick can no longer start", err)
			}
			log.Debug("group full, retrying", slog.String("group", full.Group.Name), slog.Duration("backoff", wait))
			if !r.sleep(ctx, wait) {
				return leaseapi.Lease{}, time.Time{}, fmt.Errorf("%w (%w)", ErrShutdown, err)
			}
			continue
		}
		if ahead, ok := errors.AsType[*leaseapi.TickAheadError](err); ok {
			// This host's clock runs ahead of the server's (by a little
			// more than this: the answer took time to arrive): its ticks
			// are refused until the clock is fixed.
			fast := r.clock.Now().Sub(ahead.Now)
			log.Warn("tick skipped: this host's clock is fast; fix it (NTP)",
				slog.Float64("clock_fast_seconds", fast.Round(time.Millisecond).Seconds()),
				slog.String("server_now", api.FormatTime(ahead.Now)))
			return leaseapi.Lease{}, time.Time{}, err
		}
		if Skipped(err) {
			// Another replica runs or ran this tick, or the job is
			// paused: the normal case.
			log.Debug("tick skipped", slog.String("reason", err.Error()))
			return leaseapi.Lease{}, time.Time{}, err
		}
		if !retryable(err) {
			return leaseapi.Lease{}, time.Time{}, err
		}
		wait := max(jitter(backoff), retryAfter(err))
		if ctx.Err() != nil {
			return leaseapi.Lease{}, time.Time{}, fmt.Errorf("%w (%w)", ErrShutdown, err)
		}
		if !retryUntil.IsZero() && !r.clock.Now().Add(wait).Before(retryUntil) {
			return leaseapi.Lease{}, time.Time{}, fmt.Errorf("%w; the tick is no longer current", err)
		}
		log.Warn("acquire failed, retrying", slog.Any("error", err), slog.Duration("backoff", wait))
		if !r.sleep(ctx, wait) {
			return leaseapi.Lease{}, time.Time{}, fmt.Errorf("%w (%w)", ErrShutdown, err)
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// groupFullUntil is until when an acquire refused group_full is retried:
// while the tick may still start, that is before the tick plus its grace
// (the job's, else the effective grace in the refusal's lease), and never
// past the next tick (nextTick, else retryUntil when that is zero). Without
// a tick or a grace it is retryUntil; zero means until ctx is done.
func groupFullUntil(tick, retryUntil, nextTick time.Time, grace time.Duration, full *leaseapi.GroupFullError) time.Time {
	if grace == 0 && full.Lease != nil {
		grace = full.Lease.Grace
	}
	if tick.IsZero() || grace <= 0 {
		return retryUntil
	}
	until := tick.Add(grace)
	limit := nextTick
	if limit.IsZero() {
		limit = retryUntil
	}
	if !limit.IsZero() && limit.Before(until) {
		until = limit
	}
	return until
}

// sleep waits d on the runner's clock; it returns false, at once, when ctx
// is done first (or both are ready: shutdown wins).
func (r *Runner) sleep(ctx context.Context, d time.Duration) bool {
	timer := r.clock.NewTimer(d)
	select {
	case <-ctx.Done():
		timer.Stop()
		return false
	case <-timer.Chan():
	}
	return ctx.Err() == nil
}

// jitter returns a duration in [d/2, d): replicas that failed together do
// not retry together.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

// phase is where a run is. A run only moves forward:
//
//	acquired → running → releasing → done
//	              ↓          ↑
//	           stopping ─────┘
//
// acquired: the lease was granted and the job not started (a run that must
// not start goes straight to releasing). running: the job runs and the lease
// is heartbeated. stopping: the runner cancelled the job (cause says why) and
// no longer heartbeats; it waits for the job until giveUpAt. releasing: the
// result is decided and the lease is being given back (unless it was lost).
// done: the run is reported.
type phase int

const (
	phaseAcquired phase = iota
	phaseRunning
	phaseStopping
	phaseReleasing
	phaseDone
)

// loss is whether, and how, a run lost its lease; it decides the release.
type loss int

const (
	// notLost: the lease is ours until validUntil; the release is retried
	// until then.
	notLost loss = iota
	// lostDeadline: the local deadline passed, so another replica may hold
	// the lease; the release is sent once, in case it is still ours.
	lostDeadline
	// lostConflict: leaseapi answered lease_lost (or not_found); there is
	// nothing to release.
	lostConflict
)

// runState is one run between its acquire and its report. Only the
// goroutine of execute touches it, except lastProgress (the job's goroutine
// writes it through Progress) and lease (read-only once the job started).
type runState struct {
	r     *Runner
	log   *slog.Logger
	jobID string
	tick  time.Time
	jc    jobConfig
	lease leaseapi.Lease

	start time.Time
	// lastProgress is the clock's UnixNano of the last Progress call.
	lastProgress atomic.Int64

	// validUntil is the local deadline: the lease is ours until then.
	validUntil time.Time
	// nextHeartbeat is when the next heartbeat is due; heartbeatBackoff the
	// delay before retrying a failed one.
	nextHeartbeat    time.Time
	heartbeatBackoff time.Duration

	phase phase
	// giveUpAt is when a stopping run stops waiting for its job.
	giveUpAt time.Time
	// cause is why the run does not succeed: why the job was cancelled or
	// the lease lost, or the job's error; nil while it may still succeed.
	cause error
	loss  loss
	// abandoned: the runner gave the job up while it was still running; a
	// goroutine clears the job's running mark when it returns.
	abandoned bool
}

// loseLease records that the lease is gone, and why.
func (s *runState) loseLease(l loss, cause error) {
	s.loss, s.cause = l, cause
}

// execute runs the job and the heartbeat loop until the job returns or is
// given up, then releases the lease.
func (s *runState) execute(ctx context.Context, fn Func) Report {
	r := s.r
	// The job's context keeps ctx's values but not its cancellation: the
	// runner cancels it itself, with a cause.
	jobCtx, cancelJob := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelJob(nil)
	jobCtx = context.WithValue(jobCtx, runKey, s)

	s.phase = phaseRunning
	s.start = r.clock.Now()
	s.lastProgress.Store(s.start.UnixNano())
	s.nextHeartbeat = s.start.Add(r.heartbeatInterval)
	s.heartbeatBackoff = r.heartbeatInterval / 8

	done := make(chan error, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				s.log.Error("job panicked", slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
				done <- fmt.Errorf("job panicked: %v", v)
			}
		}()
		done <- fn(jobCtx)
	}()

	// stop cancels the job with cause, unless it is stopping already.
	stop := func(now time.Time, cause error) {
		if s.phase == phaseStopping {
			return
		}
		s.phase = phaseStopping
		s.cause = cause
		cancelJob(cause)
		// Wait for the job until the lease would lapse anyway; a job that
		// has already lost its lease gets a short grace to return.
		s.giveUpAt = s.validUntil
		if s.loss != notLost || !now.Before(s.giveUpAt) {
			s.giveUpAt = now.Add(r.margin)
		}
		s.log.Info("job cancelled", slog.Any("cause", cause))
	}
	shutdown := ctx.Done()

	for {
		now := r.clock.Now()
		switch {
		case s.phase == phaseStopping && !now.Before(s.giveUpAt):
			s.log.Warn("job abandoned: it did not return after cancellation", slog.Any("cause", s.cause))
			s.abandoned = true
			go func() {
				<-done
				r.stopRunning(s.jobID)
			}()
			s.cause = fmt.Errorf("%w; %w", s.cause, ErrAbandoned)
			return s.finish(now)
		case s.loss == notLost && !now.Before(s.validUntil):
			s.loseLease(lostDeadline, ErrDeadline)
			stop(now, ErrDeadline)
		case s.phase == phaseStopping:
		case s.jc.maxRunTime > 0 && !now.Before(s.start.Add(s.jc.maxRunTime)):
			stop(now, ErrMaxRunTime)
		case s.jc.progressWindow > 0 && !now.Before(s.progressDeadline()):
			stop(now, ErrStalled)
		case !now.Before(s.nextHeartbeat):
			s.heartbeat(now)
			if s.loss != notLost {
				stop(r.clock.Now(), s.cause)
			}
			continue
		}

		timer := r.clock.NewTimer(s.nextEvent().Sub(now))
		select {
		case err := <-done:
			timer.Stop()
			return s.jobReturned(err)
		case <-shutdown:
			timer.Stop()
			shutdown = nil
			stop(r.clock.Now(), ErrShutdown)
		case <-timer.Chan():
		}
	}
}

// progressDeadline is when the watchdog trips unless the job reports progress.
func (s *runState) progressDeadline() time.Time {
	return time.Unix(0, s.lastProgress.Load()).Add(s.jc.progressWindow)
}

// nextEvent is the earliest time the loop has something to decide.
func (s *runState) nextEvent() time.Time {
	if s.phase == phaseStopping {
		// No heartbeats any more; giveUpAt is at or before the deadline.
		return s.giveUpAt
	}
	next := s.validUntil
	if s.nextHeartbeat.Before(next) {
		next = s.nextHeartbeat
	}
	if s.jc.maxRunTime > 0 {
		if t := s.start.Add(s.jc.maxRunTime); t.Before(next) {
			next = t
		}
	}
	if s.jc.progressWindow > 0 {
		if t := s.progressDeadline(); t.Before(next) {
			next = t
		}
	}
	return next
}

// heartbeat sends one heartbeat and waits for it. It waits synchronously so
// that the loop has one thing in flight at a time; the request cannot
// outlast the local deadline, which is checked right after.
func (s *runState) heartbeat(now time.Time) {
	r := s.r
	timeout := min(r.requestTimeout, s.validUntil.Sub(now))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	lease, err := r.heartbeats.do(ctx, &heartbeatRequest{jobID: s.jobID, owner: r.owner, token: s.lease.Token, ttl: r.ttl})
	cancel()
	switch {
	case err == nil:
		if until := r.validUntil(now, lease); until.After(s.validUntil) {
			s.validUntil = until
		}
		s.nextHeartbeat = now.Add(r.heartbeatInterval)
		s.heartbeatBackoff = r.heartbeatInterval / 8
		s.log.Debug("heartbeat", slog.String("valid_until", api.FormatTime(s.validUntil)))
	case errors.Is(err, leaseapi.ErrLeaseLost), errors.Is(err, leaseapi.ErrNotFound):
		// Revoked, or expired and taken over: another replica may run the
		// job now, so this one must stop, and has nothing to release.
		s.loseLease(lostConflict, fmt.Errorf("%w: %w", leaseapi.ErrLeaseLost, err))
		s.log.Warn("lease lost", slog.Any("error", err))
	default:
		// Unknown outcome: retry soon; the deadline decides when to give up.
		s.nextHeartbeat = r.clock.Now().Add(jitter(s.heartbeatBackoff))
		s.heartbeatBackoff = min(2*s.heartbeatBackoff, r.heartbeatInterval/2)
		s.log.Warn("heartbeat failed, retrying", slog.Any("error", err))
	}
}

// jobReturned records why a job that returned err did not succeed, unless
// the cause is known already, and finishes the run.
func (s *runState) jobReturned(err error) Report {
	now := s.r.clock.Now()
	switch {
	case s.loss != notLost:
	case !now.Before(s.validUntil):
		// The job finished, but after the lease could have passed to
		// another replica: it cannot claim the tick.
		s.loseLease(lostDeadline, ErrDeadline)
	case s.phase == phaseStopping:
	case err != nil:
		s.cause = err
	}
	return s.finish(now)
}

// finish decides the run's result from its loss and cause, releases the
// lease as the loss allows, and reports the run.
func (s *runState) finish(now time.Time) Report {
	r := s.r
	s.phase = phaseReleasing
	result := ResultSucceeded
	switch {
	case s.loss != notLost:
		result = ResultLost
	case s.cause != nil:
		result = ResultFailed
	}
	var releaseErr error
	if s.loss != lostConflict {
		wire, until := leaseapi.OutcomeFailed, s.validUntil
		if result == ResultSucceeded {
			wire = leaseapi.OutcomeSucceeded
		}
		if s.loss == lostDeadline {
			until = time.Time{}
		}
		if err := s.release(wire, until); err != nil {
			if result == ResultSucceeded {
				// Not acknowledged: the tick may run again elsewhere, so
				// this run does not count as done.
				result, s.cause = ResultLost, err
			}
			s.log.Warn("release failed", slog.Any("error", err))
			releaseErr = err
		}
	}
	rep := Report{
		JobID:  s.jobID,
		Tick:   s.tick,
		Owner:  r.owner,
		Token:  s.lease.Token,
		Start:  s.start,
		End:    r.clock.Now(),
		Result: result,

		Group:      s.lease.Group,
		Slot:       s.lease.Slot,
		SlotToken:  s.lease.SlotToken,
		ReleaseErr: releaseErr,
	}
	if result != ResultSucceeded {
		rep.Err = s.cause
	}
	if rep.Start.IsZero() {
		rep.Start = now
	}
	s.phase = phaseDone
	s.log.Info("run finished", slog.String("outcome", string(result)), slog.Any("error", rep.Err))
	if r.reportFunc != nil {
		r.reportFunc(rep)
	}
	return rep
}

// release sends the release, retrying with backoff while leaseapi does not
// answer and the clock is before until (zero: one attempt).
func (s *runState) release(outcome leaseapi.Outcome, until time.Time) error {
	r := s.r
	backoff := minBackoff
	for {
		ctx, cancel := context.WithTimeout(context.Background(), r.requestTimeout)
		err := postRelease(ctx, r.client, s.jobID, r.owner, s.lease.Token, outcome)
		cancel()
		if err == nil || !retryable(err) {
			return err
		}
		wait := max(jitter(backoff), retryAfter(err))
		if until.IsZero() || !r.clock.Now().Add(wait).Before(until) {
			return err
		}
		<-r.clock.After(wait)
		backoff = min(2*backoff, maxBackoff)
	}
}
