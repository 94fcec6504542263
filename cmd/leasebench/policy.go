package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/postgres"
)

// The policy phase: what an alert policy costs. A release of a job
// without a policy is the one release statement it was before policies;
// a release of a job with one is followed by a transaction of its own
// that locks the policy row, reads the lease and the job's newest runs
// (the policy's window), writes the state and the lease, and, on a change
// of status, an outbox row. The phase runs the cycle with its jobs without
// a policy and with each of two policies, in rounds that alternate the
// order: consecutiveFailures 3 (a window of 8 runs) and a failure rate
// over 64 runs (130 runs, the largest window). Every release succeeds, so
// no job alerts and no event is written: what it measures is the decision.

// PolicyDetail places a row of the policy phase.
type PolicyDetail struct {
	// Policy is the jobs' policy, "none" without one.
	Policy string `json:"policy"`
	// Window is how many runs each decision reads (0: no policy).
	Window int `json:"window,omitempty"`
	Round  int `json:"round"`
	// Cycles are the cycles the run completed, the warm-up's included;
	// XactsPerCycle are the database's transactions per cycle
	// (Row.DBCalls over Cycles).
	Cycles        int64    `json:"cycles"`
	XactsPerCycle *float64 `json:"xactsPerCycle,omitempty"`
	// VsNoPolicy is the row's ops/s over those of the row without a
	// policy of its mode and round.
	VsNoPolicy *float64 `json:"vsNoPolicy,omitempty"`
}

// policyVariant is one scenario of the policy phase.
type policyVariant struct {
	scenario string
	name     string                // the policy, for the report
	policy   *leaseapi.AlertPolicy // nil: none
}

// policyVariants are the phase's scenarios, the one without a policy first.
var policyVariants = []policyVariant{
	{scenario: "cycle-no-policy", name: "none"},
	{scenario: "cycle-policy", name: "consecutiveFailures 3", policy: &leaseapi.AlertPolicy{ConsecutiveFailures: 3}},
	{scenario: "cycle-policy-rate64", name: "failureRate 0.5 of 64 runs",
		policy: &leaseapi.AlertPolicy{FailureRate: &leaseapi.FailureRate{Threshold: 0.5, Runs: leaseapi.MaxFailureRateRuns}}},
}

// prefix is the job id prefix of the variant's run in round on side.
func (v policyVariant) prefix(round int, side string) string {
	return fmt.Sprintf("%s-r%d-%s", v.scenario, round, side)
}

// policySeedTick is the tick of the run that creates each job of the
// phase before it is measured: older than every tick of the cycle.
func policySeedTick() time.Time {
	return time.Now().UTC().Truncate(time.Minute).Add(-2 * 365 * 24 * time.Hour)
}

// policies runs the policy phase: every round runs each variant on the
// floor, then over HTTP, the one without a policy first in odd rounds and
// last in even ones.
func (b *bench) policies(ctx context.Context) error {
	o := b.opts
	if err := b.putPolicies(ctx); err != nil {
		return err
	}
	for round := 1; round <= o.policyRounds; round++ {
		order := slices.Clone(policyVariants)
		if round%2 == 0 {
			slices.Reverse(order)
		}
		floors := map[string]Row{}
		for _, side := range []string{"floor", "http"} {
			for _, v := range order {
				row, err := b.policyRun(ctx, v, round, side, floors[v.scenario])
				if err != nil {
					return err
				}
				if side == "floor" {
					floors[v.scenario] = row
				}
			}
		}
		if err := b.db.vacuum(ctx); err != nil {
			return err
		}
	}
	comparePolicies(b.report.Rows)
	return nil
}

// putPolicies creates the jobs of every run of the phase, with one run
// each, and sets the policies of those that have one, through a store of
// their own, before any run is measured.
func (b *bench) putPolicies(ctx context.Context) error {
	store, err := postgres.Open(ctx, postgres.Config{DSN: b.db.dsn})
	if err != nil {
		return err
	}
	tick := policySeedTick()
	for round := 1; round <= b.opts.policyRounds; round++ {
		for _, v := range policyVariants {
			for _, side := range []string{"floor", "http"} {
				for w := range b.opts.concurrency {
					job := cycleJobID(v.prefix(round, side), w)
					if err := seedPolicyJob(ctx, store, job, tick, v.policy); err != nil {
						return errors.Join(err, store.Close())
					}
				}
			}
		}
	}
	return store.Close()
}

// seedPolicyJob creates job with one succeeded run of tick and, unless
// policy is nil, sets its policy.
func seedPolicyJob(ctx context.Context, store *postgres.Store, job string, tick time.Time, policy *leaseapi.AlertPolicy) error {
	l, err := store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: "leasebench", TTL: benchTTL, Tick: &tick})
	if err != nil {
		return fmt.Errorf("create job %s: %w", job, err)
	}
	if _, err := store.Release(ctx, &leaseapi.ReleaseParams{JobID: job, Owner: "leasebench", Token: l.Token, Outcome: leaseapi.OutcomeSucceeded}); err != nil {
		return fmt.Errorf("create job %s: %w", job, err)
	}
	if policy == nil {
		return nil
	}
	if _, err := store.PutPolicy(ctx, &leaseapi.PutPolicyParams{JobID: job, Policy: *policy, By: "leasebench"}); err != nil {
		return fmt.Errorf("set the policy of job %s: %w", job, err)
	}
	return nil
}

// policyRun measures the variant v in round on side and adds its row; an
// HTTP row is compared with floor, the variant's floor row of the round.
func (b *bench) policyRun(ctx context.Context, v policyVariant, round int, side string, floor Row) (Row, error) {
	o := b.opts
	prefix := v.prefix(round, side)
	var cycles atomic.Int64
	body := func(c client) (measurement, error) {
		cycle := cycleBody(c, prefix)
		return closedLoop(ctx, o.concurrency, o.warmup, o.duration, func(ctx context.Context, w, i int, m *meter) {
			cycle(ctx, w, i, m)
			cycles.Add(1)
		}), nil
	}
	b.logf("policy: round %d/%d, %s, %s", round, o.policyRounds, v.scenario, side)
	var row Row
	if side == "floor" {
		m, err := b.floor(ctx, false, body)
		if err != nil {
			return Row{}, err
		}
		row = newRow(v.scenario, side, "fast", o.concurrency, m)
	} else {
		hr, err := b.http(ctx, v.scenario, "fast", o.concurrency, body)
		if err != nil {
			return Row{}, err
		}
		row = newRow(v.scenario, side, "fast", o.concurrency, hr.measurement).withProc(hr.proc).vs(floor)
	}
	d := &PolicyDetail{Policy: v.name, Round: round, Cycles: cycles.Load()}
	if v.policy != nil {
		d.Window = v.policy.Window()
	}
	if row.DBCalls != nil && d.Cycles > 0 {
		d.XactsPerCycle = ptr(float64(*row.DBCalls) / float64(d.Cycles))
	}
	row.Policy = d
	if v.policy != nil {
		if err := b.checkPolicies(ctx, fmt.Sprintf("%s %s round %d", v.scenario, side, round), prefix); err != nil {
			return Row{}, err
		}
	}
	return b.add(row), nil
}

// checkPolicies checks the policies of the run of prefix in the database:
// every job has its policy, ok (every release succeeded) and shown so on
// its lease, and none is left due. A violation is added to the report's
// bugs.
func (b *bench) checkPolicies(ctx context.Context, label, prefix string) error {
	c, err := b.db.checkPolicies(ctx, prefix)
	if err != nil {
		return err
	}
	jobs := int64(b.opts.concurrency)
	if c.policies != jobs || c.ok != jobs || c.shownOK != jobs || c.due != 0 {
		b.report.Bugs = append(b.report.Bugs, fmt.Sprintf(
			"%s: database has %d policies, %d ok, %d leases showing ok, %d still due; want %d, %d, %d, 0",
			label, c.policies, c.ok, c.shownOK, c.due, jobs, jobs, jobs))
	}
	return nil
}

// comparePolicies sets the VsNoPolicy of every row of the policy phase
// with a policy that has a row without one of its mode and round.
func comparePolicies(rows []Row) {
	for i := range rows {
		p := rows[i].Policy
		if p == nil || p.Window == 0 {
			continue
		}
		j := slices.IndexFunc(rows, func(r Row) bool {
			return r.Policy != nil && r.Policy.Window == 0 && r.Policy.Round == p.Round && r.Mode == rows[i].Mode
		})
		if j >= 0 && rows[j].OpsPerSec > 0 {
			p.VsNoPolicy = ptr(rows[i].OpsPerSec / rows[j].OpsPerSec)
		}
	}
}

// policySummary is one scenario and mode of the policy phase over its
// rounds.
type policySummary struct {
	Scenario, Mode, Policy string
	// OpsPerSec are the rounds' ops/s; Ratios their ops/s over those of
	// the round's row without a policy (none for that row); Xacts the
	// database transactions per cycle, by round.
	OpsPerSec, Ratios, Xacts []float64
}

// policySummaries summarizes the rows of the policy phase by scenario
// and mode, in the order of their first rows.
func policySummaries(rows []Row) []policySummary {
	var out []policySummary
	for _, r := range rows {
		if r.Policy == nil {
			continue
		}
		i := slices.IndexFunc(out, func(s policySummary) bool { return s.Scenario == r.Scenario && s.Mode == r.Mode })
		if i < 0 {
			out = append(out, policySummary{Scenario: r.Scenario, Mode: r.Mode, Policy: r.Policy.Policy})
			i = len(out) - 1
		}
		out[i].OpsPerSec = append(out[i].OpsPerSec, r.OpsPerSec)
		if r.Policy.VsNoPolicy != nil {
			out[i].Ratios = append(out[i].Ratios, *r.Policy.VsNoPolicy)
		}
		if r.Policy.XactsPerCycle != nil {
			out[i].Xacts = append(out[i].Xacts, *r.Policy.XactsPerCycle)
		}
	}
	return out
}

// medianOr formats the median of xs, or "-" for none.
func medianOr(xs []float64, format string) string {
	if len(xs) == 0 {
		return "-"
	}
	return fmt.Sprintf(format, median(xs))
}

// rangeOr formats the range of xs, or "-" for none.
func rangeOr(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f–%.2f", slices.Min(xs), slices.Max(xs))
}

var policySummaryHeader = []string{"scenario", "mode", "policy", "ops/s (median)", "with ÷ without ops/s (median)", "range", "db xacts per cycle (median)"}

func policySummaryRow(s policySummary) []string {
	return []string{s.Scenario, s.Mode, s.Policy, medianOr(s.OpsPerSec, "%.0f"), medianOr(s.Ratios, "%.2f"), rangeOr(s.Ratios), medianOr(s.Xacts, "%.2f")}
}

// printPolicies prints the policy phase's comparison.
func printPolicies(w io.Writer, rep *Report) {
	if s := policySummaries(rep.Rows); len(s) > 0 {
		fmt.Fprintln(w, "\nalert policies, cycle with a policy against without:")
		printTabbed(w, policySummaryHeader, s, policySummaryRow)
	}
}

// writePoliciesMarkdown writes the policy phase's comparison as a table.
func writePoliciesMarkdown(w io.Writer, rep *Report) {
	s := policySummaries(rep.Rows)
	if len(s) == 0 {
		return
	}
	fmt.Fprintf(w, "\nAlert policies (`policy`, every row in the JSON): the cycle with its jobs' releases deciding a policy "+
		"against without one, medians of %d alternated rounds; db xacts per cycle: the benchmark database's transactions "+
		"over the cycles completed, warm-up included:\n\n", len(s[0].OpsPerSec))
	markdownTable(w, policySummaryHeader, s, policySummaryRow)
}
