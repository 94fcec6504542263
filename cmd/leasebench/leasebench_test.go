package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

func TestPercentile(t *testing.T) {
	t.Parallel()
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"Empty", nil, 0.5, 0},
		{"One", ms(7), 0.99, 7 * time.Millisecond},
		{"MedianOfFour", ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{"P99OfHundred", hundred, 0.99, 99 * time.Millisecond},
		{"P50OfHundred", hundred, 0.5, 50 * time.Millisecond},
		{"MaxIsP100", hundred, 1, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := percentile(tt.sorted, tt.q); got != tt.want {
				t.Errorf("percentile(%v) = %v, want %v", tt.q, got, tt.want)
			}
		})
	}
}

func TestParseStatCPU(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		stat    string
		want    time.Duration
		wantErr bool
	}{
		{
			name: "Plain",
			stat: "1234 (leaseapi) S 1 1234 1234 0 -1 4194560 500 0 0 0 150 25 0 0 20 0 8 0 100 0 0",
			want: 1750 * time.Millisecond,
		},
		{
			name: "SpacesAndParensInName",
			stat: "99 (a) b (c)) R 1 99 99 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 1 0 0",
			want: 100 * time.Millisecond,
		},
		{name: "Truncated", stat: "1 (x) S 1 2 3", wantErr: true},
		{name: "NoName", stat: "garbage", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseStatCPU(tt.stat)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseStatCPU() error = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("parseStatCPU() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestReadProcStatsOfSelf(t *testing.T) {
	t.Parallel()
	st, err := readProcStats(os.Getpid())
	if err != nil {
		t.Fatalf("leasebench reads its peak RSS and CPU time from /proc, which it cannot read here: %v", err)
	}
	if st.peakRSSBytes <= 0 {
		t.Errorf("peak RSS = %d, want > 0", st.peakRSSBytes)
	}
}

func TestSizeName(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]string{1000: "1k", 100000: "100k", 1000000: "1M", 2500000: "2500k", 1500: "1500", 20000: "20k"} {
		if got := sizeName(n); got != want {
			t.Errorf("sizeName(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestCursorIsBase64URLWithoutPadding(t *testing.T) {
	t.Parallel()
	// "list-0000500" is 12 bytes: no padding either way; "ab" would pad.
	if got, want := cursor("ab"), "YWI"; got != want {
		t.Errorf("cursor(%q) = %q, want %q", "ab", got, want)
	}
}

func TestUpdateDoc(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "performance.md")
	page := "# Performance\n\nintro\n\n" + docBegin + "\nold table\n" + docEnd + "\n\nanalysis\n"
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := &Report{
		Command: "go run ./cmd/leasebench", Started: "2026-11-30T09:00:00Z", CPUs: 2, LogLevel: "info",
		Rows: []Row{newRow("cycle", "floor", "fast", 32, measurement{summary: summary{ops: 10}, elapsed: time.Second})},
	}
	rep.Targets = evaluateTargets(rep, options{listSizes: []int{1000}, herdJobs: 1000, herdReplicas: 200, rssLeases: 100000, rssClients: 1000})
	if err := updateDoc(path, rep); err != nil {
		t.Fatalf("updateDoc() = %v", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{"# Performance\n\nintro\n\n" + docBegin + "\n", "| cycle | floor | fast | 32 | 10 | 10 |", "not measured in this run", docEnd + "\n\nanalysis\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("updated page lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "old table") {
		t.Errorf("updated page still has the old table:\n%s", got)
	}
	// Again: the section is replaced, not appended.
	if err := updateDoc(path, rep); err != nil {
		t.Fatalf("second updateDoc() = %v", err)
	}
	b2, _ := os.ReadFile(path)
	if string(b2) != got {
		t.Errorf("a second update changed the page:\n%s", b2)
	}
}

func TestUpdateDocWithoutSection(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "performance.md")
	if err := os.WriteFile(path, []byte("# Performance\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := updateDoc(path, &Report{}); err == nil {
		t.Error("updateDoc() = nil, want an error naming the missing markers")
	}
}

func TestAtLeastAtMost(t *testing.T) {
	t.Parallel()
	if tg := atLeast("x", 0.6, 0.8, "%.2f", "ratio"); *tg.Met || !strings.Contains(tg.Detail, "missed by 25%") {
		t.Errorf("atLeast(0.6, 0.8) = %+v, want missed by 25%%", tg)
	}
	if tg := atMost("x", 15, 10, "%.0f ms", "p99"); *tg.Met || !strings.Contains(tg.Detail, "missed by 50% (1.5× the target)") {
		t.Errorf("atMost(15, 10) = %+v, want missed by 50%%", tg)
	}
	if tg := atMost("x", 5, 10, "%.0f ms", "p99"); !*tg.Met || strings.Contains(tg.Detail, "missed") {
		t.Errorf("atMost(5, 10) = %+v, want met", tg)
	}
}

func TestParseOptionsQuick(t *testing.T) {
	t.Parallel()
	o, err := parseOptions([]string{"-quick", "-herd-jobs", "7", "-doc", "docs/performance.md"}, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	if o.herdJobs != 7 || o.herdReplicas != 50 || o.duration != time.Second || o.doc != "" || o.out != filepath.Join(os.TempDir(), "leasebench-quick.json") ||
		o.sweepJobs != 100000 || o.sweepDue != 1000 || o.groupHerdReplicas != 50 || o.groupHerdJobs != 100 {
		t.Errorf("parseOptions(-quick) = %+v; want herd-jobs kept at 7, quick sizes otherwise, no -doc, the quick results file", o)
	}
	if _, err := parseOptions([]string{"-sweep-jobs", "10", "-sweep-due", "100"}, &strings.Builder{}); err == nil {
		t.Error("parseOptions(-sweep-jobs 10 -sweep-due 100) = nil error, want one")
	}
	if _, err := parseOptions([]string{"-list-sizes", "1000,x"}, &strings.Builder{}); err == nil {
		t.Error("parseOptions(-list-sizes 1000,x) = nil error, want one")
	}
}

func TestPhasesFollowPhaseNames(t *testing.T) {
	t.Parallel()
	var names []string
	for _, p := range (&bench{}).phases() {
		names = append(names, p.name)
	}
	if !slices.Equal(names, phaseNames) {
		t.Errorf("phases() = %q, want phaseNames %q", names, phaseNames)
	}
	for _, name := range phaseNames {
		o, err := parseOptions([]string{"-only", name}, &strings.Builder{})
		if err != nil || !slices.Equal(o.only, []string{name}) {
			t.Errorf("parseOptions(-only %s) = %q, %v; want the phase", name, o.only, err)
		}
	}
	if _, err := parseOptions([]string{"-only", "groups"}, &strings.Builder{}); err == nil || !strings.Contains(err.Error(), "group,") {
		t.Errorf("parseOptions(-only groups) = %v, want an error naming the phases", err)
	}
	if _, err := parseOptions([]string{"-group-rounds", "0"}, &strings.Builder{}); err == nil {
		t.Error("parseOptions(-group-rounds 0) = nil error, want one")
	}
}

func TestGroupVariantsHaveRoomForEveryJob(t *testing.T) {
	t.Parallel()
	for _, o := range []options{{concurrency: 32, groupHerdJobs: 1000}, {concurrency: 3, groupHerdJobs: 7}, {concurrency: 5, groupHerdJobs: 25}, {concurrency: 1, groupHerdJobs: 1}} {
		vs := groupVariants(o)
		for _, v := range vs {
			if v.groups == 0 {
				continue
			}
			prefix := v.prefix(12, "floor")
			held := map[string]int{}
			for job, g := range v.groupOf(prefix, o) {
				if !leaseapi.ValidJobID(job) || leaseapi.ValidateGroupName("name", g) != nil || !strings.HasPrefix(g, prefix+"-") {
					t.Errorf("%s: job %q in group %q: want valid names under %q", v.scenario, job, g, prefix)
				}
				held[g]++
			}
			jobs := o.groupHerdJobs
			if v.base == "cycle" {
				jobs = o.concurrency
			}
			if total := len(v.groupOf(prefix, o)); total != jobs || len(held) != v.groups {
				t.Errorf("%s with %+v: %d jobs in %d groups, want %d in %d", v.scenario, o, total, len(held), jobs, v.groups)
			}
			for g, n := range held {
				if n > v.limit || v.limit > leaseapi.MaxGroupLimit {
					t.Errorf("%s with %+v: group %s has %d jobs, limit %d", v.scenario, o, g, n, v.limit)
				}
			}
		}
	}
}

func TestCompareGroups(t *testing.T) {
	t.Parallel()
	row := func(scenario, mode string, groups, round int, opsPerSec float64) Row {
		base, _, _ := strings.Cut(scenario, "-")
		return Row{Scenario: scenario, Mode: mode, OpsPerSec: opsPerSec, Group: &GroupDetail{Base: base, Groups: groups, Round: round}}
	}
	rows := []Row{
		row("cycle-ungrouped", "floor", 0, 1, 1000),
		row("cycle-1-group", "floor", 1, 1, 500),
		row("cycle-ungrouped", "http", 0, 1, 800),
		row("cycle-1-group", "http", 1, 1, 600),
		row("cycle-1-group", "floor", 1, 2, 360),
		row("cycle-ungrouped", "floor", 0, 2, 1200),
		row("cycle-1-group", "http", 1, 2, 400),
		row("cycle-ungrouped", "http", 0, 2, 500),
		row("herd-1-group", "floor", 1, 1, 50), // no ungrouped herd: no ratio
		{Scenario: "cycle", Mode: "floor", OpsPerSec: 10},
	}
	compareGroups(rows)
	got := groupSummaries(rows)
	want := []groupSummary{
		{Scenario: "cycle-1-group", Mode: "floor", Ratios: []float64{0.5, 0.3}},
		{Scenario: "cycle-1-group", Mode: "http", Ratios: []float64{0.75, 0.8}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("groupSummaries() = %+v, want %+v", got, want)
	}
	if r := groupSummaryRow(got[0]); r[2] != "0.40" || r[3] != "0.30–0.50" || r[4] != "0.50 0.30" {
		t.Errorf("groupSummaryRow() = %q, want median 0.40, range 0.30–0.50, rounds 0.50 0.30", r)
	}
	for _, r := range rows {
		if r.Group != nil && r.Group.Groups == 0 && r.Group.VsUngrouped != nil {
			t.Errorf("ungrouped row %s %s round %d has a ratio", r.Scenario, r.Mode, r.Group.Round)
		}
	}
}

func TestGroupFullCodeIsTheProblemsCode(t *testing.T) {
	t.Parallel()
	full := api.Problem{Status: 409, Code: api.CodeGroupFull, Detail: "group full"}.AppendJSON(nil)
	if !bytes.Contains(full, groupFullCode) {
		t.Errorf("a group_full problem %s does not contain %s", full, groupFullCode)
	}
	held := api.Problem{Status: 409, Code: api.CodeLeaseHeld, Detail: "the group_full of another job"}.AppendJSON(nil)
	if bytes.Contains(held, groupFullCode) {
		t.Errorf("a lease_held problem %s contains %s", held, groupFullCode)
	}
}

func TestHerdTargetHoldsGroupHerdsToTheirSize(t *testing.T) {
	t.Parallel()
	o := options{listSizes: []int{1000}, herdJobs: 1000, herdReplicas: 200, groupHerdJobs: 300, groupHerdReplicas: 100}
	herdRow := func(scenario string, grants, errors int64, group *GroupDetail) Row {
		r := newRow(scenario, "floor", "fast", 200, measurement{summary: summary{ops: 10, grants: grants, errors: errors}, elapsed: time.Second}).herd()
		r.Group = group
		return r
	}
	target := func(rows ...Row) Target {
		for _, tg := range evaluateTargets(&Report{Rows: rows}, o) {
			if strings.Contains(tg.Name, "in every herd run") {
				return tg
			}
		}
		t.Fatal("no herd grants target")
		return Target{}
	}
	plain := herdRow("herd", 1000, 0, nil)
	if tg := target(plain, herdRow("herd-1-group", 300, 0, &GroupDetail{Base: "herd", Groups: 1})); tg.Met == nil || !*tg.Met || !strings.Contains(tg.Name, "100×300") {
		t.Errorf("herd target with a good group herd = %+v, want met, naming the group herds' size", tg)
	}
	if tg := target(plain, herdRow("herd-1-group", 300, 2, &GroupDetail{Base: "herd", Groups: 1})); tg.Met == nil || *tg.Met {
		t.Errorf("herd target with a group herd that had errors = %+v, want missed", tg)
	}
	if tg := target(plain, herdRow("herd-1-group", 1000, 0, &GroupDetail{Base: "herd", Groups: 1})); tg.Met == nil || *tg.Met {
		t.Errorf("herd target with a group herd of 1000 grants for 300 jobs = %+v, want missed", tg)
	}
	if tg := target(herdRow("herd-1-group", 300, 0, &GroupDetail{Base: "herd", Groups: 1})); tg.Met == nil || !*tg.Met || strings.Contains(tg.Name, "200×1000") {
		t.Errorf("herd target with the group herds alone = %+v, want met, naming only their size", tg)
	}
}

func TestMarkdownSumsUpTheGroupRows(t *testing.T) {
	t.Parallel()
	m := measurement{summary: summary{ops: 10}, elapsed: time.Second}
	plain := newRow("cycle-ungrouped", "floor", "fast", 32, m)
	plain.Group = &GroupDetail{Base: "cycle", Round: 1}
	grouped := newRow("cycle-1-group", "floor", "fast", 32, measurement{summary: summary{ops: 4}, elapsed: time.Second})
	grouped.Group = &GroupDetail{Base: "cycle", Groups: 1, Round: 1}
	rep := &Report{Rows: []Row{newRow("cycle", "floor", "fast", 32, m), plain, grouped}}
	compareGroups(rep.Rows)
	var b strings.Builder
	writeMarkdown(&b, rep)
	got := b.String()
	if !strings.Contains(got, "| cycle | floor |") || strings.Contains(got, "| cycle-1-group |") || strings.Contains(got, "| cycle-ungrouped |") {
		t.Errorf("the results table should have the cycle row and none of the group phase's:\n%s", got)
	}
	if !strings.Contains(got, "of 1 alternated rounds: `cycle-1-group` floor 0.40 [0.40–0.40].") {
		t.Errorf("the results lack the groups' ratio:\n%s", got)
	}
}

// TestBatchStatuses reads the statuses of a batch's answer as the server
// writes it, where a lease and a problem carry a status of their own.
func TestBatchStatuses(t *testing.T) {
	held := &api.Problem{Status: 409, Code: api.CodeLeaseHeld, Lease: &api.Lease{JobID: "b", Owner: "o"}}
	answer := api.BatchResponse{Results: []api.BatchResult{
		{JobID: `a"{[`, Status: 200, Lease: &api.Lease{JobID: "a", Owner: "o", Token: 1}},
		{JobID: "b", Status: 409, Problem: held},
		{JobID: "c", Status: 503, Problem: &api.Problem{Status: 503, Code: api.CodeUnavailable}},
	}}.AppendJSON(nil)
	got, _, err := batchStatuses(answer)
	if err != nil || !slices.Equal(got, []int{200, 409, 503}) {
		t.Errorf("batchStatuses(%s) = %v, %v; want [200 409 503]", answer, got, err)
	}
	if _, _, err := batchStatuses(answer[:len(answer)-2]); err == nil {
		t.Error("batchStatuses of a cut answer: no error")
	}
}
