// Command leasectl brings leaseapi leases to jobs in any language, run by
// any cron: like flock(1), `consul lock` or `etcdctl lock`, plus the tick.
//
//	leasectl run --schedule '*/5 * * * *' report -- /usr/local/bin/report.sh
//	leasectl ls --state held
//	leasectl get report
//	leasectl runs report
//	leasectl revoke report
//	leasectl pause --reason 'database maintenance' report
//	leasectl resume report
//	leasectl repair --reason 'clock was two days fast' report
//	leasectl trigger --reason 'rerun after the fix' report
//	leasectl run --owed report -- /usr/local/bin/report.sh
//	leasectl policy put --consecutive-failures 3 --max-runtime 2h report
//	leasectl groups put --limit 2 warehouse
//	leasectl apply --prune -f jobs.yaml
//	leasectl export > jobs.yaml
//	leasectl run --schedule '0 * * * *' --group warehouse report -- /usr/local/bin/report.sh
//
// `leasectl run` acquires the job's lease with package jobs (the runner the
// Go replicas use: heartbeats every TTL/3, a local deadline of its own send
// time + TTL, lease_lost handling), runs COMMAND in its own process group
// while it holds the lease, and releases the lease with COMMAND's outcome.
// Its exit status is a contract (see `leasectl run -h` and docs/leasectl.md).
//
// Settings: --api or LEASEAPI_URL (default http://localhost:8080), and
// LEASEAPI_TOKEN, the bearer token. There is deliberately no --token flag:
// the token never appears in a process title, in output or in errors.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/leaseapi/leaseapi/internal/version"
)

func main() {
	env := environment{
		apiURL: os.Getenv("LEASEAPI_URL"),
		token:  os.Getenv("LEASEAPI_TOKEN"),
		caFile: os.Getenv("LEASEAPI_CA_FILE"),
		stdin:  os.Stdin,
		stdout: os.Stdout,
		stderr: os.Stderr,
	}
	os.Exit(dispatch(os.Args[1:], env))
}

// environment is what leasectl takes from its process: the settings of the
// environment and where output goes.
type environment struct {
	apiURL, token  string
	caFile         string
	stdin          io.Reader
	stdout, stderr io.Writer
	// lookupEnv reads the environment variables a file names (apply);
	// nil for os.LookupEnv.
	lookupEnv func(string) (string, bool)
}

const usage = `leasectl: leaseapi leases for any cron, in any language

Usage:
  leasectl run [flags] JOB -- COMMAND [ARG...]   run COMMAND under the lease of JOB
  leasectl ls [flags]                           list leases (all pages)
  leasectl get [flags] JOB                      show the lease of JOB
  leasectl runs [flags] JOB                     show the run history of JOB
  leasectl revoke [flags] JOB                   force-release the lease of JOB (admin)
  leasectl pause [flags] JOB                    pause JOB: acquires answer job_paused (admin)
  leasectl resume [flags] JOB                   resume a paused JOB (admin)
  leasectl repair [flags] JOB                   undo the marks of ticks ahead of the clock (admin)
  leasectl trigger [flags] JOB                  run now: JOB owes one manual tick (admin)
  leasectl run --owed [flags] JOB -- COMMAND    run COMMAND for the tick JOB owes, if any
  leasectl policy get|put|delete [flags] JOB    alert policy: when JOB is alerting (put, delete: admin)
  leasectl groups list|get|put|delete [flags]   concurrency groups: at most K of their jobs at once
  leasectl apply [flags] -f FILE                make groups, policies, pauses and webhooks what FILE declares (admin)
  leasectl export [flags]                       write the YAML of the groups, policies, pauses and webhooks there are (admin)
  leasectl version                              print the version, commit, commit time and Go (also --version)

Flags come before JOB. 'leasectl COMMAND -h' describes a command's flags.
Settings: --api or LEASEAPI_URL (default http://localhost:8080); LEASEAPI_TOKEN, the bearer token;
--cacert or LEASEAPI_CA_FILE, CA certificates (PEM) to trust for an https URL.
`

// dispatch runs the subcommand named by args[0] and returns the exit status.
func dispatch(args []string, env environment) int {
	if len(args) == 0 {
		fmt.Fprint(env.stderr, usage)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return runCommand(rest, env)
	case "ls", "get", "runs", "revoke", "pause", "resume", "repair":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		return readCommand(ctx, cmd, rest, env)
	case "trigger":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		return triggerCommand(ctx, rest, env)
	case "policy":
		return policyCommand(rest, env)
	case "groups":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		return groupsCommand(ctx, rest, env)
	case "apply", "export":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		return applyCommand(ctx, cmd, rest, env)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(env.stdout, usage)
		return 0
	case "version", "--version", "-version":
		fmt.Fprint(env.stdout, version.Get())
		return 0
	}
	fmt.Fprintf(env.stderr, "leasectl: unknown command %q\n%s", cmd, usage)
	return exitUsage
}
