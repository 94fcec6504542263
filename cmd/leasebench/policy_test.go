package main

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

func TestPolicyVariantsAreValid(t *testing.T) {
	t.Parallel()
	if policyVariants[0].policy != nil {
		t.Fatalf("the first variant %s has a policy; the rounds compare with the one without", policyVariants[0].scenario)
	}
	windows := map[string]int{}
	for _, v := range policyVariants {
		job := cycleJobID(v.prefix(12, "floor"), 511)
		if !leaseapi.ValidJobID(job) {
			t.Errorf("%s: job id %q is not valid", v.scenario, job)
		}
		if v.policy == nil {
			continue
		}
		if err := v.policy.Validate(); err != nil {
			t.Errorf("%s: policy %+v: %v", v.scenario, v.policy, err)
		}
		windows[v.scenario] = v.policy.Window()
	}
	// The second policy reads the largest window a policy can have.
	largest := (&leaseapi.AlertPolicy{FailureRate: &leaseapi.FailureRate{Threshold: 1, Runs: leaseapi.MaxFailureRateRuns}}).Window()
	if want := map[string]int{"cycle-policy": 8, "cycle-policy-rate64": largest}; !reflect.DeepEqual(windows, want) {
		t.Errorf("windows = %v, want %v", windows, want)
	}
	if err := parseRounds("-policy-rounds", "0"); err == nil {
		t.Error("parseOptions(-policy-rounds 0) = nil error, want one")
	}
}

func parseRounds(flag, n string) error {
	_, err := parseOptions([]string{flag, n}, &strings.Builder{})
	return err
}

// policyRow is a row of the policy phase.
func policyRow(scenario, mode string, window, round int, opsPerSec float64, xacts, cycles int64) Row {
	r := Row{Scenario: scenario, Mode: mode, OpsPerSec: opsPerSec, DBCalls: &xacts,
		Policy: &PolicyDetail{Policy: scenario, Window: window, Round: round, Cycles: cycles}}
	r.Policy.XactsPerCycle = ptr(float64(xacts) / float64(cycles))
	return r
}

func TestComparePolicies(t *testing.T) {
	t.Parallel()
	rows := []Row{
		newRow("cycle", "floor", "fast", 32, measurement{summary: summary{ops: 9}, elapsed: time.Second}), // not of the phase
		policyRow("cycle-no-policy", "floor", 0, 1, 1000, 100, 100),
		policyRow("cycle-policy", "floor", 8, 1, 500, 300, 100),
		policyRow("cycle-no-policy", "http", 0, 1, 800, 100, 100),
		policyRow("cycle-policy", "http", 8, 1, 600, 250, 100),
		policyRow("cycle-policy", "floor", 8, 2, 300, 200, 100),
		policyRow("cycle-no-policy", "floor", 0, 2, 1200, 50, 100),
		policyRow("cycle-policy", "http", 8, 3, 400, 100, 100), // no row without a policy in round 3: no ratio
	}
	comparePolicies(rows)
	got := policySummaries(rows)
	want := []policySummary{
		{Scenario: "cycle-no-policy", Mode: "floor", Policy: "cycle-no-policy", OpsPerSec: []float64{1000, 1200}, Xacts: []float64{1, 0.5}},
		{Scenario: "cycle-policy", Mode: "floor", Policy: "cycle-policy", OpsPerSec: []float64{500, 300}, Ratios: []float64{0.5, 0.25}, Xacts: []float64{3, 2}},
		{Scenario: "cycle-no-policy", Mode: "http", Policy: "cycle-no-policy", OpsPerSec: []float64{800}, Xacts: []float64{1}},
		{Scenario: "cycle-policy", Mode: "http", Policy: "cycle-policy", OpsPerSec: []float64{600, 400}, Ratios: []float64{0.75}, Xacts: []float64{2.5, 1}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("policySummaries() =\n%+v\nwant\n%+v", got, want)
	}
	if r := policySummaryRow(got[1]); !reflect.DeepEqual(r[3:], []string{"400", "0.38", "0.25–0.50", "2.50"}) {
		t.Errorf("policySummaryRow(%+v) = %q, want median 400 ops/s, ratio 0.38 in 0.25–0.50, 2.50 xacts per cycle", got[1], r)
	}
	if r := policySummaryRow(got[0]); r[4] != "-" || r[5] != "-" {
		t.Errorf("policySummaryRow(%+v) = %q, want no ratio for the row without a policy", got[0], r)
	}
}

func TestMarkdownSumsUpThePolicyRows(t *testing.T) {
	t.Parallel()
	rep := &Report{Rows: []Row{
		newRow("cycle", "floor", "fast", 32, measurement{summary: summary{ops: 10}, elapsed: time.Second}),
		policyRow("cycle-no-policy", "floor", 0, 1, 1000, 100, 100),
		policyRow("cycle-policy", "floor", 8, 1, 400, 300, 100),
	}}
	comparePolicies(rep.Rows)
	var md bytes.Buffer
	writeMarkdown(&md, rep)
	got := md.String()
	if !strings.Contains(got, "| cycle | floor |") || strings.Contains(got, "| cycle-policy | floor | fast |") {
		t.Errorf("the results table should have the cycle row and none of the policy phase's:\n%s", got)
	}
	if !strings.Contains(got, "medians of 1 alternated rounds") || !strings.Contains(got, "| cycle-policy | floor | cycle-policy | 400 | 0.40 | 0.40–0.40 | 3.00 |") {
		t.Errorf("the results lack the policies' comparison:\n%s", got)
	}
}
