package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api/client"
)

// Alert policies: `leasectl policy get|put|delete JOB`.

const policyUsage = `Usage:
  leasectl policy get [flags] JOB                 show the alert policy of JOB and whether it is alerting
  leasectl policy put [flags] CONDITION... JOB    set the alert policy of JOB, replacing the one it had (admin)
  leasectl policy delete [flags] JOB              remove the alert policy of JOB (admin)

A policy says when JOB is alerting: when any of its conditions holds. Its
webhooks subscribed to job.alerting and job.ok are told each change, and
'leasectl get JOB' shows it. 'put' sets exactly the flags given (at least
one condition): a condition not given is not set. For example
  leasectl policy put --consecutive-failures 3 --max-runtime 2h --realert-after 4h report
Flags come before JOB; 'leasectl policy put -h' lists the conditions.
`

// policyCommand is `leasectl policy`; it returns the exit status.
func policyCommand(args []string, env environment) int {
	if len(args) == 0 {
		fmt.Fprint(env.stderr, policyUsage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(env.stdout, policyUsage)
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := policy(ctx, args[0], args[1:], env)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	}
	fmt.Fprintf(env.stderr, "leasectl policy %s: %v\n", args[0], err)
	return errorExit(err)
}

// policyFlags are the conditions of `leasectl policy put`, by flag.
type policyFlags struct {
	consecutiveFailures, failureRuns, missedTicks, recovery int
	failureRate                                             float64
	maxRuntime, minRuntime, realertAfter                    time.Duration
}

func (p *policyFlags) add(fs *flag.FlagSet) {
	fs.IntVar(&p.consecutiveFailures, "consecutive-failures", 0, fmt.Sprintf("alerting after N failed or expired runs in a row (1 to %d)", leaseapi.MaxPolicyCount))
	fs.Float64Var(&p.failureRate, "failure-rate", 0, "alerting when at least this share (more than 0, at most 1) of the newest --failure-runs runs failed or expired")
	fs.IntVar(&p.failureRuns, "failure-runs", 0, fmt.Sprintf("with --failure-rate: how many of the newest runs it is decided from (1 to %d)", leaseapi.MaxFailureRateRuns))
	fs.DurationVar(&p.maxRuntime, "max-runtime", 0, "alerting when a run lasts longer, already while it is held (at most 168h)")
	fs.DurationVar(&p.minRuntime, "min-runtime", 0, "alerting when a run succeeds sooner (less than --max-runtime)")
	fs.IntVar(&p.missedTicks, "missed-ticks", 0, fmt.Sprintf("alerting after N missed ticks in a row (1 to %d)", leaseapi.MaxPolicyCount))
	fs.IntVar(&p.recovery, "recovery-threshold", 0, "successes in a row, with no condition holding, that bring an alerting job back to ok (default 1)")
	fs.DurationVar(&p.realertAfter, "realert-after", 0, "repeat job.alerting this often while the job stays alerting (1m to 720h; default never)")
}

// flagOf names the flag of a field of the API's policy.
var flagOf = map[string]string{
	"consecutiveFailures":   "--consecutive-failures",
	"failureRate.threshold": "--failure-rate",
	"failureRate.runs":      "--failure-runs",
	"maxRuntimeMs":          "--max-runtime",
	"minRuntimeMs":          "--min-runtime",
	"missedTicks":           "--missed-ticks",
	"recoveryThreshold":     "--recovery-threshold",
	"realertAfterMs":        "--realert-after",
}

// body checks the conditions, with the service's own rules, and returns
// the body of the PUT.
func (p *policyFlags) body() (client.PolicyBody, error) {
	if (p.failureRate != 0) != (p.failureRuns != 0) {
		return client.PolicyBody{}, usagef("--failure-rate and --failure-runs go together")
	}
	ap := leaseapi.AlertPolicy{
		ConsecutiveFailures: p.consecutiveFailures,
		MaxRuntime:          p.maxRuntime,
		MinRuntime:          p.minRuntime,
		MissedTicks:         p.missedTicks,
		RecoveryThreshold:   p.recovery,
		RealertAfter:        p.realertAfter,
	}
	if p.failureRate != 0 {
		ap.FailureRate = &leaseapi.FailureRate{Threshold: p.failureRate, Runs: p.failureRuns}
	}
	if err := ap.Validate(); err != nil {
		if e, ok := errors.AsType[*leaseapi.InvalidError](err); ok {
			if e.Field == "policy" {
				return client.PolicyBody{}, usagef("want at least one condition: --consecutive-failures, --failure-rate, --max-runtime, --min-runtime or --missed-ticks")
			}
			return client.PolicyBody{}, usagef("%s: %s (the API's %s)", flagOf[e.Field], e.Rule, e.Field)
		}
		return client.PolicyBody{}, usagef("%v", err)
	}
	count := func(n int) *int64 {
		if n == 0 {
			return nil
		}
		v := int64(n)
		return &v
	}
	millis := func(d time.Duration) *int64 {
		if d == 0 {
			return nil
		}
		v := d.Milliseconds()
		return &v
	}
	b := client.PolicyBody{
		ConsecutiveFailures: count(p.consecutiveFailures),
		MaxRuntimeMs:        millis(p.maxRuntime),
		MinRuntimeMs:        millis(p.minRuntime),
		MissedTicks:         count(p.missedTicks),
		RecoveryThreshold:   count(p.recovery),
		RealertAfterMs:      millis(p.realertAfter),
	}
	if ap.FailureRate != nil {
		b.FailureRate = &client.FailureRate{Threshold: p.failureRate, Runs: int64(p.failureRuns)}
	}
	return b, nil
}

func policy(ctx context.Context, action string, args []string, env environment) error {
	switch action {
	case "get", "put", "delete":
	default:
		return usagef("unknown action %q: want get JOB, put CONDITION... JOB or delete JOB", action)
	}
	fs := newFlagSet("policy "+action, env.stderr)
	apiURL, caFile := apiFlags(fs, env)
	output := fs.String("o", "", "output format: json prints the API's JSON (default FIELD value lines)")
	var conditions policyFlags
	if action == "put" {
		conditions.add(fs)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *output != "" && *output != "json" {
		return usagef("-o %q: want json (or nothing for FIELD value lines)", *output)
	}
	if fs.NArg() != 1 {
		return usagef("want exactly one JOB, got %q", fs.Args())
	}
	job := fs.Arg(0)
	if !leaseapi.ValidJobID(job) {
		return usagef("invalid JOB %q: want ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", job)
	}
	var body client.PolicyBody
	if action == "put" {
		var err error
		if body, err = conditions.body(); err != nil {
			return err
		}
	}
	c, err := newClient(*apiURL, *caFile, env.token)
	if err != nil {
		return err
	}
	if action == "delete" {
		if _, err := do(ctx, func(ctx context.Context) (*http.Response, error) {
			return c.DeletePolicy(ctx, job)
		}); err != nil {
			return err
		}
		_, err := fmt.Fprintf(env.stdout, "policy of job %q deleted\n", job)
		return err
	}
	answer, err := do(ctx, func(ctx context.Context) (*http.Response, error) {
		if action == "put" {
			return c.PutPolicy(ctx, job, body)
		}
		return c.GetPolicy(ctx, job)
	})
	if err != nil {
		return err
	}
	if *output == "json" {
		return printJSON(env.stdout, answer)
	}
	var p client.JobPolicy
	bad, err := decodeTolerant(answer, &p)
	if err != nil {
		return fmt.Errorf("decode policy: %w", err)
	}
	return printPolicy(env.stdout, p, bad, time.Now())
}

// printPolicy prints a job's policy as "FIELD  value" lines: where it
// stands, then the conditions that are set.
func printPolicy(w io.Writer, p client.JobPolicy, bad unreadable, now time.Time) error {
	tw := newTable(w)
	fmt.Fprintf(tw, "JOB\t%s\n", p.JobId)
	status := string(p.Status)
	if len(p.AlertReasons) > 0 {
		status += ": " + alertReasons(&p.AlertReasons)
	}
	fmt.Fprintf(tw, "STATUS\t%s\n", status)
	fmt.Fprintf(tw, "SINCE\t%s\n", bad.at("statusSince", &p.StatusSince, now))
	if _, unread := bad["lastAlertAt"]; p.LastAlertAt != nil || unread {
		fmt.Fprintf(tw, "LAST ALERT\t%s\n", bad.at("lastAlertAt", p.LastAlertAt, now))
	}
	if p.ConsecutiveFailures != nil {
		fmt.Fprintf(tw, "CONSECUTIVE FAILURES\t%d\n", *p.ConsecutiveFailures)
	}
	if r := p.FailureRate; r != nil {
		fmt.Fprintf(tw, "FAILURE RATE\t%s of the newest %d runs\n", strconv.FormatFloat(r.Threshold, 'f', -1, 64), r.Runs)
	}
	if p.MaxRuntimeMs != nil {
		fmt.Fprintf(tw, "MAX RUNTIME\t%s\n", time.Duration(*p.MaxRuntimeMs)*time.Millisecond)
	}
	if p.MinRuntimeMs != nil {
		fmt.Fprintf(tw, "MIN RUNTIME\t%s\n", time.Duration(*p.MinRuntimeMs)*time.Millisecond)
	}
	if p.MissedTicks != nil {
		fmt.Fprintf(tw, "MISSED TICKS\t%d\n", *p.MissedTicks)
	}
	fmt.Fprintf(tw, "RECOVERY THRESHOLD\t%d\n", p.RecoveryThreshold)
	realert := "never"
	if p.RealertAfterMs != nil {
		realert = (time.Duration(*p.RealertAfterMs) * time.Millisecond).String()
	}
	fmt.Fprintf(tw, "REALERT AFTER\t%s\n", realert)
	fmt.Fprintf(tw, "UPDATED\t%s by %s\n", bad.at("updatedAt", &p.UpdatedAt, now), stringOrNone(p.UpdatedBy))
	return tw.Flush()
}

// alertReasons lists reasons as "failures, missed" ("-" for none).
func alertReasons(reasons *[]client.AlertReason) string {
	if reasons == nil || len(*reasons) == 0 {
		return "-"
	}
	s := make([]string, len(*reasons))
	for i, r := range *reasons {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}
