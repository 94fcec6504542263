package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// The lock scenario compares leaseapi with the lock services users weigh
// it against, etcd and Redis, in one run: C clients, each on a lock of its
// own, acquire then release in a loop; every system durable on disk. The
// rounds interleave the systems (leaseapi, etcd, redis, leaseapi, …), each
// row on a fresh server. The peers' clients are the official ones, run by
// the program in bench/peers (a module of its own, so that leaseapi's
// go.mod does not carry the etcd, gRPC and Redis clients); leasebench
// starts it, reads the window it measures, and reads the servers' CPU
// time from /proc at the window's two ends.

// lockSystems are the systems of a round, in order. After the rounds come
// as many rows of leaseapi-replicated: leaseapi with
// LEASEAPI_DURABILITY=replicated on a primary with one synchronous standby
// (see replicatedPair), what replication costs. They run apart, on a pair
// started after the rounds, so that the other rows are measured as they
// always were: the pair's writes share the disk.
var lockSystems = []string{"leaseapi", "etcd", "redis"}

// replicatedSystem is the name of the replicated rows.
const replicatedSystem = "leaseapi-replicated"

// LockReport is the lock scenario's part of the results.
type LockReport struct {
	Clients         int     `json:"clients"`
	DurationSeconds float64 `json:"durationSeconds"`
	Rounds          int     `json:"rounds"`
	// Durability is the durability settings in force, per system, as read
	// from the servers (Postgres: SHOW; Redis: CONFIG GET).
	Durability map[string]string `json:"durability"`
	Versions   map[string]string `json:"versions"`
	// ReplicatedSkipped says why there is no leaseapi-replicated row.
	ReplicatedSkipped string        `json:"replicatedSkipped,omitempty"`
	Rows              []LockRow     `json:"rows"`
	Summary           []LockSummary `json:"summary"`
}

// LockRow is one system in one round.
type LockRow struct {
	Round        int     `json:"round"`
	System       string  `json:"system"`
	Cycles       int64   `json:"cycles"`
	Seconds      float64 `json:"seconds"`
	CyclesPerSec float64 `json:"cyclesPerSec"`
	P50Ms        float64 `json:"p50Ms"`
	P99Ms        float64 `json:"p99Ms"`
	MaxMs        float64 `json:"maxMs"`
	Errors       int64   `json:"errors"`
	FirstError   string  `json:"firstError,omitempty"`
	// ServerCPUSeconds is the server process's utime+stime during the
	// measured window: leaseapi's, etcd's or redis-server's.
	ServerCPUSeconds float64 `json:"serverCpuSeconds"`
	PeakRSSMiB       float64 `json:"serverPeakRssMiB"`
	// PostgresCPUSeconds (leaseapi only) is the Postgres processes' CPU
	// that serves this benchmark: the backends connected to its database
	// and the cluster's background processes (WAL writer, checkpointer, …).
	// PostgresClusterCPUSeconds is every child of the postmaster, reaped
	// ones included: other databases' load on the shared cluster too.
	PostgresCPUSeconds        *float64 `json:"postgresCpuSeconds,omitempty"`
	PostgresClusterCPUSeconds *float64 `json:"postgresClusterCpuSeconds,omitempty"`
}

// LockSummary is one system over the rounds.
type LockSummary struct {
	System string `json:"system"`
	// Cycles/s: the median and the range of the rounds.
	CyclesPerSecMedian float64 `json:"cyclesPerSecMedian"`
	CyclesPerSecMin    float64 `json:"cyclesPerSecMin"`
	CyclesPerSecMax    float64 `json:"cyclesPerSecMax"`
	// The medians of the rounds' p50 and p99 cycle latencies.
	P50Ms float64 `json:"p50Ms"`
	P99Ms float64 `json:"p99Ms"`
	// CPU per cycle over all rounds (CPU seconds summed / cycles summed).
	ServerMsPerCycle   float64  `json:"serverCpuMsPerCycle"`
	PostgresMsPerCycle *float64 `json:"postgresCpuMsPerCycle,omitempty"`
	Errors             int64    `json:"errors"`
	// LeaseapiRatio is leaseapi's median cycles/s over this system's.
	LeaseapiRatio float64 `json:"leaseapiRatio"`
}

// lock runs the rounds.
func (b *bench) lock(ctx context.Context) error {
	o := b.opts
	durable, err := b.postgresDurability(ctx)
	if err != nil {
		return err
	}
	b.logf("lock: Postgres %s", durable)
	b.logf("lock: building bench/peers")
	peers, err := buildPeers(ctx, b.tmp)
	if err != nil {
		return err
	}
	rep := &LockReport{
		Clients:         o.concurrency,
		DurationSeconds: o.lockDuration.Seconds(),
		Rounds:          o.lockRounds,
		Durability:      map[string]string{"postgres": durable},
		Versions:        map[string]string{"postgres": b.report.Postgres},
	}
	b.report.Lock = rep
	for round := 1; round <= o.lockRounds; round++ {
		for _, system := range lockSystems {
			b.logf("lock: round %d/%d, %s, %d clients, %s", round, o.lockRounds, system, o.concurrency, o.lockDuration)
			// Every row starts from the same state of the shared Postgres:
			// nothing an earlier phase or row left to write.
			if err := b.db.checkpoint(ctx); err != nil {
				return err
			}
			var row LockRow
			switch system {
			case "leaseapi":
				row, err = b.lockLeaseapi(ctx, round, system, o.dsn, nil)
			default:
				row, err = b.lockPeer(ctx, peers, system, rep)
			}
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round, system, err)
			}
			row.Round = round
			rep.Rows = append(rep.Rows, row)
			b.logf("  %s", row.brief())
		}
	}
	if err := b.lockReplicated(ctx, rep); err != nil {
		return err
	}
	rep.Summary = summarizeLock(rep.Rows)
	return nil
}

// lockReplicated measures the replicated rows, one per round, on a pair
// started for them, or says in the report why there are none.
func (b *bench) lockReplicated(ctx context.Context, rep *LockReport) error {
	pair, err := startReplicatedPair(ctx)
	if errors.Is(err, errPairUnavailable) {
		rep.ReplicatedSkipped = err.Error()
		b.logf("lock: no %s rows: %v", replicatedSystem, err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("lock: the synchronous pair of the %s rows: %w", replicatedSystem, err)
	}
	defer pair.remove()
	rep.Durability["postgres-pair"] = pair.durability
	rep.Versions["postgres-pair"] = pair.version
	b.logf("lock: synchronous pair up (%s)", pair.durability)
	for round := 1; round <= b.opts.lockRounds; round++ {
		b.logf("lock: round %d/%d, %s, %d clients, %s", round, b.opts.lockRounds, replicatedSystem, b.opts.concurrency, b.opts.lockDuration)
		if err := pair.checkpoint(ctx); err != nil {
			return err
		}
		row, err := b.lockLeaseapi(ctx, round, replicatedSystem, pair.adminDSN, []string{"LEASEAPI_DURABILITY=replicated"})
		if err != nil {
			return fmt.Errorf("round %d, %s: %w", round, replicatedSystem, err)
		}
		row.Round = round
		rep.Rows = append(rep.Rows, row)
		b.logf("  %s", row.brief())
	}
	return nil
}

func (r LockRow) brief() string {
	s := fmt.Sprintf("%s: %.0f cycles/s p50 %.2fms p99 %.2fms, server CPU %.2fs (%.3f ms/cycle)",
		r.System, r.CyclesPerSec, r.P50Ms, r.P99Ms, r.ServerCPUSeconds, perCycle(r.ServerCPUSeconds, r.Cycles))
	if r.PostgresCPUSeconds != nil {
		s += fmt.Sprintf(" + Postgres %.2fs (%.3f ms/cycle; whole cluster %.2fs)", *r.PostgresCPUSeconds,
			perCycle(*r.PostgresCPUSeconds, r.Cycles), *r.PostgresClusterCPUSeconds)
	}
	if r.Errors > 0 {
		s += fmt.Sprintf(", %d errors, first: %s", r.Errors, r.FirstError)
	}
	return s
}

// perCycle is CPU milliseconds per cycle.
func perCycle(cpuSeconds float64, cycles int64) float64 {
	if cycles == 0 {
		return 0
	}
	return 1000 * cpuSeconds / float64(cycles)
}

// postgresDurability reads fsync, synchronous_commit and wal_sync_method
// as leaseapi's sessions on the benchmark database see them, and refuses
// a server that acknowledges commits before they are on disk.
func (b *bench) postgresDurability(ctx context.Context) (string, error) {
	settings := map[string]string{}
	for _, name := range []string{"fsync", "synchronous_commit", "wal_sync_method"} {
		var v string
		if err := b.db.db.QueryRowContext(ctx, "SHOW "+name).Scan(&v); err != nil {
			return "", fmt.Errorf("show %s: %w", name, err)
		}
		settings[name] = v
	}
	s := fmt.Sprintf("fsync %s, synchronous_commit %s, wal_sync_method %s",
		settings["fsync"], settings["synchronous_commit"], settings["wal_sync_method"])
	if settings["fsync"] != "on" || settings["synchronous_commit"] == "off" {
		return s, fmt.Errorf("postgres has %s: its commits are not durable on disk, and the peers' are; "+
			"refusing to compare (turn fsync and synchronous_commit on)", s)
	}
	return s, nil
}

// buildPeers builds the bench/peers program into dir.
func buildPeers(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	bin := filepath.Join(dir, "peers")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, ".")
	cmd.Dir = filepath.Join(root, "bench", "peers")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build bench/peers: %w: %s", err, out)
	}
	return bin, nil
}

// cpuSample is the CPU time of the measured server and of Postgres.
type cpuSample struct {
	server, postgres, cluster time.Duration
	rss                       int64
	err                       error
}

// lockLeaseapi measures one row of leaseapi as system: a fresh process
// (with env added to its settings) on a fresh database of the server
// adminDSN names (as etcd and Redis get a fresh data directory), C clients
// each on a job of its own: acquire with a new tick, then release with
// outcome succeeded.
func (b *bench) lockLeaseapi(ctx context.Context, round int, system, adminDSN string, env []string) (row LockRow, err error) {
	o := b.opts
	b.seq++
	db, err := createDatabase(ctx, adminDSN, fmt.Sprintf("_lock%d", round))
	if err != nil {
		return LockRow{}, err
	}
	defer func() {
		if derr := db.drop(); derr != nil {
			err = errors.Join(err, derr)
		}
	}()
	pg, err := newPostgresCPU(ctx, db)
	if err != nil {
		b.logf("lock: Postgres CPU not measured: %v", err)
		pg = nil
	}
	srv, err := startServer(ctx, serverConfig{
		bin:         b.bin,
		dsn:         db.dsn,
		acquireMode: "fast",
		logLevel:    o.logLevel,
		logDir:      b.tmp,
		name:        fmt.Sprintf("%02d-%s-%d", b.seq, system, round),
		extraEnv:    append(slices.Clone(env), o.serverEnv...),
	})
	if err != nil {
		return LockRow{}, err
	}
	c := newHTTPClient(srv.url, o.concurrency+16)
	warm(ctx, c)
	stopPerf := b.startPerf(srv)
	defer stopPerf()
	sample := func() cpuSample {
		var s cpuSample
		st, err := srv.stats()
		s.server, s.rss = st.cpu, st.peakRSSBytes
		s.err = err
		if pg != nil {
			var perr error
			s.postgres, s.cluster, perr = pg.sample(ctx)
			s.err = errors.Join(s.err, perr)
		}
		return s
	}
	samples := make(chan cpuSample, 1)
	timer := time.AfterFunc(o.warmup, func() { samples <- sample() })
	base := time.Now().UTC().Truncate(time.Minute).Add(-365 * 24 * time.Hour) // ticks of the past: a tick ahead of the clock is refused
	r := closedLoop(ctx, o.concurrency, o.warmup, o.lockDuration, func(ctx context.Context, w, i int, m *meter) {
		job := fmt.Sprintf("lock-%d-%d", round, w)
		owner := fmt.Sprintf("client-%d", w)
		tick := base.Add(time.Duration(i) * time.Second)
		t0 := time.Now()
		token, res, err := c.acquire(ctx, job, owner, &tick, benchTTL)
		if res == resultOK {
			res, err = c.release(ctx, job, owner, token)
		} else if res == resultConflict {
			// A new tick on a job of one's own is always granted.
			res, err = resultFailed, fmt.Errorf("acquire %s tick %s: refused (409)", job, tick.Format(wireTime))
		}
		if res == resultConflict {
			res, err = resultFailed, fmt.Errorf("release %s token %d: refused (409)", job, token)
		}
		m.observe(t0, res, err)
	})
	if timer.Stop() {
		samples <- sample() // the run ended before its window opened
	}
	before := <-samples
	after := sample()
	c.close()
	if err := errors.Join(before.err, after.err, srv.stop()); err != nil {
		return LockRow{}, err
	}
	row = LockRow{
		System:           system,
		Cycles:           r.ops,
		Seconds:          r.elapsed.Seconds(),
		CyclesPerSec:     r.opsPerSec(),
		P50Ms:            ms(r.p50),
		P99Ms:            ms(r.p99),
		MaxMs:            ms(r.max),
		Errors:           r.errors,
		ServerCPUSeconds: (after.server - before.server).Seconds(),
		PeakRSSMiB:       float64(after.rss) / (1 << 20),
	}
	if r.firstErr != nil {
		row.FirstError = r.firstErr.Error()
	}
	if pg != nil {
		row.PostgresCPUSeconds = ptr((after.postgres - before.postgres).Seconds())
		row.PostgresClusterCPUSeconds = ptr((after.cluster - before.cluster).Seconds())
	}
	return row, nil
}

// peerEvent is a line of the bench/peers program (see its main.go).
type peerEvent struct {
	Event  string `json:"event"`
	Server *struct {
		Endpoint   string `json:"endpoint"`
		PID        int    `json:"pid"`
		Version    string `json:"version"`
		Durability string `json:"durability"`
	} `json:"server"`
	Result *struct {
		Cycles       int64   `json:"cycles"`
		Seconds      float64 `json:"seconds"`
		CyclesPerSec float64 `json:"cyclesPerSec"`
		P50Ms        float64 `json:"p50Ms"`
		P99Ms        float64 `json:"p99Ms"`
		MaxMs        float64 `json:"maxMs"`
		Errors       int64   `json:"errors"`
		FirstError   string  `json:"firstError"`
	} `json:"result"`
}

// lockPeer measures one row of etcd or redis: a fresh server started by
// `peers -serve`, the load by `peers -system … -endpoint …`, and the
// server process's CPU time read when the load says its window opens and
// closes.
func (b *bench) lockPeer(ctx context.Context, peers, system string, rep *LockReport) (LockRow, error) {
	o := b.opts
	serve := exec.Command(peers, "-serve", "-system", system)
	serve.Stderr = b.log
	stdin, err := serve.StdinPipe()
	if err != nil {
		return LockRow{}, err
	}
	stdout, err := serve.StdoutPipe()
	if err != nil {
		return LockRow{}, err
	}
	if err := serve.Start(); err != nil {
		return LockRow{}, fmt.Errorf("start peers -serve: %w", err)
	}
	stopServe := func() error {
		stdin.Close() // serve mode stops its server when stdin closes
		done := make(chan error, 1)
		go func() { done <- serve.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("peers -serve -system %s: %w", system, err)
			}
			return nil
		case <-time.After(30 * time.Second):
			_ = serve.Process.Kill()
			return fmt.Errorf("peers -serve -system %s did not stop within 30s; killed", system)
		}
	}
	var serving peerEvent
	if err := json.NewDecoder(stdout).Decode(&serving); err != nil || serving.Event != "serving" || serving.Server == nil {
		return LockRow{}, errors.Join(fmt.Errorf("peers -serve -system %s did not report a server: %v", system, err), stopServe())
	}
	srv := serving.Server
	rep.Durability[system] = srv.Durability
	rep.Versions[system] = srv.Version
	if system == "redis" && !strings.Contains(srv.Durability, `appendfsync "always"`) {
		return LockRow{}, errors.Join(fmt.Errorf("redis has %s, not appendfsync always", srv.Durability), stopServe())
	}

	load := exec.CommandContext(ctx, peers, "-system", system, "-endpoint", srv.Endpoint,
		"-clients", strconv.Itoa(o.concurrency), "-duration", o.lockDuration.String(), "-warmup", o.warmup.String())
	load.Stderr = b.log
	lines, err := load.StdoutPipe()
	if err != nil {
		return LockRow{}, errors.Join(err, stopServe())
	}
	if err := load.Start(); err != nil {
		return LockRow{}, errors.Join(fmt.Errorf("start peers: %w", err), stopServe())
	}
	var before, after procStats
	var row LockRow
	var serr error
	sc := bufio.NewScanner(lines)
	for sc.Scan() {
		var ev peerEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			serr = errors.Join(serr, fmt.Errorf("peers printed %q: %w", sc.Text(), err))
			continue
		}
		switch ev.Event {
		case "measure":
			before, err = readProcStats(srv.PID)
			serr = errors.Join(serr, err)
		case "done":
			after, err = readProcStats(srv.PID)
			serr = errors.Join(serr, err)
		case "result":
			if r := ev.Result; r != nil {
				row = LockRow{System: system, Cycles: r.Cycles, Seconds: r.Seconds, CyclesPerSec: r.CyclesPerSec,
					P50Ms: r.P50Ms, P99Ms: r.P99Ms, MaxMs: r.MaxMs, Errors: r.Errors, FirstError: r.FirstError}
			}
		}
	}
	_, _ = io.Copy(io.Discard, lines)
	werr := load.Wait()
	if err := errors.Join(serr, sc.Err(), werr, stopServe()); err != nil {
		return LockRow{}, err
	}
	if row.System == "" || after.cpu == 0 && before.cpu == 0 {
		return LockRow{}, fmt.Errorf("peers -system %s printed no result or no window", system)
	}
	row.ServerCPUSeconds = (after.cpu - before.cpu).Seconds()
	row.PeakRSSMiB = float64(after.peakRSSBytes) / (1 << 20)
	return row, nil
}

// postgresCPU reads the CPU time of the local Postgres's processes from
// /proc: the postmaster is the parent of the benchmark's own backend.
type postgresCPU struct {
	db         *benchDB
	postmaster int
}

func newPostgresCPU(ctx context.Context, db *benchDB) (*postgresCPU, error) {
	conn, err := db.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var backend int
	if err := conn.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return nil, err
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", backend))
	if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
		return nil, fmt.Errorf("backend pid %d is not a local postgres process (Postgres in another pid namespace or host?)", backend)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", backend))
	if err != nil {
		return nil, err
	}
	f, err := statFields(string(stat))
	if err != nil {
		return nil, err
	}
	ppid, err := strconv.Atoi(f[1]) // field 4
	if err != nil {
		return nil, fmt.Errorf("parse ppid %q: %w", f[1], err)
	}
	return &postgresCPU{db: db, postmaster: ppid}, nil
}

// servingQuery lists the Postgres processes that work for the benchmark:
// the sessions on its database (but this one) and the background processes
// without a database (WAL writer, checkpointer, background writer, …).
const servingQuery = `
SELECT pid FROM pg_stat_activity
WHERE (datname = current_database() AND pid <> pg_backend_pid())
	OR (datname IS NULL AND backend_type NOT IN ('client backend', 'walsender'))`

// sample returns the CPU time of the processes that serve the benchmark,
// and of the whole cluster: every live child of the postmaster plus the
// children it has reaped (its cutime + cstime).
func (p *postgresCPU) sample(ctx context.Context) (serving, cluster time.Duration, err error) {
	rows, err := p.db.db.QueryContext(ctx, servingQuery)
	if err != nil {
		return 0, 0, fmt.Errorf("list the serving backends: %w", err)
	}
	var pids []int
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			rows.Close()
			return 0, 0, err
		}
		pids = append(pids, pid)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, 0, err
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // exited meanwhile: its time is in the postmaster's cutime
		}
		f, err := statFields(string(stat))
		if err != nil {
			continue
		}
		own := ticks(f[11]) + ticks(f[12])
		switch {
		case pid == p.postmaster:
			cluster += ticks(f[13]) + ticks(f[14]) // reaped children
		case f[1] == strconv.Itoa(p.postmaster):
			cluster += own
			if slices.Contains(pids, pid) {
				serving += own
			}
		}
	}
	return serving, cluster, nil
}

// statFields are the fields of a /proc/PID/stat line after the command
// name: [0] is field 3 (state), [1] field 4 (ppid), [11] utime, [12]
// stime, [13] cutime, [14] cstime.
func statFields(stat string) ([]string, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return nil, fmt.Errorf("parse stat %q: no command name", stat)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 15 {
		return nil, fmt.Errorf("parse stat %q: too few fields", stat)
	}
	return f, nil
}

// ticks is a /proc/PID/stat clock-tick count as a duration (0 if unparsable).
func ticks(s string) time.Duration {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.Duration(n) * time.Second / clockTicks
}

// summarizeLock reduces the rounds to one line per system.
func summarizeLock(rows []LockRow) []LockSummary {
	var out []LockSummary
	for _, system := range append(slices.Clone(lockSystems), replicatedSystem) {
		var rates, p50s, p99s []float64
		var cycles, errs int64
		var cpu, pgCPU float64
		hasPG := false
		for _, r := range rows {
			if r.System != system {
				continue
			}
			rates = append(rates, r.CyclesPerSec)
			p50s = append(p50s, r.P50Ms)
			p99s = append(p99s, r.P99Ms)
			cycles += r.Cycles
			errs += r.Errors
			cpu += r.ServerCPUSeconds
			if r.PostgresCPUSeconds != nil {
				pgCPU += *r.PostgresCPUSeconds
				hasPG = true
			}
		}
		if len(rates) == 0 {
			continue
		}
		s := LockSummary{
			System:             system,
			CyclesPerSecMedian: median(rates),
			CyclesPerSecMin:    slices.Min(rates),
			CyclesPerSecMax:    slices.Max(rates),
			P50Ms:              median(p50s),
			P99Ms:              median(p99s),
			ServerMsPerCycle:   perCycle(cpu, cycles),
			Errors:             errs,
		}
		if hasPG {
			s.PostgresMsPerCycle = ptr(perCycle(pgCPU, cycles))
		}
		out = append(out, s)
	}
	if i := slices.IndexFunc(out, func(s LockSummary) bool { return s.System == "leaseapi" }); i >= 0 {
		for j := range out {
			if out[j].CyclesPerSecMedian > 0 {
				out[j].LeaseapiRatio = out[i].CyclesPerSecMedian / out[j].CyclesPerSecMedian
			}
		}
	}
	return out
}

// median is the middle value (the mean of the two middle ones for an even count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// lockTarget holds leaseapi to etcd's cycles per second.
func lockTarget(rep *Report) Target {
	name := "lock cycle: leaseapi ≥ 1.0 × etcd cycles/s (stretch 1.5×)"
	if rep.Lock == nil {
		return notMeasured(name)
	}
	var l, e *LockSummary
	for i, s := range rep.Lock.Summary {
		switch s.System {
		case "leaseapi":
			l = &rep.Lock.Summary[i]
		case "etcd":
			e = &rep.Lock.Summary[i]
		}
	}
	if l == nil || e == nil || e.CyclesPerSecMedian == 0 {
		return notMeasured(name)
	}
	// e.LeaseapiRatio is leaseapi's median over etcd's.
	t := atLeast(name, e.LeaseapiRatio, 1.0, "%.2f×",
		fmt.Sprintf("leaseapi %.0f / etcd %.0f cycles/s (medians of %d rounds) =", l.CyclesPerSecMedian, e.CyclesPerSecMedian, rep.Lock.Rounds))
	if e.LeaseapiRatio >= 1.5 {
		t.Detail += "; stretch 1.5× met"
	} else {
		t.Detail += "; stretch 1.5× not met"
	}
	if l.Errors > 0 || e.Errors > 0 {
		t.Met = boolp(false)
		t.Detail += fmt.Sprintf("; errors: leaseapi %d, etcd %d", l.Errors, e.Errors)
	}
	return t
}

// lockSummaryHeader and lockSummaryRow are the columns of the comparison table.
var lockSummaryHeader = []string{"system", "cycles/s (median)", "range", "p50 ms", "p99 ms",
	"server CPU ms/cycle", "leaseapi ÷ system"}

func lockSummaryRow(s LockSummary) []string {
	cpu := fmt.Sprintf("%s %.3f", s.System, s.ServerMsPerCycle)
	if s.PostgresMsPerCycle != nil {
		cpu = fmt.Sprintf("leaseapi %.3f + Postgres %.3f = %.3f", s.ServerMsPerCycle, *s.PostgresMsPerCycle, s.ServerMsPerCycle+*s.PostgresMsPerCycle)
	}
	return []string{s.System, fmt.Sprintf("%.0f", s.CyclesPerSecMedian),
		fmt.Sprintf("%.0f–%.0f", s.CyclesPerSecMin, s.CyclesPerSecMax),
		fmt.Sprintf("%.2f", s.P50Ms), fmt.Sprintf("%.2f", s.P99Ms), cpu, fmt.Sprintf("%.2f", s.LeaseapiRatio)}
}

// lockRoundHeader and lockRoundRow are the columns of the rounds' table.
var lockRoundHeader = []string{"round", "system", "cycles", "cycles/s", "p50 ms", "p99 ms", "max ms",
	"server CPU s", "Postgres CPU s", "cluster CPU s", "server RSS MiB", "errors"}

func lockRoundRow(r LockRow) []string {
	return []string{fmt.Sprint(r.Round), r.System, fmt.Sprint(r.Cycles), fmt.Sprintf("%.0f", r.CyclesPerSec),
		fmt.Sprintf("%.2f", r.P50Ms), fmt.Sprintf("%.2f", r.P99Ms), fmt.Sprintf("%.1f", r.MaxMs),
		fmt.Sprintf("%.2f", r.ServerCPUSeconds), opt(r.PostgresCPUSeconds, "%.2f"), opt(r.PostgresClusterCPUSeconds, "%.2f"),
		fmt.Sprintf("%.1f", r.PeakRSSMiB), fmt.Sprint(r.Errors)}
}

// lockDurability is one line of the durability settings in force.
func lockDurability(l *LockReport) string {
	var parts []string
	for _, system := range []string{"postgres", "postgres-pair", "etcd", "redis"} {
		if d, ok := l.Durability[system]; ok {
			parts = append(parts, fmt.Sprintf("%s %s: %s", system, l.Versions[system], d))
		}
	}
	return strings.Join(parts, "; ")
}

// printLock prints the lock scenario's tables.
func printLock(w io.Writer, rep *Report) {
	l := rep.Lock
	if l == nil {
		return
	}
	fmt.Fprintf(w, "\nlock cycle: %d clients, each on a lock of its own, %d rounds of %.0f s per system\ndurability: %s\n\n",
		l.Clients, l.Rounds, l.DurationSeconds, lockDurability(l))
	printTabbed(w, lockSummaryHeader, l.Summary, lockSummaryRow)
	fmt.Fprintln(w)
	printTabbed(w, lockRoundHeader, l.Rows, lockRoundRow)
}

func printTabbed[T any](w io.Writer, header []string, rows []T, row func(T) []string) {
	tw := tabwriter.NewWriter(w, 1, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(header, "\t")+"\t")
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(row(r), "\t")+"\t")
	}
	tw.Flush()
}

// writeLockMarkdown writes the lock scenario's tables.
func writeLockMarkdown(w io.Writer, rep *Report) {
	l := rep.Lock
	if l == nil {
		return
	}
	fmt.Fprintf(w, "\nLock cycle against etcd and Redis: %d clients, each on a lock of its own, acquire then release; "+
		"%d interleaved rounds of %.0f s per system, each row on a fresh server. Durability in force: %s.\n\n",
		l.Clients, l.Rounds, l.DurationSeconds, lockDurability(l))
	markdownTable(w, lockSummaryHeader, l.Summary, lockSummaryRow)
	fmt.Fprintln(w, "\nRounds (server CPU: leaseapi's, etcd's or redis-server's process; Postgres CPU: the backends of the "+
		"benchmark's database and the background processes; cluster CPU: every Postgres process, other databases' too):")
	fmt.Fprintln(w)
	markdownTable(w, lockRoundHeader, l.Rows, lockRoundRow)
}

func markdownTable[T any](w io.Writer, header []string, rows []T, row func(T) []string) {
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat("---|", len(header)))
	for _, r := range rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(row(r), " | "))
	}
}
