//go:build chaos

package chaos

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	_ "github.com/lib/pq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/internal/checker"
	"github.com/leaseapi/leaseapi/test/chaos/record"
)

// runConfig is one chaos run.
type runConfig struct {
	Name string
	Seed uint64
	// Duration is the chaos phase, the fault-free warm-up included.
	Duration time.Duration
	WarmUp   time.Duration

	Instances, Replicas, Jobs int
	Period, TTL, Heartbeat    time.Duration
	// RequestTimeout is the service's per-request deadline, batches'
	// (LEASEAPI_BATCH_TIMEOUT) included; ClientTimeout the replicas'
	// per-call timeout (longer, so that a late 503 is seen).
	RequestTimeout, ClientTimeout time.Duration
	MaxTTL                        time.Duration

	// Plan returns the nemesis schedule (offsets from the start).
	Plan func(cfg *runConfig, rng *rand.Rand) []event
	// Mutant switches a mutant on in a leaseapi built with chaos_mutants;
	// Control marks a negative control (a run that must fail).
	Mutant  string
	Control bool
	// InstanceEnv adds environment variables per instance.
	InstanceEnv map[int][]string
	// PGConf is appended to postgresql.conf.
	PGConf []string
	// WitnessAsync commits the witness writes with synchronous_commit=off.
	WitnessAsync bool
	// Zombie sends stale heartbeats and releases every ZombieEvery;
	// with ZombieHeld, only heartbeats, each on a lease held right then.
	ZombieEvery time.Duration
	ZombieHeld  bool
	// APIProxy puts a proxy between the replicas and each instance, for
	// api_latency faults.
	APIProxy bool
	// WALStall is how long a WAL-stall fault of the failover tier stops the
	// leader's WAL senders (zero: walStall).
	WALStall time.Duration
	// LinearizabilityTimeout bounds porcupine per job (zero: the default).
	LinearizabilityTimeout time.Duration

	// The owed-tick workload. Grace is what the replicas send with every
	// job's schedule (zero: the server's default, capped at the period);
	// every CatchUpEvery-th job registers catch-up latest (zero: none);
	// OwedPoll is how often the replicas ask what their jobs owe (zero:
	// the runner's default); MissedSweep how often the instances decide the
	// fate of due ticks (zero: their default). TriggerEvery is the mean gap
	// between the operator's run-now steps (zero: no operator).
	Grace        time.Duration
	CatchUpEvery int
	OwedPoll     time.Duration
	MissedSweep  time.Duration
	TriggerEvery time.Duration

	// Webhook registers a webhook on a receiver of the harness before the
	// replicas start, waits for its deliveries after the faults end, and
	// holds them to I12 (test/chaos/webhook_test.go).
	Webhook bool
	// HungWebhook (with Webhook) splits the jobs into two teams (jobID)
	// and registers two webhooks: team A's on a receiver that never
	// answers, and the judged one, team B's, on the answering receiver;
	// I12 judges team B's, I12b the fairness between them.
	HungWebhook bool
	// WebhookTimeout is the instances' LEASEAPI_WEBHOOK_TIMEOUT (zero: their
	// default).
	WebhookTimeout time.Duration
	// PolicyEvery gives every PolicyEvery-th job an alert policy and
	// registers a webhook of job.alerting and job.ok on a receiver of the
	// harness, whose deliveries I14 judges (test/chaos/policies_test.go);
	// zero for none.
	PolicyEvery int

	// Groups are the run's concurrency groups (test/chaos/groups_test.go),
	// whose jobs run every GroupPeriod with a grace of GroupGrace and work
	// from GroupWorkMin (longer than GroupGrace) to groupWorkMax.
	Groups       []groupSpec
	GroupPeriod  time.Duration
	GroupGrace   time.Duration
	GroupWorkMin time.Duration

	// The upgrade tier (test/chaos/upgrade_test.go). Previous, when set, is
	// a build of the previous release: it creates the database and the
	// instances start with it. Leaseapi, when set, is the build under
	// test instead of ./cmd/leaseapi's. Script, when set, runs after the
	// nemesis (the upgrade tier plans no fault) with the other background
	// work as usual; the chaos phase ends when both it and Duration are
	// over. SingleCalls makes every replica send single calls, no batches:
	// a previous release may lack the batch routes. AllowedStatuses are
	// the only statuses an answer may have (checker.Options).
	Previous        string
	Leaseapi        string
	Script          func(e *env)
	SingleCalls     bool
	AllowedStatuses []int

	// plan is the schedule the run injected (set by runChaos).
	plan []event
}

// planned reports whether the run's schedule has a fault of kind k.
func (cfg *runConfig) planned(k checker.FaultKind) bool {
	for _, ev := range cfg.plan {
		if ev.Kind == k {
			return true
		}
	}
	return false
}

// The bearer tokens of a chaos run: replicas, the zombie and the probe
// lease with leaseToken; the harness's operator (triggers, webhooks) acts
// with adminToken.
const (
	leaseToken = "chaos-lease-token"
	adminToken = "chaos-admin-token"
)

// workMax is the longest job body of the replicas (their -work-max).
const workMax = 1500 * time.Millisecond

// settle is how long after the replicas start ticks begin to count (I10).
const settle = 6 * time.Second

// binaries built once per test binary, per build tags.
var (
	binDir   string
	buildMu  sync.Mutex
	builtBin = map[string]string{}
)

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "leaseapi-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = d
	code := m.Run()
	_ = os.RemoveAll(d)
	os.Exit(code)
}

// build compiles pkg (relative to the module root) with tags, once.
func build(t *testing.T, pkg, tags string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	key := pkg + "|" + tags
	if p, ok := builtBin[key]; ok {
		return p
	}
	out := filepath.Join(binDir, fmt.Sprintf("bin%d", len(builtBin)))
	args := []string{"build", "-o", out}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = "../.."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s (tags %q): %v\n%s", pkg, tags, err, b)
	}
	builtBin[key] = out
	return out
}

// env is everything one run started.
type env struct {
	t   *testing.T
	cfg *runConfig
	art string // this run's artifacts directory

	pg  *cluster
	db  *sql.DB
	dsn string // the leaseapi database, direct
	// leasesDB, when set, holds the leases and runs while db holds the
	// witness schema (the failover suite: the cluster under test is not
	// the witness's).
	leasesDB *sql.DB

	toxi    *toxiproxy.ApiServer
	proxies []*toxiproxy.Proxy // leaseapi instance i to the database
	// apiProxies (with APIProxy) are the replicas' way to instance i.
	apiProxies []*toxiproxy.Proxy

	leaseapiBin, replicaBin string
	insts                   []*instance
	reps                    []*replicaSlot
	// open: the instances run without tokens (the failover tier).
	open bool
	// webhookKey is the instances' LEASEAPI_WEBHOOK_KEY (with Webhook).
	webhookKey string

	hrec  *record.Writer // the harness's own calls (zombie, probe)
	hids  atomic.Int64
	httpc *http.Client

	faultsMu sync.Mutex
	faults   []checker.Fault
	samplesM sync.Mutex
	samples  []checker.Sample
	maxLoad  float64 // the highest 1-minute load average seen during the run

	start, end time.Time
}

type instance struct {
	i    int
	port int
	env  []string
	// bin is the build it runs (the upgrade tier replaces it); the
	// caller of startInstance sets it.
	bin string

	mu    sync.Mutex
	p     *proc
	procs []*proc
}

type replicaSlot struct {
	i int

	mu          sync.Mutex
	p           *proc
	owner       string
	incarnation int
	procs       []*proc
}

func (e *env) logf(format string, args ...any) {
	e.t.Helper()
	e.t.Logf("%s %s", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// newEnv builds the binaries and starts the cluster, the proxies and the
// leaseapi instances. The replicas start with run.
func newEnv(t *testing.T, cfg *runConfig, art string) *env {
	e := &env{t: t, cfg: cfg, art: art}
	tags := ""
	if cfg.Mutant != "" {
		tags = "chaos_mutants"
	}
	e.leaseapiBin = cfg.Leaseapi
	if e.leaseapiBin == "" {
		e.leaseapiBin = build(t, "./cmd/leaseapi", tags)
	}
	e.replicaBin = build(t, "./test/chaos/replica", "chaos")

	e.pg = startCluster(t, cfg.PGConf)
	if err := e.setupDatabase(true); err != nil {
		t.Fatal(err)
	}

	if cfg.webhooks() {
		key, err := newWebhookKey()
		if err != nil {
			t.Fatal(err)
		}
		e.webhookKey = key
	}

	e.toxi = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	for i := range cfg.Instances {
		e.proxies = append(e.proxies, e.proxy(fmt.Sprintf("db%d", i), e.pg.Port))
	}

	w, err := record.Create(filepath.Join(art, "ops-harness.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	e.hrec = w
	t.Cleanup(func() { _ = w.Close() })
	e.httpc = &http.Client{Timeout: cfg.ClientTimeout}

	for i := range cfg.Instances {
		inst := &instance{i: i, port: freePort(t), bin: cmp.Or(cfg.Previous, e.leaseapiBin)}
		inst.env = e.instanceEnv(i, inst.port)
		e.insts = append(e.insts, inst)
		if cfg.APIProxy {
			e.apiProxies = append(e.apiProxies, e.proxy(fmt.Sprintf("api%d", i), inst.port))
		}
	}
	t.Cleanup(e.killAll)
	for _, inst := range e.insts {
		if err := e.startInstance(inst); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

const witnessSchema = `
CREATE SCHEMA witness;
CREATE TABLE witness.fence (job text PRIMARY KEY, max_token bigint NOT NULL DEFAULT 0);
CREATE TABLE witness.runs (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	job text NOT NULL, tick timestamptz, token bigint NOT NULL, owner text NOT NULL,
	started_at timestamptz NOT NULL, ended_at timestamptz);
CREATE TABLE witness.rejected (job text, tick timestamptz, token bigint, owner text, phase text, at timestamptz);
CREATE TABLE witness.beliefs (job text, token bigint, owner text, at timestamptz);
CREATE TABLE witness.faults (kind text, target text, instance int, started_at timestamptz, ended_at timestamptz);`

// jobID is the id of job i: "job-07", or with HungWebhook its team's
// scope and that ("team-a.job-07"), the first half of the jobs team A's,
// the rest team B's.
func (e *env) jobID(i int) string {
	if e.cfg.HungWebhook {
		return teamScope(i, e.cfg.Jobs) + fmt.Sprintf("job-%02d", i)
	}
	return fmt.Sprintf("job-%02d", i)
}

// jobIDs are the ids of every job of the run, in order.
func (e *env) jobIDs() []string {
	ids := make([]string, 0, e.cfg.Jobs)
	for i := range e.cfg.Jobs {
		ids = append(ids, e.jobID(i))
	}
	return ids
}

// workloadJobs selects the lease rows of the workload's jobs (jobID), the
// ones the lease-row checks (I7) count, the groups' jobs included: not those
// of the harness's own jobs, such as the failover tier's releaseRetrier.
const workloadJobs = `(job_id LIKE 'job-%' OR job_id LIKE 'team-_.job-%' OR ` + groupJobsPattern + `)`

// setupDatabase creates the database leaseapi on the private Postgres with
// the witness schema and, when migrate is set, leaseapi's tables (the
// failover tier keeps only the witness there: its leases live on the
// Patroni cluster).
func (e *env) setupDatabase(migrate bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := sql.Open("postgres", e.pg.DSN("postgres"))
	if err != nil {
		return err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE leaseapi`); err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	e.dsn = e.pg.DSN("leaseapi")
	db, err := sql.Open("postgres", e.dsn)
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(4)
	e.db = db
	e.t.Cleanup(func() { _ = db.Close() })

	if migrate {
		// The database is the previous release's when the run upgrades
		// from it.
		cmd := exec.CommandContext(ctx, cmp.Or(e.cfg.Previous, e.leaseapiBin), "migrate")
		cmd.Env = append(baseEnv(), "LEASEAPI_DATABASE_URL="+e.dsn, "LEASEAPI_LOG_FORMAT=text")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("leaseapi migrate: %w\n%s", err, out)
		}
	}
	if _, err := db.ExecContext(ctx, witnessSchema); err != nil {
		return fmt.Errorf("witness schema: %w", err)
	}
	for _, job := range e.allJobIDs() {
		if _, err := db.ExecContext(ctx, `INSERT INTO witness.fence (job) VALUES ($1)`, job); err != nil {
			return err
		}
	}
	return nil
}

// baseEnv is the harness's environment without any LEASEAPI_ setting.
func baseEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEASEAPI_") {
			out = append(out, kv)
		}
	}
	return out
}

func (e *env) instanceEnv(i, port int) []string {
	proxy := e.proxies[i].Listen
	env := append(baseEnv(),
		fmt.Sprintf("LEASEAPI_ADDR=127.0.0.1:%d", port),
		fmt.Sprintf("LEASEAPI_DATABASE_URL=postgres://postgres@%s/leaseapi?sslmode=disable", proxy),
		"LEASEAPI_DEFAULT_TTL="+e.cfg.TTL.String(),
		"LEASEAPI_MIN_TTL=1s",
		"LEASEAPI_MAX_TTL="+e.cfg.MaxTTL.String(),
		"LEASEAPI_REQUEST_TIMEOUT="+e.cfg.RequestTimeout.String(),
		"LEASEAPI_BATCH_TIMEOUT="+e.cfg.RequestTimeout.String(),
		"LEASEAPI_SHUTDOWN_TIMEOUT=5s",
		"LEASEAPI_LOG_LEVEL=info",
		"LEASEAPI_LOG_FORMAT=json",
		"LEASEAPI_API_TOKENS="+leaseToken,
		"LEASEAPI_ADMIN_TOKENS="+adminToken,
	)
	if e.cfg.MissedSweep > 0 {
		env = append(env, "LEASEAPI_MISSED_SWEEP="+e.cfg.MissedSweep.String())
	}
	if e.cfg.Mutant != "" {
		env = append(env, "LEASEAPI_MUTANT="+e.cfg.Mutant)
	}
	env = append(env, e.webhookEnv()...)
	return append(env, e.cfg.InstanceEnv[i]...)
}

// startInstance starts (or restarts) a leaseapi instance and waits until
// it is ready.
func (e *env) startInstance(inst *instance) error {
	p, err := startProc(fmt.Sprintf("leaseapi instance %d", inst.i), inst.bin, nil, inst.env,
		filepath.Join(e.art, fmt.Sprintf("leaseapi-%d.log", inst.i)))
	if err != nil {
		return err
	}
	inst.mu.Lock()
	inst.p = p
	inst.procs = append(inst.procs, p)
	inst.mu.Unlock()
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", inst.port)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if !p.alive() {
			log := filepath.Join(e.art, fmt.Sprintf("leaseapi-%d.log", inst.i))
			return fmt.Errorf("leaseapi instance %d exited at start (%v); the end of %s:\n%s", inst.i, p.exitError(), log, tail(log, 20))
		}
		resp, err := e.httpc.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("leaseapi instance %d not ready within 30s", inst.i)
}

// proxy starts an in-process toxiproxy proxy to a local port.
func (e *env) proxy(name string, port int) *toxiproxy.Proxy {
	p := toxiproxy.NewProxy(e.toxi, name, "127.0.0.1:0", fmt.Sprintf("127.0.0.1:%d", port))
	if err := p.Start(); err != nil {
		e.t.Fatalf("toxiproxy: %v", err)
	}
	e.t.Cleanup(p.Stop)
	return p
}

// apiURLs are the replicas' addresses of the instances.
func (e *env) apiURLs() string {
	var urls []string
	for i, inst := range e.insts {
		if e.apiProxies != nil {
			urls = append(urls, "http://"+e.apiProxies[i].Listen)
			continue
		}
		urls = append(urls, fmt.Sprintf("http://127.0.0.1:%d", inst.port))
	}
	return strings.Join(urls, ",")
}

// startReplica starts the next incarnation of a replica slot; the caller
// holds slot.mu (or nobody else can reach the slot yet).
func (e *env) startReplica(slot *replicaSlot) error {
	slot.incarnation++
	owner := fmt.Sprintf("r%d.%d", slot.i, slot.incarnation)
	dsn := e.dsn
	if e.cfg.WitnessAsync {
		dsn += "&synchronous_commit=off"
	}
	args := []string{
		"-api", e.apiURLs(), "-owner", owner,
		"-job-ids", strings.Join(e.jobIDs(), ","), "-period", e.cfg.Period.String(),
		"-ttl", e.cfg.TTL.String(), "-heartbeat", e.cfg.Heartbeat.String(),
		"-request-timeout", e.cfg.ClientTimeout.String(),
		"-work-max", workMax.String(),
		"-token", leaseToken,
		"-grace", e.cfg.Grace.String(), "-catch-up-every", fmt.Sprint(e.cfg.CatchUpEvery),
		"-owed-poll", e.cfg.OwedPoll.String(),
		"-witness", dsn,
		"-record", filepath.Join(e.art, "ops-"+owner+".jsonl"),
		"-seed", fmt.Sprint(e.cfg.Seed*1000 + uint64(slot.i*100+slot.incarnation)),
		// Replicas of an even slot send their acquires and heartbeats in
		// batches, the others one by one: both paths run under the faults.
		"-batches=" + fmt.Sprint(slot.i%2 == 0 && !e.cfg.SingleCalls),
	}
	args = append(args, e.groupArgs()...)
	p, err := startProc("replica "+owner, e.replicaBin, args, baseEnv(), filepath.Join(e.art, "replica-"+owner+".log"))
	if err != nil {
		return err
	}
	slot.p, slot.owner = p, owner
	slot.procs = append(slot.procs, p)
	return nil
}

// killAll ends every process the harness started (cleanup).
func (e *env) killAll() {
	for _, slot := range e.reps {
		for _, p := range slot.procs {
			p.kill()
		}
	}
	for _, inst := range e.insts {
		inst.mu.Lock()
		procs := inst.procs
		inst.mu.Unlock()
		for _, p := range procs {
			p.kill()
		}
	}
}

func (e *env) addFault(f checker.Fault) {
	e.faultsMu.Lock()
	e.faults = append(e.faults, f)
	e.faultsMu.Unlock()
}

// bounded runs a harness query that must not outlive d even on a frozen
// database (lib/pq can block past its context there).
func bounded[T any](d time.Duration, fn func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	type res struct {
		v   T
		err error
	}
	ch := make(chan res, 1)
	go func() {
		defer cancel()
		v, err := fn(ctx)
		ch <- res{v, err}
	}()
	t := time.NewTimer(d + 500*time.Millisecond)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-t.C:
		var zero T
		return zero, errors.New("harness query abandoned")
	}
}

// sample reads the leases table once (I7).
func (e *env) sample() {
	at := time.Now()
	type counts struct{ n, over int }
	c, err := bounded(time.Second, func(ctx context.Context) (counts, error) {
		var c counts
		err := e.leases().QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE expires_at > clock_timestamp() + $1 * interval '1 millisecond') FROM leases WHERE `+workloadJobs,
			e.cfg.MaxTTL.Milliseconds()).Scan(&c.n, &c.over)
		return c, err
	})
	s := checker.Sample{At: at, Leases: c.n, OverMaxTTL: c.over}
	if err != nil {
		s.Err = err.Error()
	}
	load := loadAverage()
	e.samplesM.Lock()
	e.samples = append(e.samples, s)
	e.maxLoad = max(e.maxLoad, load)
	e.samplesM.Unlock()
}

// call sends one recorded lease call from the harness (zombie, probe).
func (e *env) call(client string, inst int, job, kind string, body map[string]any) (string, *api.Lease) {
	b, _ := json.Marshal(body)
	ev := &record.Event{Ev: "call", Client: client, Instance: inst, Job: job, Kind: kind}
	ev.Owner, _ = body["owner"].(string)
	ev.Token, _ = body["token"].(int64)
	ev.TTLMs, _ = body["ttlMs"].(int64)
	ev.Outcome, _ = body["outcome"].(string)
	url := fmt.Sprintf("http://127.0.0.1:%d/leases/%s/%s", e.insts[inst].port, job, kind)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+leaseToken)
	return e.send(ev, req)
}

// send sends req and records it in the harness's history: ev, completed
// with its id and time, when it is sent, and the answer when it returns.
func (e *env) send(ev *record.Event, req *http.Request) (string, *api.Lease) {
	ev.ID, ev.T = e.hids.Add(1), time.Now().UnixNano()
	_ = e.hrec.Write(ev)
	resp, err := e.httpc.Do(req)
	ret := &record.Event{Ev: "ret", ID: ev.ID}
	if err != nil {
		ret.T, ret.Result, ret.Err = time.Now().UnixNano(), "unknown", err.Error()
		_ = e.hrec.Write(ret)
		return ret.Result, nil
	}
	rb, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	ret.T, ret.Status = time.Now().UnixNano(), resp.StatusCode
	if rerr != nil {
		ret.Result, ret.Err = "unknown", rerr.Error()
	} else {
		ret.Result, ret.Lease = record.Classify(resp.StatusCode, rb)
		ret.Problem = record.ProblemOf(resp.StatusCode, rb)
	}
	_ = e.hrec.Write(ret)
	return ret.Result, ret.Lease
}

// zombie replays superseded grants: a heartbeat or release with the owner
// and token of a job's previous grant, which must be refused (I3).
func (e *env) zombie(rng *rand.Rand) {
	job := e.jobID(rng.IntN(e.cfg.Jobs))
	type grant struct {
		job, owner string
		token      int64
	}
	query := `SELECT job_id, owner, token FROM runs WHERE job_id = $1 AND token IS NOT NULL ORDER BY token DESC OFFSET 1 LIMIT 1`
	if e.cfg.ZombieHeld {
		// The previous grant of a job held for a while yet, picked at
		// random: a stale heartbeat there is one a fenced check refuses.
		query = `SELECT r.job_id, r.owner, r.token FROM leases AS l JOIN runs AS r ON r.job_id = l.job_id AND r.token < l.token
			WHERE $1::text IS NOT NULL AND l.released_at IS NULL AND l.revoked_at IS NULL
				AND l.expires_at > clock_timestamp() + interval '500 milliseconds'
			ORDER BY random(), r.token DESC LIMIT 1`
	}
	g, err := bounded(time.Second, func(ctx context.Context) (grant, error) {
		var g grant
		err := e.db.QueryRowContext(ctx, query, job).Scan(&g.job, &g.owner, &g.token)
		return g, err
	})
	if err != nil {
		return
	}
	job = g.job
	inst := rng.IntN(len(e.insts))
	if e.cfg.ZombieHeld || rng.IntN(2) == 0 {
		e.call("zombie", inst, job, "heartbeat", map[string]any{"owner": g.owner, "token": g.token, "ttlMs": e.cfg.TTL.Milliseconds()})
	} else {
		e.call("zombie", inst, job, "release", map[string]any{"owner": g.owner, "token": g.token, "outcome": "failed"})
	}
}

// probe acquires every job as a fresh owner once the replicas are gone
// (I7: every job is grantable within TTL + 2·heartbeat). A job of a group
// names its group (a job that was never granted is in none yet) and is
// released at once, so that the group's other jobs can be probed too.
func (e *env) probe(max time.Duration) []checker.Probe {
	start := time.Now()
	jobs := e.allJobIDs()
	groupOf := make(map[string]string)
	for _, j := range e.groupJobs() {
		groupOf[j.id] = j.group
	}
	out := make([]checker.Probe, len(jobs))
	var wg sync.WaitGroup
	for i, job := range jobs {
		wg.Go(func() {
			p := checker.Probe{Job: job}
			inst := i % len(e.insts)
			body := map[string]any{"owner": "probe", "ttlMs": int64(1000)}
			group, grouped := groupOf[job]
			if grouped {
				body["group"] = group
			}
			for {
				res, l := e.call("probe", inst, job, "acquire", body)
				p.Elapsed = time.Since(start)
				if res == "ok" {
					p.OK = true
					if grouped && l != nil {
						e.call("probe", inst, job, "release", map[string]any{"owner": "probe", "token": l.Token, "outcome": "succeeded"})
					}
					break
				}
				p.Err = res
				if p.Elapsed > max+time.Second {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			out[i] = p
		})
	}
	wg.Wait()
	return out
}

// collect reads everything the run recorded into a checker history.
func (e *env) collect(probes []checker.Probe) (*checker.History, error) {
	cfg := e.cfg
	h := &checker.History{
		Period: cfg.Period, TTL: cfg.TTL, HeartbeatInterval: cfg.Heartbeat, MaxTTL: cfg.MaxTTL,
		// Ticks count once the pools are warm: the first herd opens every
		// connection of both instances at once.
		Start: e.start.Add(settle), End: e.end, Probes: probes,
		ProbeMax: cfg.TTL + 2*cfg.Heartbeat + time.Second,
	}
	h.Jobs = e.allJobIDs()
	e.groupHistory(h)
	e.faultsMu.Lock()
	h.Faults = append(h.Faults, e.faults...)
	e.faultsMu.Unlock()
	// A tick's run takes at most the longest job body plus its calls.
	h.MaxRun = workMax + time.Second
	first := e.end
	for _, f := range h.Faults {
		if f.Start.Before(first) {
			first = f.Start
		}
	}
	if cfg.WarmUp > 0 {
		h.FaultFreeUntil = first.Add(-h.MaxRun)
	}
	e.samplesM.Lock()
	h.Samples = append(h.Samples, e.samples...)
	e.samplesM.Unlock()

	// The owed-tick workload: the jobs with catch-up, their grace (the
	// server caps it at the schedule's gap; its default is longer), and
	// the operator's calls (none recorded: an empty list, not nil).
	h.Grace = cfg.Period
	if cfg.Grace > 0 && cfg.Grace < cfg.Period {
		h.Grace = cfg.Grace
	}
	for i := range cfg.Jobs {
		if cfg.CatchUpEvery > 0 && i%cfg.CatchUpEvery == 0 {
			h.CatchUpJobs = append(h.CatchUpJobs, e.jobID(i))
		}
	}
	if cfg.CatchUpEvery > 0 && h.CatchUpJobs == nil {
		h.CatchUpJobs = []string{}
	}
	if cfg.TriggerEvery > 0 {
		h.Triggers = []checker.TriggerCall{}
	}
	files, _ := filepath.Glob(filepath.Join(e.art, "ops-*.jsonl"))
	h.Calls = []checker.Call{}
	for _, f := range files {
		ops, triggers, others, err := readOps(f)
		if err != nil {
			return nil, err
		}
		h.Ops = append(h.Ops, ops...)
		h.Triggers = append(h.Triggers, triggers...)
		h.Calls = append(h.Calls, others...)
	}
	if err := e.readTables(h); err != nil {
		return nil, err
	}
	for _, inst := range e.insts {
		for _, p := range inst.procs {
			if s := p.unexpectedExit(); s != "" {
				h.Incidents = append(h.Incidents, s)
			}
		}
		if s := scanPanics(filepath.Join(e.art, fmt.Sprintf("leaseapi-%d.log", inst.i))); s != "" {
			h.Incidents = append(h.Incidents, s)
		}
	}
	return h, nil
}

func scanPanics(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "panic") {
			return fmt.Sprintf("%s: %s", filepath.Base(path), line)
		}
	}
	return ""
}

// readOps pairs the call and return lines of one history file: the lease
// calls, the operator's calls about what jobs owe, and the other calls
// (POST /owed).
func readOps(path string) ([]checker.Op, []checker.TriggerCall, []checker.Call, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, nil, err
	}
	defer f.Close()
	calls := make(map[int64]*checker.Op)
	triggers := make(map[int64]*checker.TriggerCall)
	others := make(map[int64]*checker.Call)
	var order, torder, oorder []int64
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev record.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			continue // a torn last line of a killed process
		}
		switch {
		case ev.Ev == "call" && ev.Route != "":
			others[ev.ID] = &checker.Call{Client: ev.Client, Instance: ev.Instance, Route: ev.Route, Call: time.Unix(0, ev.T), Result: checker.ResultUnknown}
			oorder = append(oorder, ev.ID)
		case ev.Ev == "call" && (ev.Kind == string(checker.RunNow) || ev.Kind == string(checker.CancelOwed)):
			triggers[ev.ID] = &checker.TriggerCall{
				Kind: checker.TriggerKind(ev.Kind), Client: ev.Client, Instance: ev.Instance, Job: ev.Job,
				Key: ev.Key, Call: time.Unix(0, ev.T), Result: checker.ResultUnknown,
			}
			torder = append(torder, ev.ID)
		case ev.Ev == "call":
			o := &checker.Op{
				Client: ev.Client, Instance: ev.Instance, Job: ev.Job, Kind: checker.OpKind(ev.Kind),
				Owner: ev.Owner, Token: ev.Token, TTL: time.Duration(ev.TTLMs) * time.Millisecond,
				Outcome: ev.Outcome, Call: time.Unix(0, ev.T), Result: checker.ResultUnknown,
			}
			if ev.Tick != "" {
				if t, err := api.ParseTime(ev.Tick); err == nil {
					o.Tick = t
				}
			}
			calls[ev.ID] = o
			order = append(order, ev.ID)
		case ev.Ev == "ret" && others[ev.ID] != nil:
			c := others[ev.ID]
			c.Return, c.Status, c.Result, c.Err, c.Problem = time.Unix(0, ev.T), ev.Status, checker.Result(ev.Result), ev.Err, ev.Problem
		case ev.Ev == "ret" && triggers[ev.ID] != nil:
			c := triggers[ev.ID]
			c.Return, c.Status, c.Result, c.Problem = time.Unix(0, ev.T), ev.Status, checker.Result(ev.Result), ev.Problem
			if l := ev.Lease; l != nil && l.OwedTick != nil && l.OwedReason != nil {
				c.OwedTick, c.OwedReason = l.OwedTick.Time, string(*l.OwedReason)
			}
		case ev.Ev == "ret":
			o := calls[ev.ID]
			if o == nil {
				continue
			}
			o.Return, o.Status, o.Result, o.Err, o.Problem = time.Unix(0, ev.T), ev.Status, checker.Result(ev.Result), ev.Err, ev.Problem
			if ev.Lease != nil {
				o.Lease = toLease(ev.Lease)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	out := make([]checker.Op, 0, len(order))
	for _, id := range order {
		out = append(out, *calls[id])
	}
	tout := make([]checker.TriggerCall, 0, len(torder))
	for _, id := range torder {
		tout = append(tout, *triggers[id])
	}
	oout := make([]checker.Call, 0, len(oorder))
	for _, id := range oorder {
		oout = append(oout, *others[id])
	}
	return out, tout, oout, nil
}

func toLease(l *api.Lease) *checker.Lease {
	out := &checker.Lease{
		Owner: l.Owner, Token: l.Token, State: string(l.State),
		AcquiredAt: l.AcquiredAt.Time, RenewedAt: l.RenewedAt.Time, ExpiresAt: l.ExpiresAt.Time,
		TTL: time.Duration(l.TTLMs) * time.Millisecond,
	}
	if l.ReleasedAt != nil {
		out.ReleasedAt = l.ReleasedAt.Time
	}
	if l.Tick != nil {
		out.Tick = l.Tick.Time
	}
	if l.LastCompletedTick != nil {
		out.LastCompletedTick = l.LastCompletedTick.Time
	}
	if l.Timeline != nil {
		out.Timeline = *l.Timeline
	}
	return out
}

func nullTime(t sql.NullTime) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time
}

// leases is the database of the leases and runs.
func (e *env) leases() *sql.DB {
	if e.leasesDB != nil {
		return e.leasesDB
	}
	return e.db
}

// readTables reads the run history, the lease rows and the witness schema
// over the harness's direct connection.
func (e *env) readTables(h *checker.History) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The grants: the missed ticks the sweep records are runs without a
	// holder, which no invariant of the lease is about.
	rows, err := e.leases().QueryContext(ctx, `SELECT id, job_id, token, owner, tick, started_at, ended_at, outcome, trigger, triggered_by, expiry_counted,
	COALESCE(group_name, ''), COALESCE(slot, 0), COALESCE(slot_token, 0)
FROM runs WHERE token IS NOT NULL ORDER BY id`)
	if err != nil {
		return fmt.Errorf("read runs: %w", err)
	}
	for rows.Next() {
		var r checker.Run
		var tick, ended sql.NullTime
		var by sql.NullString
		if err := rows.Scan(&r.ID, &r.Job, &r.Token, &r.Owner, &tick, &r.StartedAt, &ended, &r.Outcome, &r.Trigger, &by, &r.ExpiryCounted,
			&r.Group, &r.Slot, &r.SlotToken); err != nil {
			return err
		}
		r.Tick, r.EndedAt, r.TriggeredBy = nullTime(tick), nullTime(ended), by.String
		h.Runs = append(h.Runs, r)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	// The missed ticks: a catch-up run must be of one of them (I6), and
	// those recorded with the group full are no ticks to run (I10).
	rows, err = e.leases().QueryContext(ctx, `SELECT id, job_id, tick, ended_at, outcome, trigger, group_full FROM runs WHERE token IS NULL ORDER BY id`)
	if err != nil {
		return fmt.Errorf("read missed runs: %w", err)
	}
	for rows.Next() {
		var r checker.Run
		var tick, ended sql.NullTime
		if err := rows.Scan(&r.ID, &r.Job, &tick, &ended, &r.Outcome, &r.Trigger, &r.GroupFull); err != nil {
			return err
		}
		r.Tick, r.EndedAt = nullTime(tick), nullTime(ended)
		h.Missed = append(h.Missed, r)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = e.leases().QueryContext(ctx, `SELECT job_id, owner, token, expires_at FROM leases WHERE `+workloadJobs+` ORDER BY job_id`)
	if err != nil {
		return fmt.Errorf("read leases: %w", err)
	}
	h.Leases = []checker.LeaseRow{}
	for rows.Next() {
		var l checker.LeaseRow
		if err := rows.Scan(&l.Job, &l.Owner, &l.Token, &l.ExpiresAt); err != nil {
			return err
		}
		h.Leases = append(h.Leases, l)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = e.db.QueryContext(ctx, `SELECT job, tick, token, owner, started_at, ended_at FROM witness.runs ORDER BY id`)
	if err != nil {
		return fmt.Errorf("read witness.runs: %w", err)
	}
	for rows.Next() {
		var w checker.WitnessRun
		var tick, ended sql.NullTime
		if err := rows.Scan(&w.Job, &tick, &w.Token, &w.Owner, &w.StartedAt, &ended); err != nil {
			return err
		}
		w.Tick, w.EndedAt = nullTime(tick), nullTime(ended)
		h.Witness = append(h.Witness, w)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = e.db.QueryContext(ctx, `SELECT job, tick, token, owner, phase, at FROM witness.rejected`)
	if err != nil {
		return fmt.Errorf("read witness.rejected: %w", err)
	}
	for rows.Next() {
		var r checker.Rejection
		var tick sql.NullTime
		if err := rows.Scan(&r.Job, &tick, &r.Token, &r.Owner, &r.Phase, &r.At); err != nil {
			return err
		}
		r.Tick = nullTime(tick)
		h.Rejected = append(h.Rejected, r)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = e.db.QueryContext(ctx, `SELECT job, token, owner, at FROM witness.beliefs`)
	if err != nil {
		return fmt.Errorf("read witness.beliefs: %w", err)
	}
	for rows.Next() {
		var b checker.Belief
		if err := rows.Scan(&b.Job, &b.Token, &b.Owner, &b.At); err != nil {
			return err
		}
		h.Beliefs = append(h.Beliefs, b)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	// The fault log, for anyone reading the database afterwards.
	for _, f := range h.Faults {
		_, _ = e.db.ExecContext(ctx, `INSERT INTO witness.faults VALUES ($1, $2, $3, $4, $5)`,
			string(f.Kind), f.Target, f.Instance, f.Start, f.End)
	}
	return nil
}

// writeJSONL writes one JSON document per line.
func writeJSONL[T any](path string, items []T) error {
	var b bytes.Buffer
	for _, it := range items {
		line, err := json.Marshal(it)
		if err != nil {
			return err
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

func sortedFaults(fs []checker.Fault) []checker.Fault {
	out := append([]checker.Fault(nil), fs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// loadAverage is the 1-minute load average (0 when unknown).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
