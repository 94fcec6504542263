package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/jobs"
)

// runCommand is `leasectl run`; it returns the exit status.
func runCommand(args []string, env environment) int {
	cfg, err := parseRun(args, env, hostname(), os.Getpid())
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(env.stderr, "leasectl run:", err)
		return exitUsage
	}
	// Catch the signals before anything is acquired, so that none is lost
	// between the acquire and COMMAND's start.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	return runLeased(cfg, env, sigs)
}

// runLeased acquires the lease of cfg.job with jobs.Runner and runs COMMAND
// under it; it returns the exit status.
//
// The runner does the lease: the acquire and its retries, the heartbeats
// every TTL/3, the local deadline (own send time + TTL) and lease_lost, and
// the release with the outcome. It cancels the job's context only when the
// lease is lost or its deadline passed; leasectl's own reasons to stop
// COMMAND (--max-run-time, SIGTERM/SIGINT) are handled by the supervisor
// inside the job, so that the runner keeps heartbeating while COMMAND is
// being stopped, as long as the lease is valid. (jobs.MaxRunTime and the
// runner's shutdown stop heartbeating at once, which suits a Go function
// that returns when cancelled, not a process that has --kill-grace to exit.)
func runLeased(cfg runConfig, env environment, sigs <-chan os.Signal) int {
	c, err := newClient(cfg.apiURL, cfg.caFile, env.token)
	if err != nil {
		fmt.Fprintln(env.stderr, "leasectl run:", err)
		return exitUsage
	}
	runner, err := jobs.New(jobs.Config{
		Client: c,
		Owner:  cfg.owner,
		TTL:    cfg.ttl,
		Logger: slog.New(&stderrHandler{w: env.stderr, job: cfg.job, ttl: cfg.ttl}),
	})
	if err != nil {
		fmt.Fprintln(env.stderr, "leasectl run:", err)
		return exitUsage
	}

	// ctx is the acquire's: --wait or a signal cancel it until COMMAND
	// starts (the gate), never after.
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	g := &gate{cancel: cancel}
	now := time.Now()
	waitTimer := time.AfterFunc(cfg.acquireWait(now), func() { g.close(errWaitExpired) })
	defer waitTimer.Stop()

	sup := newSupervisor(cfg, env, g)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		for {
			select {
			case sig := <-sigs:
				s := sig.(syscall.Signal)
				if !g.close(signalError{s}) {
					sup.signal(s)
				}
			case <-quit:
				return
			}
		}
	}()

	tick := cfg.tickAt(now)
	if cfg.owed {
		// The owed tick is claimed with an ordinary acquire of that tick:
		// exactly one host is granted it, the others skip (lease_held,
		// tick_done). Nothing owed is the normal case of an every-minute
		// crontab line: no output, the skipped exit status.
		owed, ok, err := owedTick(ctx, c, cfg.job)
		if err != nil {
			return notStarted(ctx, cfg, env, err)
		}
		if !ok {
			return cfg.skipped
		}
		tick = owed
	}
	// The schedule and grace go with the acquire, so that leaseapi counts
	// the ticks that no host started as missed.
	var opts []jobs.JobOption
	if cfg.schedule != nil {
		opts = append(opts, jobs.Schedule(cfg.sent))
		if cfg.grace > 0 {
			opts = append(opts, jobs.Grace(cfg.grace))
		}
		if cfg.catchUp {
			opts = append(opts, jobs.CatchUp(cfg.catchUpWindow))
		}
	}
	if cfg.group != nil {
		opts = append(opts, jobs.Group(*cfg.group))
	}
	if cfg.minInterval > 0 {
		opts = append(opts, jobs.MinInterval(cfg.minInterval))
	}

	// The runner retries what may be retried (5xx, 429, the network) after
	// Retry-After, until --wait or a signal cancels the acquire.
	rep, err := runner.Run(ctx, cfg.job, tick, sup.run, opts...)
	if rep.ReleaseErr != nil {
		fmt.Fprintf(env.stderr, "leasectl: %s: the release was not delivered (%v); the lease will expire by its TTL (%s)\n",
			cfg.job, rep.ReleaseErr, cfg.ttl)
	}
	if sup.started() {
		// The runner may have given COMMAND up (lease lost) before it was
		// gone; leasectl never exits before it is.
		<-sup.done
		return runExit(sup.exit, sup.stopped)
	}
	return notStarted(ctx, cfg, env, err)
}

// notStarted reports why COMMAND did not start, on one line of stderr, and
// returns the exit status.
func notStarted(ctx context.Context, cfg runConfig, env environment, err error) int {
	if cause := context.Cause(ctx); cause != nil {
		// --wait passed or a signal came while the acquire was retried.
		if errors.Is(cause, errWaitExpired) && errors.Is(err, leaseapi.ErrGroupFull) {
			// The group was still full: not won, like a tick another host has.
			fmt.Fprintf(env.stderr, "leasectl: %s: not run: %s (still full when the wait ended)\n", cfg.job, skipReason(err))
			return cfg.skipped
		}
		if errors.Is(cause, errWaitExpired) {
			fmt.Fprintf(env.stderr, "leasectl: %s: no answer from leaseapi within --wait %s (%v); COMMAND not started\n",
				cfg.job, cfg.wait, lastCause(err))
		} else {
			fmt.Fprintf(env.stderr, "leasectl: %s: %v before the lease was acquired; COMMAND not started\n", cfg.job, cause)
		}
		return errorExit(cause)
	}
	if ahead, ok := errors.AsType[*leaseapi.TickAheadError](err); ok {
		// Not a skip like the others: every tick of this host is refused
		// until its clock is fixed, so a crontab line fails visibly.
		if !cfg.tick.IsZero() {
			fmt.Fprintf(env.stderr, "leasectl: %s: not run: tick_ahead: --tick %s lies %.0f s after the server's clock (%s); name a tick that has come\n",
				cfg.job, api.FormatTime(ahead.Tick), ahead.Tick.Sub(ahead.Now).Seconds(), api.FormatTime(ahead.Now))
		} else {
			fmt.Fprintf(env.stderr, "leasectl: %s: not run: tick_ahead: this host's clock is %.0f s fast (tick %s, the server's clock %s); fix the clock (NTP)\n",
				cfg.job, time.Since(ahead.Now).Seconds(), api.FormatTime(ahead.Tick), api.FormatTime(ahead.Now))
		}
		return exitTempFail
	}
	if jobs.Skipped(err) {
		fmt.Fprintf(env.stderr, "leasectl: %s: not run: %s\n", cfg.job, skipReason(err))
		return cfg.skipped
	}
	fmt.Fprintf(env.stderr, "leasectl: %s: %v\n", cfg.job, err)
	return errorExit(err)
}

// lastCause is the error behind the runner's ErrShutdown: it wraps the
// shutdown and the acquire's last error, in this order.
func lastCause(err error) error {
	if m, ok := err.(interface{ Unwrap() []error }); ok {
		if errs := m.Unwrap(); len(errs) > 0 {
			return errs[len(errs)-1]
		}
	}
	return err
}

// skipReason says in words why the lease was not won.
func skipReason(err error) string {
	if c, ok := errors.AsType[*leaseapi.ConflictError](err); ok {
		l := c.Lease
		switch {
		case errors.Is(err, leaseapi.ErrLeaseHeld):
			return fmt.Sprintf("lease_held: %s holds it (token %d) until %s", l.Owner, l.Token, api.FormatTime(l.ExpiresAt))
		case errors.Is(err, leaseapi.ErrTooSoon):
			s := fmt.Sprintf("too_soon: the previous run (%s, token %d) started at %s", l.Owner, l.Token, api.FormatTime(l.AcquiredAt))
			if soon, ok := errors.AsType[*leaseapi.TooSoonError](err); ok && !soon.Until.IsZero() {
				s += fmt.Sprintf(", less than --min-interval %s ago; the next may start at %s", soon.MinInterval, api.FormatTime(soon.Until))
			}
			return s
		case errors.Is(err, leaseapi.ErrTickDone) && l.LastCompletedTick != nil:
			return fmt.Sprintf("tick_done: the tick ran already (last completed tick %s)", api.FormatTime(*l.LastCompletedTick))
		case errors.Is(err, leaseapi.ErrJobPaused):
			reason := "no reason given"
			if l.PausedReason != "" {
				reason = l.PausedReason
			}
			return "job_paused: the job is paused (" + reason + ")"
		}
	}
	if full, ok := errors.AsType[*leaseapi.GroupFullError](err); ok {
		g := full.Group
		if g.Name == "" {
			// An answer whose group leasectl could not read.
			return "group_full: every slot of the job's group is in use"
		}
		holders := make([]string, 0, len(g.Holders))
		for _, h := range g.Holders {
			holders = append(holders, fmt.Sprintf("%s (slot %d)", h.JobID, h.Slot))
		}
		held := ""
		if len(holders) > 0 {
			held = ": " + strings.Join(holders, ", ")
		}
		return fmt.Sprintf("group_full: group %q has %d of %d slots in use%s", g.Name, g.Held, g.Limit, held)
	}
	if e, ok := errors.AsType[*jobs.APIError](err); ok && e.Detail != "" {
		return e.Code + ": " + e.Detail
	}
	return err.Error()
}

// gate decides, once, between starting COMMAND and giving the acquire up:
// --wait and signals cancel the acquire only until COMMAND has started.
type gate struct {
	mu      sync.Mutex
	started bool
	closed  bool
	cancel  context.CancelCauseFunc
}

// open reports whether COMMAND may start; afterwards close has no effect.
func (g *gate) open() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.started = true
	return true
}

// close cancels the acquire with cause unless COMMAND has started, and
// reports whether it did so (or had done so).
func (g *gate) close(cause error) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.started {
		return false
	}
	if !g.closed {
		g.closed = true
		g.cancel(cause)
	}
	return true
}
