package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is the JSON results file.
type Report struct {
	Command     string   `json:"command"`
	Started     string   `json:"started"`
	Finished    string   `json:"finished"`
	LoadBefore  string   `json:"loadAverageBefore"`
	LoadAfter   string   `json:"loadAverageAfter"`
	GoVersion   string   `json:"goVersion"`
	Postgres    string   `json:"postgres"`
	CPUs        int      `json:"cpus"`
	Quick       bool     `json:"quick"`
	Concurrency int      `json:"concurrency"`
	LogLevel    string   `json:"leaseapiLogLevel"`
	ServerEnv   []string `json:"leaseapiExtraEnv,omitempty"`
	Rows        []Row    `json:"rows"`
	Targets     []Target `json:"targets"`
	// Lock is the lock scenario: leaseapi against etcd and Redis.
	Lock *LockReport `json:"lock,omitempty"`
	// Bugs are invariant violations the benchmark saw (wrong grant counts).
	Bugs []string `json:"bugs,omitempty"`
}

// Row is one measured run: a scenario on the floor or over HTTP.
type Row struct {
	Scenario    string  `json:"scenario"`
	Mode        string  `json:"mode"`    // floor or http
	Acquire     string  `json:"acquire"` // fast or naive
	Concurrency int     `json:"concurrency"`
	Ops         int64   `json:"ops"`
	Seconds     float64 `json:"seconds"`
	OpsPerSec   float64 `json:"opsPerSec"`
	P50Ms       float64 `json:"p50Ms"`
	P99Ms       float64 `json:"p99Ms"`
	MaxMs       float64 `json:"maxMs"`
	// RatioToFloor is ops/s over HTTP divided by ops/s on the floor.
	RatioToFloor *float64 `json:"ratioToFloor,omitempty"`
	PeakRSSMiB   *float64 `json:"peakRssMiB,omitempty"`
	CPUSeconds   *float64 `json:"cpuSeconds,omitempty"`
	// TotalSeconds is the herd's time until its last answer.
	TotalSeconds *float64 `json:"totalSeconds,omitempty"`
	// DBCalls are the transactions the benchmark database counted during
	// the run (xact_commit + xact_rollback). lib/pq runs a statement with
	// arguments as an unnamed prepared statement in two protocol round trips,
	// each ending in Sync, so every statement counts twice. XIDs are the
	// transaction ids the whole cluster assigned meanwhile (writes; refusals
	// on the fast path assign none).
	DBCalls *int64 `json:"dbCalls,omitempty"`
	XIDs    *int64 `json:"xids,omitempty"`
	// Sessions are the database sessions opened during the run.
	Sessions   *int64 `json:"sessions,omitempty"`
	Grants     int64  `json:"grants"`
	Errors     int64  `json:"errors"`
	Status5xx  int64  `json:"status5xx"`
	FirstError string `json:"firstError,omitempty"`
	Note       string `json:"note,omitempty"`
	// Sweep is the sweep scenario's own measurements.
	Sweep *SweepDetail `json:"sweep,omitempty"`
	// Console is the console scenario's own measurements.
	Console *ConsoleDetail `json:"console,omitempty"`
	// Group places a row of the group phase.
	Group *GroupDetail `json:"group,omitempty"`
	// Policy places a row of the policy phase.
	Policy *PolicyDetail `json:"policy,omitempty"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func ptr(f float64) *float64 { return &f }

func newRow(scenario, mode, acquire string, concurrency int, r measurement) Row {
	row := Row{
		Scenario:    scenario,
		Mode:        mode,
		Acquire:     acquire,
		Concurrency: concurrency,
		Ops:         r.ops,
		Seconds:     r.elapsed.Seconds(),
		OpsPerSec:   r.opsPerSec(),
		P50Ms:       ms(r.p50),
		P99Ms:       ms(r.p99),
		MaxMs:       ms(r.max),
		Grants:      r.grants,
		Errors:      r.errors,
		Status5xx:   r.status5xx,
	}
	if r.firstErr != nil {
		row.FirstError = r.firstErr.Error()
	}
	if r.dbCalls >= 0 && (r.dbCalls > 0 || r.xids > 0) {
		row.DBCalls, row.XIDs, row.Sessions = &r.dbCalls, &r.xids, &r.sessions
	}
	return row
}

func (r Row) withProc(p procStats) Row {
	r.PeakRSSMiB = ptr(float64(p.peakRSSBytes) / (1 << 20))
	r.CPUSeconds = ptr(p.cpu.Seconds())
	return r
}

func (r Row) vs(floor Row) Row {
	if floor.OpsPerSec > 0 {
		r.RatioToFloor = ptr(r.OpsPerSec / floor.OpsPerSec)
	}
	return r
}

func (r Row) herd() Row {
	r.TotalSeconds = ptr(r.Seconds)
	return r
}

func (r Row) brief() string {
	s := fmt.Sprintf("%s %s %s: %.0f ops/s p50 %.2fms p99 %.2fms max %.1fms grants %d errors %d 5xx %d",
		r.Scenario, r.Mode, r.Acquire, r.OpsPerSec, r.P50Ms, r.P99Ms, r.MaxMs, r.Grants, r.Errors, r.Status5xx)
	if r.FirstError != "" {
		s += " first error: " + r.FirstError
	}
	return s
}

func opt(f *float64, format string) string {
	if f == nil {
		return "-"
	}
	return fmt.Sprintf(format, *f)
}

func optInt(n *int64) string {
	if n == nil {
		return "-"
	}
	return fmt.Sprint(*n)
}

// tableHeader and tableRow are the columns of the printed and Markdown tables.
var tableHeader = []string{"scenario", "mode", "acquire", "C", "ops", "ops/s", "p50 ms", "p99 ms", "max ms",
	"http/floor", "RSS MiB", "CPU s", "total s", "grants", "5xx", "db xacts", "xids", "sessions"}

func tableRow(r Row) []string {
	grants := "-"
	if r.TotalSeconds != nil {
		grants = fmt.Sprint(r.Grants)
	}
	c := fmt.Sprint(r.Concurrency)
	if r.Concurrency == 0 {
		c = "open"
	}
	return []string{r.Scenario, r.Mode, r.Acquire, c, fmt.Sprint(r.Ops), fmt.Sprintf("%.0f", r.OpsPerSec),
		fmt.Sprintf("%.2f", r.P50Ms), fmt.Sprintf("%.2f", r.P99Ms), fmt.Sprintf("%.1f", r.MaxMs),
		opt(r.RatioToFloor, "%.2f"), opt(r.PeakRSSMiB, "%.1f"), opt(r.CPUSeconds, "%.2f"), opt(r.TotalSeconds, "%.2f"),
		grants, fmt.Sprint(r.Status5xx), optInt(r.DBCalls), optInt(r.XIDs), optInt(r.Sessions)}
}

func printTable(w io.Writer, rep *Report) {
	fmt.Fprintf(w, "\nleasebench  %s  go %s  postgres %s  %d CPUs  load average %s (before) %s (after)\n\n",
		rep.Started, rep.GoVersion, rep.Postgres, rep.CPUs, rep.LoadBefore, rep.LoadAfter)
	if len(rep.Rows) > 0 { // none with -only lock
		printTabbed(w, tableHeader, rep.Rows, tableRow)
	}
	if sweeps := sweepRows(rep); len(sweeps) > 0 {
		fmt.Fprintln(w, "\nsweep passes:")
		tw := tabwriter.NewWriter(w, 1, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, strings.Join(sweepHeader, "\t")+"\t")
		for _, r := range sweeps {
			fmt.Fprintln(tw, strings.Join(sweepTableRow(r), "\t")+"\t")
		}
		tw.Flush()
		for _, r := range sweeps {
			fmt.Fprintf(w, "%s, due-jobs read before the pass:\n    %s\n", r.Scenario, strings.Join(planSummary(r.Sweep.ExplainDue), "\n    "))
			fmt.Fprintf(w, "%s, due-jobs read after it (idle):\n    %s\n", r.Scenario, strings.Join(planSummary(r.Sweep.ExplainIdle), "\n    "))
		}
	}
	printGroups(w, rep)
	printPolicies(w, rep)
	printLock(w, rep)
	for _, r := range rep.Rows {
		if r.Errors > 0 {
			fmt.Fprintf(w, "errors: %s %s %s: %d (first: %s)\n", r.Scenario, r.Mode, r.Acquire, r.Errors, r.FirstError)
		}
	}
	fmt.Fprintln(w, "\ntargets:")
	for _, t := range rep.Targets {
		fmt.Fprintf(w, "  %-7s %s: %s\n", t.status(), t.Name, t.Detail)
	}
	for _, bug := range rep.Bugs {
		fmt.Fprintf(w, "BUG: %s\n", bug)
	}
}

func writeJSON(path string, rep *Report) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// The results section of the doc page lies between these markers.
const (
	docBegin = "<!-- leasebench:begin -->"
	docEnd   = "<!-- leasebench:end -->"
)

// updateDoc replaces the results section of the Markdown page at path.
func updateDoc(path string, rep *Report) error {
	page, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i := bytes.Index(page, []byte(docBegin))
	j := bytes.Index(page, []byte(docEnd))
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s … %s section", path, docBegin, docEnd)
	}
	var out bytes.Buffer
	out.Write(page[:i+len(docBegin)])
	out.WriteString("\n")
	writeMarkdown(&out, rep)
	out.Write(page[j:])
	return os.WriteFile(path, out.Bytes(), 0o644)
}

func writeMarkdown(w io.Writer, rep *Report) {
	fmt.Fprintf(w, "Run %s with `%s`: Go %s, PostgreSQL %s, %d CPUs, load average %s before and %s after "+
		"(1, 5, 15 min); leaseapi log level `%s`.\n\n",
		rep.Started, rep.Command, rep.GoVersion, rep.Postgres, rep.CPUs, rep.LoadBefore, rep.LoadAfter, rep.LogLevel)
	// The group and policy phases' rows, one per round, are summed up by
	// writeGroupsMarkdown and writePoliciesMarkdown; the JSON keeps them.
	rows := slices.DeleteFunc(slices.Clone(rep.Rows), func(r Row) bool { return r.Group != nil || r.Policy != nil })
	if len(rows) > 0 { // none with -only lock, group or policy
		markdownTable(w, tableHeader, rows, tableRow)
	}
	if sweeps := sweepRows(rep); len(sweeps) > 0 {
		fmt.Fprintf(w, "\nSweep passes (rows read: leases and runs rows fetched through an index or read sequentially; "+
			"ticks/s: ticks decided over the pass's wall time; idle pass: the median and the largest of %d SweepTicks calls on one store with nothing due, "+
			"idle rows read: one more on a new store):\n\n| %s |\n|%s\n",
			idlePasses, strings.Join(sweepHeader, " | "), strings.Repeat("---|", len(sweepHeader)))
		for _, r := range sweeps {
			fmt.Fprintf(w, "| %s |\n", strings.Join(sweepTableRow(r), " | "))
		}
		for _, r := range sweeps {
			fmt.Fprintf(w, "\n`%s`, EXPLAIN (ANALYZE, BUFFERS) of the due-jobs read (limit %d) before the pass, then after it:\n\n```\n%s\n---\n%s\n```\n",
				r.Scenario, r.Sweep.Batch+1, strings.Join(planSummary(r.Sweep.ExplainDue), "\n"), strings.Join(planSummary(r.Sweep.ExplainIdle), "\n"))
		}
	}
	writeGroupsMarkdown(w, rep)
	writePoliciesMarkdown(w, rep)
	writeLockMarkdown(w, rep)
	fmt.Fprintln(w, "\n| target | status | measured |\n|---|---|---|")
	for _, t := range rep.Targets {
		fmt.Fprintf(w, "| %s | %s | %s |\n", t.Name, t.status(), t.Detail)
	}
	for _, bug := range rep.Bugs {
		fmt.Fprintf(w, "\n**Bug:** %s\n", bug)
	}
}

// sweepRows are the rows of the sweep scenario.
func sweepRows(rep *Report) []Row {
	var out []Row
	for _, r := range rep.Rows {
		if r.Sweep != nil {
			out = append(out, r)
		}
	}
	return out
}

// sweepHeader and sweepTableRow are the columns of the sweep passes' table.
var sweepHeader = []string{"scenario", "jobs", "due", "seed s", "batch", "pass s", "batches", "ticks/s", "missed", "unclaimed",
	"owed catch-up", "rows read", "leases read", "decide_at idx entries", "runs read", "seq scans", "leases upd", "runs ins",
	"idle pass ms (median)", "idle max ms", "idle rows read"}

func sweepTableRow(r Row) []string {
	d := r.Sweep
	idleMax := 0.0
	if len(d.IdleMs) > 0 {
		idleMax = slices.Max(d.IdleMs)
	}
	return []string{r.Scenario, fmt.Sprint(d.ScheduledJobs), fmt.Sprint(d.DueJobs), fmt.Sprintf("%.1f", d.SeedSeconds),
		fmt.Sprint(d.Batch), fmt.Sprintf("%.3f", r.Seconds), fmt.Sprint(d.Batches), fmt.Sprintf("%.0f", d.TicksPerSecond),
		fmt.Sprint(d.Missed), fmt.Sprint(d.Unclaimed), fmt.Sprint(d.OwedCatchUp),
		fmt.Sprint(d.Pass.rowsRead()), fmt.Sprint(d.Pass.Leases.rowsRead()), fmt.Sprint(d.Pass.DecideAtIdx.IdxTupFetch),
		fmt.Sprint(d.Pass.Runs.rowsRead()), fmt.Sprint(d.Pass.seqScans()), fmt.Sprint(d.Pass.Leases.Updated),
		fmt.Sprint(d.Pass.Runs.Inserted), fmt.Sprintf("%.1f", d.idleMedianMs()), fmt.Sprintf("%.1f", idleMax), fmt.Sprint(d.Idle.rowsRead())}
}
