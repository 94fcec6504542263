package main

import (
	"errors"
	"fmt"
	"net/http"
	"syscall"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/jobs"
)

// Exit statuses of leasectl besides COMMAND's own (sysexits.h names).
const (
	exitFailure  = 1
	exitUsage    = 64 // EX_USAGE: bad flags, or 400 invalid_request or feature_disabled
	exitTempFail = 75 // EX_TEMPFAIL: leaseapi unreachable or unavailable, or this host's clock fast (tick_ahead); try again later
	exitNoPerm   = 77 // EX_NOPERM: 401 or 403
	// exitCannotExec and exitNotFound are the shell's statuses for a
	// COMMAND that could not be executed or was not found.
	exitCannotExec = 126
	exitNotFound   = 127
)

// exitTable is the exit status contract of `leasectl run`, printed by
// `leasectl run -h` and repeated in docs/leasectl.md.
const exitTable = `Exit status:
  won, COMMAND exited by itself                      COMMAND's status
  won, COMMAND killed by a signal                    128 + the signal
  leasectl stopped COMMAND (lease lost, deadline,    COMMAND's status if non-zero
    max run time, SIGTERM/SIGINT to leasectl)          (128 + signal when killed), else 1
  not won: lease_held, tick_done, too_soon,          --skipped-exit-code (0)
    job_paused, group_full past the tick's grace
    (one line on stderr says why)
  not run: tick_ahead (this host's clock is fast;    75 (EX_TEMPFAIL); COMMAND never started
    stderr says by how many seconds)
  leaseapi unreachable, 5xx, 503 or 429 for longer   75 (EX_TEMPFAIL); COMMAND never started
    than --wait
  bad flags or 400 (invalid_request, or              64 (EX_USAGE)
    feature_disabled: --min-interval before the
    server's upgrade is finalized)
  401 or 403 (token refused, role too weak, job      77 (EX_NOPERM)
    outside the credential's scopes)
  SIGTERM/SIGINT before COMMAND started              128 + the signal
  COMMAND not found / not executable                 127 / 126
A release that cannot be delivered leaves the exit status as it is and says
on stderr that the lease will expire by its TTL.
`

// usageError is a bad flag or argument: exit 64.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// errorExit maps an error that kept COMMAND from starting, or a read
// command from succeeding, to an exit status.
func errorExit(err error) int {
	if _, ok := errors.AsType[usageError](err); ok {
		return exitUsage
	}
	if s, ok := errors.AsType[signalError](err); ok {
		return 128 + int(s.sig)
	}
	if errors.Is(err, errWaitExpired) {
		return exitTempFail
	}
	if e, ok := errors.AsType[*jobs.APIError](err); ok {
		switch {
		case e.StatusCode == http.StatusBadRequest:
			return exitUsage
		case e.StatusCode == http.StatusUnauthorized || e.StatusCode == http.StatusForbidden:
			return exitNoPerm
		case e.StatusCode == http.StatusTooManyRequests || e.StatusCode >= 500:
			return exitTempFail
		}
		return exitFailure
	}
	if errors.Is(err, leaseapi.ErrUnavailable) {
		return exitTempFail
	}
	return exitFailure
}

// childExit is how COMMAND ended.
type childExit struct {
	code   int
	signal syscall.Signal // non-zero when a signal killed it
}

// status is COMMAND's status as a shell reports it.
func (c childExit) status() int {
	if c.signal != 0 {
		return 128 + int(c.signal)
	}
	return c.code
}

// runExit is the exit status of a run that started COMMAND: COMMAND's
// status, except that a COMMAND leasectl stopped never reports success.
func runExit(child childExit, stopped bool) int {
	if st := child.status(); st != 0 || !stopped {
		return st
	}
	return exitFailure
}

// signalError is SIGTERM or SIGINT received by leasectl.
type signalError struct{ sig syscall.Signal }

func (e signalError) Error() string { return "leasectl received " + e.sig.String() }

// errWaitExpired: leaseapi did not grant or refuse the lease within --wait.
var errWaitExpired = errors.New("no answer from leaseapi within --wait")
