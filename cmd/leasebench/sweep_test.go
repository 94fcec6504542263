package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// TestExplainDueJobsQueryIsRepos keeps the EXPLAINed copy of the sweep's
// due-jobs read equal to repo's dueJobsQuery, which is unexported.
func TestExplainDueJobsQueryIsRepos(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "../../repo/postgres/schedule.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]ast.Expr{}
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						consts[n.Name] = vs.Values[i]
					}
				}
			}
		}
	}
	var eval func(e ast.Expr) string
	eval = func(e ast.Expr) string {
		switch e := e.(type) {
		case *ast.BasicLit:
			s, err := strconv.Unquote(e.Value)
			if err != nil {
				t.Fatalf("unquote %s: %v", e.Value, err)
			}
			return s
		case *ast.Ident:
			v, ok := consts[e.Name]
			if !ok {
				t.Fatalf("constant %s is not in repo/postgres_schedule.go", e.Name)
			}
			return eval(v)
		case *ast.BinaryExpr:
			return eval(e.X) + eval(e.Y)
		case *ast.ParenExpr:
			return eval(e.X)
		}
		t.Fatalf("cannot evaluate %T", e)
		return ""
	}
	q, ok := consts["dueJobsQuery"]
	if !ok {
		t.Fatal("repo/postgres_schedule.go has no dueJobsQuery")
	}
	if got := eval(q); got != explainDueJobsQuery {
		t.Errorf("repo's dueJobsQuery changed; update explainDueJobsQuery to\n%s", got)
	}
}

func TestPlanSummary(t *testing.T) {
	t.Parallel()
	plan := []string{
		"Limit  (cost=0.42..38.13 rows=101 width=87) (actual time=710.286..710.287 rows=0 loops=1)",
		"  Buffers: shared hit=1000356",
		"  ->  LockRows  (cost=0.42..125674.80 rows=333667 width=87) (actual time=710.285..710.286 rows=0 loops=1)",
		"        ->  Index Scan using leases_decide_at_idx on leases  (cost=0.42..125674.80 rows=333667 width=87) (actual time=710.286..710.287 rows=0 loops=1)",
		"              Filter: (decide_at <= clock_timestamp())",
		"              Rows Removed by Filter: 1000000",
		"Planning Time: 0.1 ms",
		"Execution Time: 710.350 ms",
	}
	want := []string{
		"Index Scan using leases_decide_at_idx on leases  (cost=0.42..125674.80 rows=333667 width=87) (actual time=710.286..710.287 rows=0 loops=1)",
		"Filter: (decide_at <= clock_timestamp())",
		"Rows Removed by Filter: 1000000",
		"Execution Time: 710.350 ms",
	}
	if got := planSummary(plan); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("planSummary() =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestSweepTargets(t *testing.T) {
	t.Parallel()
	o := options{sweepJobs: 1000000, sweepDue: 1000}
	row := func(jobs int, seconds float64, passRows, idleRows int64, idleMs float64) Row {
		w := sweepDueMix(1000)
		d := &SweepDetail{ScheduledJobs: jobs, DueJobs: 1000, Decided: 1000, Ran: w.Ran, Missed: w.Missed, Unclaimed: w.Unclaimed, Want: w,
			Ticks: 1000, TicksPerSecond: 1000 / seconds, MissedTicks: w.Missed, MissedRuns: w.Missed, ManualMissedRuns: w.Unclaimed,
			OwedCatchUp: w.OwedCatchUp, OwedManual: w.Claimable, IdleMs: []float64{idleMs, 2 * idleMs, idleMs},
			Pass: SweepCounters{Leases: TableDelta{IdxTupFetch: passRows}}, Idle: SweepCounters{Leases: TableDelta{IdxTupFetch: idleRows}}}
		return Row{Scenario: sweepScenario(jobs, 1000), Mode: "floor", Acquire: "-", Seconds: seconds, Sweep: d}
	}
	status := func(ts []Target) []string {
		var out []string
		for _, tg := range ts {
			out = append(out, tg.status())
		}
		return out
	}
	tests := []struct {
		name string
		rows []Row
		want []string
	}{
		{"Met", []Row{row(1000, 0.05, 3000, 1000, 3), row(1000000, 0.06, 3000, 0, 4)}, []string{"met", "met", "met", "met"}},
		{"ReadsAllJobs", []Row{row(1000, 0.05, 3000, 1000, 3), row(1000000, 0.09, 1002000, 1000000, 4)}, []string{"MISSED", "met", "met", "met"}},
		{"Slow", []Row{row(1000, 0.2, 3000, 1000, 3), row(1000000, 0.25, 3000, 0, 12)}, []string{"met", "met", "MISSED", "MISSED"}},
		{"NotMeasured", nil, []string{"n/a", "n/a", "n/a", "n/a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := status(sweepTargets(tt.rows, o)); strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("sweepTargets() = %v, want %v", got, tt.want)
			}
		})
	}
	for name, mutate := range map[string]func(d *SweepDetail){
		"StillDue":          func(d *SweepDetail) { d.StillDue = 3 },
		"CatchUpNotOwed":    func(d *SweepDetail) { d.OwedCatchUp-- },
		"UnclaimedNotKept":  func(d *SweepDetail) { d.ManualMissedRuns = 0 },
		"MissedRunsDoubled": func(d *SweepDetail) { d.MissedRuns *= 2 },
	} {
		wrong := []Row{row(1000, 0.05, 3000, 1000, 3), row(1000000, 0.06, 3000, 0, 4)}
		mutate(wrong[1].Sweep)
		if got := status(sweepTargets(wrong, o)); got[1] != "MISSED" {
			t.Errorf("sweepTargets() with %s = %v, want the decisions target missed", name, got)
		}
	}
}

// TestSweepDueMix: the seeded mix as the seed's comment says, for the
// default 1,000 due jobs.
func TestSweepDueMix(t *testing.T) {
	t.Parallel()
	want := dueMix{Ran: 500, Missed: 500, Unclaimed: 100, Claimable: 100, OwedCatchUp: 200}
	if got := sweepDueMix(1000); got != want {
		t.Errorf("sweepDueMix(1000) = %+v, want %+v", got, want)
	}
}
