package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/leaseapi/leaseapi/jobs"
)

// supervisor runs COMMAND as the job of a jobs.Runner run: its run method
// is the job function. It starts COMMAND in its own process group once the
// lease is granted and stops it (SIGTERM to the group, SIGKILL after
// --kill-grace) when the runner cancels the job (lease lost or deadline),
// at --max-run-time, or on a signal to leasectl.
type supervisor struct {
	cfg     runConfig
	env     environment
	gate    *gate
	signals chan syscall.Signal

	// begun is set when COMMAND was started (or tried to be); done is
	// closed when it is gone, and then exit and stopped are final.
	begun   atomic.Bool
	done    chan struct{}
	exit    childExit
	stopped bool
}

func newSupervisor(cfg runConfig, env environment, g *gate) *supervisor {
	return &supervisor{cfg: cfg, env: env, gate: g, signals: make(chan syscall.Signal, 1), done: make(chan struct{})}
}

// started reports whether the job function got as far as starting COMMAND.
func (s *supervisor) started() bool { return s.begun.Load() }

// signal hands a signal leasectl received after COMMAND started to run.
func (s *supervisor) signal(sig syscall.Signal) {
	select {
	case s.signals <- sig:
	default: // a stop is already pending
	}
}

// errNotStarted: the acquire was given up (--wait, a signal) just as it
// was granted; the runner releases the lease failed.
var errNotStarted = errors.New("COMMAND not started")

// run is the job function: it runs COMMAND until it is gone and returns
// nil only when COMMAND exited 0 by itself.
func (s *supervisor) run(ctx context.Context) error {
	if !s.gate.open() {
		return errNotStarted
	}
	s.begun.Store(true)
	defer close(s.done)

	lease, _ := jobs.LeaseFromContext(ctx)
	cmd := exec.Command(s.cfg.command[0], s.cfg.command[1:]...)
	cmd.Env = childEnv(os.Environ(), s.cfg.job, s.cfg.owner, lease.Token, leaseTick(lease.Tick), lease.Slot, lease.SlotToken)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, s.env.stdout, s.env.stderr
	// Its own process group, so that stopping it reaches everything it
	// started, and a Ctrl-C on the terminal reaches leasectl only.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		s.exit = childExit{code: exitCannotExec}
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			s.exit.code = exitNotFound
		}
		fmt.Fprintf(s.env.stderr, "leasectl: %s: %v\n", s.cfg.job, err)
		return err
	}
	pgid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var maxRunTime, kill <-chan time.Time
	if s.cfg.maxRunTime > 0 {
		t := time.NewTimer(s.cfg.maxRunTime)
		defer t.Stop()
		maxRunTime = t.C
	}
	jobDone := ctx.Done()
	stop := func(why string) {
		if s.stopped {
			return
		}
		s.stopped = true
		fmt.Fprintf(s.env.stderr, "leasectl: %s: stopping COMMAND (SIGTERM, SIGKILL after %s): %s\n", s.cfg.job, s.cfg.killGrace, why)
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		t := time.NewTimer(s.cfg.killGrace)
		kill = t.C
	}
	for {
		select {
		case err := <-exited:
			s.exit = exitOf(cmd.ProcessState, err)
			if s.stopped {
				// Whatever COMMAND left in its group goes with it.
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
			if st := s.exit.status(); st != 0 {
				return fmt.Errorf("COMMAND exited with status %d", st)
			}
			if s.stopped {
				return errors.New("COMMAND was stopped")
			}
			return nil
		case <-jobDone:
			jobDone = nil
			stop(context.Cause(ctx).Error())
		case <-maxRunTime:
			stop(fmt.Sprintf("it ran longer than --max-run-time %s", s.cfg.maxRunTime))
		case sig := <-s.signals:
			stop(signalError{sig}.Error())
		case <-kill:
			kill = nil
			fmt.Fprintf(s.env.stderr, "leasectl: %s: COMMAND still running after --kill-grace %s: SIGKILL\n", s.cfg.job, s.cfg.killGrace)
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
}

// leaseTick is the grant's tick (the one asked for), or zero for none.
func leaseTick(granted *time.Time) time.Time {
	if granted == nil {
		return time.Time{}
	}
	return *granted
}

// exitOf is how a process that Wait returned err for ended.
func exitOf(ps *os.ProcessState, err error) childExit {
	if ps == nil {
		return childExit{code: exitFailure}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return childExit{signal: ws.Signal()}
	}
	if code := ps.ExitCode(); code >= 0 {
		return childExit{code: code}
	}
	return childExit{code: exitFailure}
}
