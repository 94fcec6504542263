package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leaseapi/leaseapi/repo/postgres"
)

// bench is one benchmark run.
type bench struct {
	opts   options
	log    io.Writer
	db     *benchDB
	bin    string
	tmp    string
	report *Report
	seq    int // numbers the server processes, for their log files
}

// phaseNames are the phases of a run, in order.
var phaseNames = []string{"calibrate", "cycle", "contended", "herd", "batch", "group", "policy", "latency", "list", "sweep", "lock", "console"}

// phase is one phase of a run.
type phase struct {
	name string
	fn   func(context.Context) error
}

// phases are the phases of a run, in the order of phaseNames.
func (b *bench) phases() []phase {
	return []phase{
		{"calibrate", b.calibrate},
		{"cycle", b.cycle},
		{"contended", b.contended},
		{"herd", b.herds},
		{"batch", b.batches},
		{"group", b.groups},
		{"policy", b.policies},
		{"latency", b.latency},
		{"list", b.list},
		{"sweep", b.sweeps},
		{"lock", b.lock},
		{"console", b.console},
	}
}

// postgresMaxOpenConns is the floor's pool: the same as leaseapi's own
// (cmd/leaseapi), so both sides get the same number of connections.
const postgresMaxOpenConns = 20

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.log, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func (b *bench) run(ctx context.Context) (_ *Report, err error) {
	o := b.opts
	b.report = &Report{
		Command:     o.command,
		Started:     time.Now().UTC().Format(time.RFC3339),
		LoadBefore:  loadAverage(),
		GoVersion:   runtime.Version(),
		CPUs:        runtime.NumCPU(),
		Quick:       o.quick,
		Concurrency: o.concurrency,
		LogLevel:    o.logLevel,
		ServerEnv:   o.serverEnv,
	}
	b.tmp, err = os.MkdirTemp("", "leasebench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(b.tmp)

	if b.bin = o.leaseapiBin; b.bin == "" {
		b.logf("building cmd/leaseapi")
		if b.bin, err = buildLeaseapi(ctx, b.tmp); err != nil {
			return nil, err
		}
	}
	b.db, err = createDatabase(ctx, o.dsn, "")
	if err != nil {
		return nil, err
	}
	defer func() {
		if derr := b.db.drop(); derr != nil {
			err = errors.Join(err, derr)
		}
	}()
	b.logf("database %s", b.db.name)
	if err := b.db.db.QueryRowContext(ctx, `SELECT current_setting('server_version')`).Scan(&b.report.Postgres); err != nil {
		return nil, fmt.Errorf("server version: %w", err)
	}
	if err := b.migrate(ctx); err != nil {
		return nil, err
	}

	for _, p := range b.phases() {
		if len(o.only) > 0 && !slices.Contains(o.only, p.name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return b.finish(), err
		}
		if err := p.fn(ctx); err != nil {
			return b.finish(), fmt.Errorf("%s: %w", p.name, err)
		}
		if err := b.db.vacuum(ctx); err != nil {
			return b.finish(), err
		}
	}
	return b.finish(), nil
}

func (b *bench) finish() *Report {
	b.report.LoadAfter = loadAverage()
	b.report.Finished = time.Now().UTC().Format(time.RFC3339)
	b.report.Targets = evaluateTargets(b.report, b.opts)
	return b.report
}

func (b *bench) migrate(ctx context.Context) error {
	store, err := postgres.Open(ctx, postgres.Config{DSN: b.db.dsn})
	if err != nil {
		return err
	}
	defer store.Close()
	return store.Migrate(ctx)
}

// floor runs fn on a store opened for it (the fast acquire statement unless
// naive), with leaseapi's pool size.
func (b *bench) floor(ctx context.Context, naive bool, fn func(c client) (measurement, error)) (measurement, error) {
	store, err := openFloor(ctx, postgres.Config{DSN: b.db.dsn, MaxOpenConns: postgresMaxOpenConns}, naive)
	if err != nil {
		return measurement{}, err
	}
	c := storeClient{store: store}
	warm(ctx, c)
	// The warm-up's sessions stay open; the counters see them at the end.
	before, err := b.db.counters(ctx, false)
	if err != nil {
		return measurement{}, errors.Join(err, store.Close())
	}
	r, err := fn(c)
	if err := errors.Join(err, store.Close()); err != nil {
		return measurement{}, err
	}
	return b.countDB(ctx, r, before)
}

// countDB adds the database's counters since before to r.
func (b *bench) countDB(ctx context.Context, r measurement, before dbCounters) (measurement, error) {
	after, err := b.db.counters(ctx, true)
	if err != nil {
		return r, err
	}
	// The counters query itself is one transaction of the benchmark's own.
	r.dbCalls = after.xacts - before.xacts - 1
	r.xids = after.nextXid - before.nextXid
	r.sessions = after.sessions - before.sessions
	return r, nil
}

// serverRun is a measured run of a leaseapi process.
type serverRun struct {
	measurement
	proc procStats
}

// http runs fn against a new leaseapi process in acquire mode mode, and
// reads the process's peak RSS and CPU time at the end.
func (b *bench) http(ctx context.Context, scenario, mode string, clients int, fn func(c client) (measurement, error)) (serverRun, error) {
	b.seq++
	srv, err := startServer(ctx, serverConfig{
		bin:         b.bin,
		dsn:         b.db.dsn,
		acquireMode: mode,
		logLevel:    b.opts.logLevel,
		logDir:      b.tmp,
		name:        fmt.Sprintf("%02d-%s-%s", b.seq, scenario, mode),
		extraEnv:    b.opts.serverEnv,
	})
	if err != nil {
		return serverRun{}, err
	}
	return b.measureServer(ctx, srv, clients, fn)
}

// measureServer runs fn against srv and stops srv.
func (b *bench) measureServer(ctx context.Context, srv *server, clients int, fn func(c client) (measurement, error)) (serverRun, error) {
	c := newHTTPClient(srv.url, max(clients, 100)+16)
	warm(ctx, c)
	before, err := srv.stats()
	if err != nil {
		return serverRun{}, errors.Join(err, srv.stop())
	}
	counters, err := b.counters(ctx, srv)
	if err != nil {
		return serverRun{}, errors.Join(err, srv.stop())
	}
	stopPerf := b.startPerf(srv)
	r, ferr := fn(c)
	stopPerf()
	after, serr := srv.stats()
	c.close()
	if err := errors.Join(ferr, serr, srv.stop()); err != nil {
		return serverRun{}, err
	}
	if counters != nil {
		if r, err = b.countDB(ctx, r, *counters); err != nil {
			return serverRun{}, err
		}
	}
	return serverRun{measurement: r, proc: procStats{peakRSSBytes: after.peakRSSBytes, cpu: after.cpu - before.cpu}}, nil
}

// counters reads the database counters before a run of a leaseapi
// process; the calibration server has no database.
func (b *bench) counters(ctx context.Context, srv *server) (*dbCounters, error) {
	if srv.noDB {
		return nil, nil
	}
	c, err := b.db.counters(ctx, false)
	return &c, err
}

// startPerf starts `perf record` on the server when -perf is set, and
// returns the function that stops it.
func (b *bench) startPerf(srv *server) func() {
	if b.opts.perfDir == "" {
		return func() {}
	}
	if err := os.MkdirAll(b.opts.perfDir, 0o755); err != nil {
		b.logf("perf: %v", err)
		return func() {}
	}
	out := filepath.Join(b.opts.perfDir, filepath.Base(srv.logPath[:len(srv.logPath)-len(".log")])+".perf.data")
	cmd := exec.Command("perf", "record", "-F", "499", "-g", "-p", strconv.Itoa(srv.cmd.Process.Pid), "-o", out)
	if err := cmd.Start(); err != nil {
		b.logf("perf: %v", err)
		return func() {}
	}
	return func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		b.logf("  perf profile: %s", out)
	}
}

// warm opens the connections a run will use, so that no run pays for
// dialing: a burst of one-lease list calls.
func warm(ctx context.Context, c client) {
	done := make(chan struct{}, postgresMaxOpenConns)
	for range postgresMaxOpenConns {
		go func() {
			_, _, _ = c.list(ctx, "", 1, false)
			done <- struct{}{}
		}()
	}
	for range postgresMaxOpenConns {
		<-done
	}
}

func (b *bench) closed(body func(c client, prefix string) func(context.Context, int, int, *meter), prefix string) func(ctx context.Context) func(c client) (measurement, error) {
	return func(ctx context.Context) func(c client) (measurement, error) {
		return func(c client) (measurement, error) {
			return closedLoop(ctx, b.opts.concurrency, b.opts.warmup, b.opts.duration, body(c, prefix)), nil
		}
	}
}

// pair measures one closed-loop scenario on the floor and over HTTP and
// adds both rows.
func (b *bench) pair(ctx context.Context, scenario string, body func(c client, prefix string) func(context.Context, int, int, *meter)) (Row, Row, error) {
	b.logf("%s: floor", scenario)
	fr, err := b.floor(ctx, false, b.closed(body, scenario+"-floor")(ctx))
	if err != nil {
		return Row{}, Row{}, err
	}
	floor := b.add(newRow(scenario, "floor", "fast", b.opts.concurrency, fr))
	b.logf("%s: http", scenario)
	hr, err := b.http(ctx, scenario, "fast", b.opts.concurrency, b.closed(body, scenario+"-http")(ctx))
	if err != nil {
		return Row{}, Row{}, err
	}
	h := newRow(scenario, "http", "fast", b.opts.concurrency, hr.measurement).withProc(hr.proc).vs(floor)
	return floor, b.add(h), nil
}

func (b *bench) add(r Row) Row {
	b.report.Rows = append(b.report.Rows, r)
	b.logf("  %s", r.brief())
	return r
}

// calibrate measures the ceiling of HTTP on this machine with this load
// generator: a trivial Go handler in a process of its own answering the
// herd's acquires with a canned 409 at the herd's concurrency.
func (b *bench) calibrate(ctx context.Context) error {
	b.logf("calibrate: trivial handler")
	srv, err := startNoop(ctx, b.tmp)
	if err != nil {
		return err
	}
	o := b.opts
	tick := time.Now().UTC().Truncate(time.Minute)
	hr, err := b.measureServer(ctx, srv, o.herdReplicas, func(c client) (measurement, error) {
		return closedLoop(ctx, o.herdReplicas, o.warmup, o.duration, func(ctx context.Context, w, i int, m *meter) {
			t0 := time.Now()
			_, r, err := c.acquire(ctx, fmt.Sprintf("herd-%04d", i%1000), fmt.Sprintf("replica-%03d", w), &tick, benchTTL)
			if r == resultConflict {
				r = resultOK // the canned answer
			}
			m.observe(t0, r, err)
		}), nil
	})
	if err != nil {
		return err
	}
	row := newRow("calibration", "trivial", "-", o.herdReplicas, hr.measurement).withProc(hr.proc)
	row.Note = "a trivial Go net/http handler (no database) answering the herd's acquire with a canned 409: the HTTP ceiling of this machine with this load generator"
	b.add(row)
	return nil
}

func (b *bench) cycle(ctx context.Context) error {
	_, _, err := b.pair(ctx, "cycle", cycleBody)
	return err
}

func (b *bench) contended(ctx context.Context) error {
	_, _, err := b.pair(ctx, "contended", contendedBody)
	return err
}

// herds runs the herd with the fast path in both orders and with the naive
// path, each on the floor and over HTTP, on jobs of its own.
func (b *bench) herds(ctx context.Context) error {
	o := b.opts
	type variant struct {
		mode  string
		order herdOrder
	}
	variants := []variant{{"fast", herdSameOrder}}
	if o.herdNaive {
		variants = append(variants, variant{"naive", herdSameOrder})
	}
	if o.herdShuffled {
		variants = slices.Insert(variants, 1, variant{"fast", herdShuffled})
	}
	for _, h := range variants {
		scenario := "herd"
		if h.order == herdShuffled {
			scenario = "herd-shuffled"
		}
		naive := h.mode == "naive"
		body := func(side string) func(c client) (measurement, error) {
			return func(c client) (measurement, error) {
				prefix := fmt.Sprintf("%s-%s-%s", scenario, h.mode, side)
				r := herd(ctx, c, prefix, o.herdReplicas, o.herdJobs, h.order)
				return r, b.checkHerd(ctx, fmt.Sprintf("%s %s %s", scenario, h.mode, side), prefix, o.herdJobs, r)
			}
		}
		b.logf("%s (%s): floor, %d replicas × %d jobs", scenario, h.mode, o.herdReplicas, o.herdJobs)
		fr, err := b.floor(ctx, naive, body("floor"))
		if err != nil {
			return err
		}
		floor := b.add(newRow(scenario, "floor", h.mode, o.herdReplicas, fr).herd())
		b.logf("%s (%s): http", scenario, h.mode)
		hr, err := b.http(ctx, scenario, h.mode, o.herdReplicas, body("http"))
		if err != nil {
			return err
		}
		b.add(newRow(scenario, "http", h.mode, o.herdReplicas, hr.measurement).herd().withProc(hr.proc).vs(floor))
		if err := b.db.vacuum(ctx); err != nil {
			return err
		}
	}
	return nil
}

// checkHerd checks the herd of prefix on herdJobs jobs, the run r, in the
// database: one row, one grant and one run per job, and as many grants
// answered. A violation is added to the report's bugs under label.
func (b *bench) checkHerd(ctx context.Context, label, prefix string, herdJobs int, r measurement) error {
	return b.checkHerdTicks(ctx, label, prefix, herdJobs, 1, r)
}

// checkHerdTicks is checkHerd for jobs that were granted ticks times, the
// herd's grant the last: each job's token is ticks and it has ticks runs.
func (b *bench) checkHerdTicks(ctx context.Context, label, prefix string, herdJobs, ticks int, r measurement) error {
	jobs := int64(herdJobs)
	check, err := b.db.checkHerd(ctx, prefix)
	if err != nil {
		return err
	}
	check.tokens /= int64(ticks)
	check.runs /= int64(ticks)
	// Fewer grants answered than made is not a bug when some answers were
	// 503: their outcome is unknown by contract.
	answered := r.grants == jobs || (r.grants < jobs && r.status5xx > 0)
	if check.jobs != jobs || check.tokens != jobs || check.runs != jobs || !answered {
		b.report.Bugs = append(b.report.Bugs, fmt.Sprintf(
			"%s: %d grants answered, database has %d jobs, token sum %d, %d runs; want %d of each",
			label, r.grants, check.jobs, check.tokens, check.runs, jobs))
	}
	return nil
}

// latency measures p99 acquire latency over HTTP in an open loop at half
// the saturation rate: the cycles per second of the closed-loop cycle run.
func (b *bench) latency(ctx context.Context) error {
	i := slices.IndexFunc(b.report.Rows, func(r Row) bool { return r.Scenario == "cycle" && r.Mode == "http" })
	if i < 0 || b.report.Rows[i].Grants == 0 {
		return errors.New("no cycle saturation measured")
	}
	sat := b.report.Rows[i]
	cyclesPerSec := float64(sat.Grants) / sat.Seconds
	rate := cyclesPerSec / 2
	b.logf("latency: open loop at %.0f cycles/s (half of %.0f), %s", rate, cyclesPerSec, b.opts.openDuration)
	hr, err := b.http(ctx, "latency", "fast", 256, func(c client) (measurement, error) {
		return openLoop(ctx, c, "open", rate, b.opts.openDuration), nil
	})
	if err != nil {
		return err
	}
	row := newRow("acquire@half-saturation", "http", "fast", 0, hr.measurement).withProc(hr.proc)
	row.OpsPerSec = rate // the offered rate of cycles, one acquire each
	row.Note = fmt.Sprintf("open loop, %.0f acquires/s offered = half of the %.0f cycles/s saturation of cycle/http; latency of the acquires only", rate, cyclesPerSec)
	b.add(row)
	return nil
}

// list seeds the table to each size in turn and reads a first and a deep
// page on the floor and over HTTP; at -rss-leases it runs the RSS check.
func (b *bench) list(ctx context.Context) error {
	o := b.opts
	if err := b.db.truncate(ctx); err != nil {
		return err
	}
	sizes := slices.Clone(o.listSizes)
	if !slices.Contains(sizes, o.rssLeases) {
		sizes = append(sizes, o.rssLeases)
	}
	slices.Sort(sizes)
	have := 0
	for _, n := range sizes {
		b.logf("list: seeding %d leases", n)
		t0 := time.Now()
		if err := b.db.seedLeases(ctx, have, n); err != nil {
			return err
		}
		b.logf("  seeded in %s", time.Since(t0).Round(time.Millisecond))
		have = n
		if slices.Contains(o.listSizes, n) {
			for _, page := range []struct {
				name  string
				after string
			}{{"first", ""}, {"deep", listJobID(n / 2)}} {
				scenario := fmt.Sprintf("list-%s-%s", sizeName(n), page.name)
				body := func(c client) (measurement, error) {
					return closedLoop(ctx, o.concurrency, o.warmup, o.listDuration, listBody(c, page.after, 100)), nil
				}
				fr, err := b.floor(ctx, false, body)
				if err != nil {
					return err
				}
				floor := b.add(newRow(scenario, "floor", "fast", o.concurrency, fr))
				hr, err := b.http(ctx, scenario, "fast", o.concurrency, body)
				if err != nil {
					return err
				}
				b.add(newRow(scenario, "http", "fast", o.concurrency, hr.measurement).withProc(hr.proc).vs(floor))
			}
		}
		if n == o.rssLeases {
			b.logf("rss: %d clients, %d leases", o.rssClients, n)
			hr, err := b.http(ctx, "rss", "fast", o.rssClients, func(c client) (measurement, error) {
				return rssLoad(ctx, c, o.rssClients, o.warmup, o.duration), nil
			})
			if err != nil {
				return err
			}
			row := newRow(fmt.Sprintf("rss-%s-leases", sizeName(n)), "http", "fast", o.rssClients, hr.measurement).withProc(hr.proc)
			row.Note = "9 in 10 clients cycle on jobs of their own, 1 in 10 pages through GET /leases (limit 100)"
			b.add(row)
		}
	}
	return nil
}

// sizeName is 1k, 100k, 1M, or the number.
func sizeName(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// loadAverage is the first line of /proc/loadavg without the pid field.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
