package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/postgres"
)

// The group phase: what a concurrency group costs. A grant in a group is
// one transaction that takes the group row's lock, reads the group's slots
// and writes the lease and the slot it takes, so the grants of one group
// go one at a time and none joins the batched grants of ungrouped jobs.
// The phase runs the cycle and the herd with their jobs in groups whose
// limits cover every job, so that no job waits for a slot and what it
// measures is the lock, the reads and the writes, against the same
// scenarios without groups, in rounds that alternate the order.

// groupHerdSplits are the grouped herds: the herd's jobs in one group,
// and spread over ten.
var groupHerdSplits = []int{1, 10}

// GroupDetail places a row of the group phase.
type GroupDetail struct {
	// Base is the scenario measured: cycle or herd.
	Base string `json:"base"`
	// Groups is how many groups the jobs are in (0: none), each with
	// room for Limit holders.
	Groups int `json:"groups"`
	Limit  int `json:"limit,omitempty"`
	Round  int `json:"round"`
	// VsUngrouped is the row's ops/s over those of the ungrouped row of
	// its base, mode and round.
	VsUngrouped *float64 `json:"vsUngrouped,omitempty"`
}

// groupVariant is one scenario of the group phase.
type groupVariant struct {
	scenario string
	base     string // cycle or herd
	groups   int    // 0: no group
	limit    int
}

// groupVariants are the phase's scenarios, the ungrouped one of each base
// first.
func groupVariants(o options) []groupVariant {
	vs := []groupVariant{
		{scenario: "cycle-ungrouped", base: "cycle"},
		{scenario: "cycle-1-group", base: "cycle", groups: 1, limit: o.concurrency},
		{scenario: "herd-ungrouped", base: "herd"},
	}
	for _, k := range groupHerdSplits {
		k = min(k, o.groupHerdJobs)
		name := fmt.Sprintf("herd-%d-groups", k)
		if k == 1 {
			name = "herd-1-group"
		}
		// Job j is in group j mod k, which has at most ⌈jobs/k⌉ jobs.
		vs = append(vs, groupVariant{scenario: name, base: "herd", groups: k, limit: (o.groupHerdJobs + k - 1) / k})
	}
	return vs
}

// prefix is the job id prefix of the variant's run in round on side.
func (v groupVariant) prefix(round int, side string) string {
	return fmt.Sprintf("%s-r%d-%s", v.scenario, round, side)
}

// groupOf returns the name of the group of every job of the run of
// prefix, by job id.
func (v groupVariant) groupOf(prefix string, o options) map[string]string {
	of := map[string]string{}
	if v.base == "cycle" {
		for w := range o.concurrency {
			of[cycleJobID(prefix, w)] = prefix + "-g0"
		}
		return of
	}
	for j := range o.groupHerdJobs {
		of[herdJobID(prefix, j)] = fmt.Sprintf("%s-g%d", prefix, j%v.groups)
	}
	return of
}

// groups runs the group phase: every round runs each base's variants on
// the floor, then over HTTP, the ungrouped one first in odd rounds and
// last in even ones.
func (b *bench) groups(ctx context.Context) error {
	o := b.opts
	if o.concurrency > leaseapi.MaxGroupLimit || o.groupHerdJobs > leaseapi.MaxGroupLimit {
		return fmt.Errorf("-c %d and -group-herd-jobs %d must be at most %d, the largest limit of a group, so that one group has room for all its jobs",
			o.concurrency, o.groupHerdJobs, leaseapi.MaxGroupLimit)
	}
	variants := groupVariants(o)
	if err := b.putGroups(ctx, variants); err != nil {
		return err
	}
	for round := 1; round <= o.groupRounds; round++ {
		for _, base := range []string{"cycle", "herd"} {
			var order []groupVariant
			for _, v := range variants {
				if v.base == base {
					order = append(order, v)
				}
			}
			if round%2 == 0 {
				slices.Reverse(order)
			}
			floors := map[string]Row{}
			for _, side := range []string{"floor", "http"} {
				for _, v := range order {
					row, err := b.groupRun(ctx, v, round, side, floors[v.scenario])
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
	}
	compareGroups(b.report.Rows)
	return nil
}

// putGroups creates the groups of every run of the phase, before any is
// measured, through a store of their own.
func (b *bench) putGroups(ctx context.Context, variants []groupVariant) error {
	store, err := postgres.Open(ctx, postgres.Config{DSN: b.db.dsn})
	if err != nil {
		return err
	}
	for round := 1; round <= b.opts.groupRounds; round++ {
		for _, v := range variants {
			if v.groups == 0 {
				continue
			}
			for _, side := range []string{"floor", "http"} {
				prefix := v.prefix(round, side)
				for g := range v.groups {
					p := &leaseapi.PutGroupParams{Name: fmt.Sprintf("%s-g%d", prefix, g), Limit: v.limit, By: "leasebench"}
					if _, err := store.PutGroup(ctx, p); err != nil {
						return errors.Join(fmt.Errorf("create group %s: %w", p.Name, err), store.Close())
					}
				}
			}
		}
	}
	return store.Close()
}

// groupRun measures the variant v in round on side and adds its row; an
// HTTP row is compared with floor, the variant's floor row of the round.
func (b *bench) groupRun(ctx context.Context, v groupVariant, round int, side string, floor Row) (Row, error) {
	o := b.opts
	prefix := v.prefix(round, side)
	workers := o.concurrency
	if v.base == "herd" {
		workers = o.groupHerdReplicas
	}
	body := func(c client) (measurement, error) {
		if v.groups > 0 {
			of := v.groupOf(prefix, o)
			c = c.inGroups(func(job string) string { return of[job] })
		}
		if v.base == "cycle" {
			return closedLoop(ctx, workers, o.warmup, o.duration, cycleBody(c, prefix)), nil
		}
		r := herd(ctx, c, prefix, o.groupHerdReplicas, o.groupHerdJobs, herdSameOrder)
		label := fmt.Sprintf("%s fast %s round %d", v.scenario, side, round)
		if err := b.checkHerd(ctx, label, prefix, o.groupHerdJobs, r); err != nil || v.groups == 0 {
			return r, err
		}
		return r, b.checkHerdGroups(ctx, label, prefix)
	}
	b.logf("group: round %d/%d, %s, %s", round, o.groupRounds, v.scenario, side)
	var row Row
	if side == "floor" {
		m, err := b.floor(ctx, false, body)
		if err != nil {
			return Row{}, err
		}
		row = newRow(v.scenario, side, "fast", workers, m)
	} else {
		hr, err := b.http(ctx, v.scenario, "fast", workers, body)
		if err != nil {
			return Row{}, err
		}
		row = newRow(v.scenario, side, "fast", workers, hr.measurement).withProc(hr.proc).vs(floor)
	}
	if v.base == "herd" {
		row = row.herd()
	}
	row.Group = &GroupDetail{Base: v.base, Groups: v.groups, Limit: v.limit, Round: round}
	return b.add(row), nil
}

// checkHerdGroups checks the groups of the herd of prefix in the database:
// every job's grant took a slot of its group, and each group issued one
// slot token per grant. A violation is added to the report's bugs.
func (b *bench) checkHerdGroups(ctx context.Context, label, prefix string) error {
	jobs := int64(b.opts.groupHerdJobs)
	c, err := b.db.checkGroups(ctx, prefix)
	if err != nil {
		return err
	}
	if c.holders != jobs || c.slots != jobs || c.slotTokens != jobs {
		b.report.Bugs = append(b.report.Bugs, fmt.Sprintf(
			"%s: database has %d jobs holding a slot, %d slot rows, slot tokens summing to %d; want %d of each",
			label, c.holders, c.slots, c.slotTokens, jobs))
	}
	return nil
}

// compareGroups sets the VsUngrouped of every grouped row of the group
// phase that has an ungrouped row of its base, mode and round.
func compareGroups(rows []Row) {
	for i := range rows {
		g := rows[i].Group
		if g == nil || g.Groups == 0 {
			continue
		}
		j := slices.IndexFunc(rows, func(r Row) bool {
			return r.Group != nil && r.Group.Groups == 0 && r.Group.Base == g.Base && r.Group.Round == g.Round && r.Mode == rows[i].Mode
		})
		if j >= 0 && rows[j].OpsPerSec > 0 {
			g.VsUngrouped = ptr(rows[i].OpsPerSec / rows[j].OpsPerSec)
		}
	}
}

// groupSummary is one grouped scenario and mode of the group phase over
// its rounds.
type groupSummary struct {
	Scenario, Mode string
	// Ratios are the rounds' grouped ÷ ungrouped ops/s, by round.
	Ratios []float64
}

// groupSummaries summarizes the grouped rows, in the order of their first
// rows.
func groupSummaries(rows []Row) []groupSummary {
	var out []groupSummary
	for _, r := range rows {
		if r.Group == nil || r.Group.VsUngrouped == nil {
			continue
		}
		i := slices.IndexFunc(out, func(s groupSummary) bool { return s.Scenario == r.Scenario && s.Mode == r.Mode })
		if i < 0 {
			out = append(out, groupSummary{Scenario: r.Scenario, Mode: r.Mode})
			i = len(out) - 1
		}
		out[i].Ratios = append(out[i].Ratios, *r.Group.VsUngrouped)
	}
	return out
}

var groupSummaryHeader = []string{"scenario", "mode", "grouped ÷ ungrouped ops/s (median)", "range", "by round"}

func groupSummaryRow(s groupSummary) []string {
	rounds := make([]string, len(s.Ratios))
	for i, r := range s.Ratios {
		rounds[i] = fmt.Sprintf("%.2f", r)
	}
	return []string{s.Scenario, s.Mode, fmt.Sprintf("%.2f", median(s.Ratios)),
		fmt.Sprintf("%.2f–%.2f", slices.Min(s.Ratios), slices.Max(s.Ratios)), strings.Join(rounds, " ")}
}

// printGroups prints the group phase's comparison.
func printGroups(w io.Writer, rep *Report) {
	if s := groupSummaries(rep.Rows); len(s) > 0 {
		fmt.Fprintln(w, "\nconcurrency groups, grouped against ungrouped:")
		printTabbed(w, groupSummaryHeader, s, groupSummaryRow)
	}
}

// writeGroupsMarkdown writes the group phase's comparison as one
// paragraph.
func writeGroupsMarkdown(w io.Writer, rep *Report) {
	s := groupSummaries(rep.Rows)
	if len(s) == 0 {
		return
	}
	parts := make([]string, len(s))
	for i, g := range s {
		parts[i] = fmt.Sprintf("`%s` %s %.2f [%.2f–%.2f]", g.Scenario, g.Mode, median(g.Ratios), slices.Min(g.Ratios), slices.Max(g.Ratios))
	}
	fmt.Fprintf(w, "\nConcurrency groups (`group`, every row in the JSON): ops/s with the jobs in groups that have room for every holder "+
		"over ops/s without, median [range] of %d alternated rounds: %s.\n", len(s[0].Ratios), strings.Join(parts, "; "))
}
