//go:build chaos

// Command replica is the chaos suite's cron replica: jobs.Runner running N
// jobs every period under leaseapi leases, whose job body writes its side
// effects through the fencing token into the witness schema, and which
// records every HTTP call it makes to leaseapi (call and return, with the
// answer) for the checkers.
//
// It is not cmd/cronreplica because it needs what a shipped binary must not
// carry: a direct connection to the witness schema, a per-call history
// recorder, and calls spread over several leaseapi instances at random.
//
//	replica -api http://127.0.0.1:8001,http://127.0.0.1:8002 -owner r1/ab12 \
//	    -jobs 20 -period 2s -ttl 3s -token T -witness postgres://... -record ops.jsonl \
//	    -grace 500ms -catch-up-every 2 -owed-poll 1s
//
// With -catch-up-every k, every k-th job (job 0, k, 2k, ...) registers
// catch-up latest with its schedule; every replica polls POST /owed every
// -owed-poll and claims what its jobs owe (a catch-up tick, an operator's
// run now) with an ordinary acquire of that tick, recorded like the rest.
//
// -job-ids names the jobs (the harness's names, such as two teams'
// "team-a.job-00" and "team-b.job-10"); without it they are -prefix and
// two digits.
//
// -group-jobs adds jobs in concurrency groups ("job=group", comma-separated;
// the groups exist already): each runs every -group-period with a grace of
// -group-grace, joins its group with every acquire, and works from
// -group-work-min to -group-work-max.
//
// SIGTERM stops it: running jobs are cancelled and their leases released.
package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/lib/pq"

	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/api/client"
	"github.com/leaseapi/leaseapi/jobs"
	"github.com/leaseapi/leaseapi/test/chaos/record"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "replica:", err)
		os.Exit(1)
	}
}

type config struct {
	apis           []*url.URL
	owner          string
	jobs           int
	prefix         string
	ids            []string // the job ids: -job-ids, or -jobs ids of -prefix
	period         time.Duration
	ttl, heartbeat time.Duration
	margin         time.Duration
	requestTimeout time.Duration
	workMin        time.Duration
	workMax        time.Duration
	jitter         time.Duration
	grace          time.Duration
	catchUpEvery   int
	catchUpWindow  time.Duration
	owedPoll       time.Duration
	token          string
	witness        string
	record         string
	seed           uint64
	batches        bool
	// The jobs in concurrency groups: job id to group.
	groupJobs    []groupJob
	groupPeriod  time.Duration
	groupGrace   time.Duration
	groupWorkMin time.Duration
	groupWorkMax time.Duration
}

// groupJob is a job of -group-jobs.
type groupJob struct{ id, group string }

func parse(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("replica", flag.ContinueOnError)
	apis := fs.String("api", "", "comma-separated base URLs of the leaseapi instances")
	fs.StringVar(&c.owner, "owner", "", "this incarnation's owner id")
	fs.IntVar(&c.jobs, "jobs", 20, "number of jobs")
	fs.StringVar(&c.prefix, "prefix", "job-", "job id prefix")
	ids := fs.String("job-ids", "", "comma-separated job ids, instead of -jobs and -prefix")
	fs.DurationVar(&c.period, "period", 2*time.Second, "every job runs @every period")
	fs.DurationVar(&c.ttl, "ttl", 3*time.Second, "lease TTL")
	fs.DurationVar(&c.heartbeat, "heartbeat", time.Second, "heartbeat interval")
	fs.DurationVar(&c.margin, "margin", 0, "runner margin (default ttl/10)")
	fs.DurationVar(&c.requestTimeout, "request-timeout", 2*time.Second, "timeout of one call to leaseapi")
	fs.DurationVar(&c.workMin, "work-min", 50*time.Millisecond, "shortest job body")
	fs.DurationVar(&c.workMax, "work-max", 1500*time.Millisecond, "longest job body")
	fs.DurationVar(&c.jitter, "jitter", 50*time.Millisecond, "random delay before each acquire")
	fs.DurationVar(&c.grace, "grace", 0, "grace sent with every job's schedule (0: the server's default)")
	fs.IntVar(&c.catchUpEvery, "catch-up-every", 0, "every k-th job registers catch-up latest (0: none)")
	fs.DurationVar(&c.catchUpWindow, "catch-up-window", 2*time.Minute, "catch-up window of those jobs")
	fs.DurationVar(&c.owedPoll, "owed-poll", 0, "how often owed ticks are polled (0: the runner's default, negative: never)")
	fs.StringVar(&c.token, "token", "", "bearer token for leaseapi")
	fs.StringVar(&c.witness, "witness", "", "DSN of the witness schema (direct, not through a proxy)")
	fs.StringVar(&c.record, "record", "", "append the call history to this file")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the replica's randomness")
	fs.BoolVar(&c.batches, "batches", true, "send the acquires and heartbeats that go together as batches (POST /acquire, POST /heartbeat)")
	groupJobs := fs.String("group-jobs", "", "comma-separated job=group: jobs in concurrency groups")
	fs.DurationVar(&c.groupPeriod, "group-period", 4*time.Second, "the jobs in groups run @every group-period")
	fs.DurationVar(&c.groupGrace, "group-grace", 0, "grace sent with the schedule of the jobs in groups (0: the server's default)")
	fs.DurationVar(&c.groupWorkMin, "group-work-min", 600*time.Millisecond, "shortest job body of a job in a group")
	fs.DurationVar(&c.groupWorkMax, "group-work-max", 800*time.Millisecond, "longest job body of a job in a group")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if *ids != "" {
		c.ids = strings.Split(*ids, ",")
	} else {
		for i := range c.jobs {
			c.ids = append(c.ids, fmt.Sprintf("%s%02d", c.prefix, i))
		}
	}
	c.jobs = len(c.ids)
	if *groupJobs != "" {
		for _, f := range strings.Split(*groupJobs, ",") {
			id, group, ok := strings.Cut(f, "=")
			if !ok || id == "" || group == "" {
				return c, fmt.Errorf("-group-jobs: %q is not job=group", f)
			}
			c.groupJobs = append(c.groupJobs, groupJob{id: id, group: group})
		}
	}
	for _, s := range strings.Split(*apis, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || u.Host == "" {
			return c, fmt.Errorf("-api: bad URL %q", s)
		}
		c.apis = append(c.apis, u)
	}
	if c.owner == "" || c.witness == "" || c.record == "" || c.workMax < c.workMin || c.groupWorkMax < c.groupWorkMin {
		return c, errors.New("-owner, -witness and -record are required, -work-max >= -work-min and -group-work-max >= -group-work-min")
	}
	return c, nil
}

func run(ctx context.Context, args []string) error {
	cfg, err := parse(args)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	rec, err := record.Create(cfg.record)
	if err != nil {
		return err
	}
	defer rec.Close()
	db, err := sql.Open("postgres", cfg.witness)
	if err != nil {
		return fmt.Errorf("witness: %w", err)
	}
	defer db.Close()
	// Few connections: 5 replicas share one small Postgres with the services.
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)

	rng := rand.New(rand.NewPCG(cfg.seed, cfg.seed^0x5eed))
	d := &doer{
		apis:   cfg.apis,
		client: cfg.owner,
		rec:    rec,
		jitter: cfg.jitter,
		rng:    rng,
		hc: &http.Client{Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
			MaxIdleConnsPerHost: 4 * cfg.jobs,
			IdleConnTimeout:     30 * time.Second,
		}},
	}
	c, err := client.NewClientWithResponses(cfg.apis[0].String(), client.WithHTTPClient(d), client.WithBearerToken(cfg.token))
	if err != nil {
		return err
	}
	w := &worker{db: db, owner: cfg.owner, min: cfg.workMin, max: cfg.workMax, rng: rng, logger: logger}
	// The group jobs' worker draws from its own source: a worker's mutex
	// guards only its own.
	grng := rand.New(rand.NewPCG(cfg.seed, cfg.seed^0x67726f7570))
	gw := &worker{db: db, owner: cfg.owner, min: cfg.groupWorkMin, max: cfg.groupWorkMax, rng: grng, logger: logger}
	runner, err := jobs.New(jobs.Config{
		Client:            c,
		Owner:             cfg.owner,
		TTL:               cfg.ttl,
		HeartbeatInterval: cfg.heartbeat,
		Margin:            cfg.margin,
		RequestTimeout:    cfg.requestTimeout,
		OwedPollInterval:  cfg.owedPoll,
		DisableBatches:    !cfg.batches,
		Logger:            logger,
		ReportFunc: func(r jobs.Report) {
			e := &record.Event{Ev: "report", T: time.Now().UnixNano(), Job: r.JobID, Token: r.Token,
				Tick: api.FormatTime(r.Tick), Outcome: string(r.Result)}
			if r.Err != nil {
				e.Err = r.Err.Error()
			}
			_ = rec.Write(e)
		},
	})
	if err != nil {
		return err
	}
	spec := "@every " + cfg.period.String()
	for i, id := range cfg.ids {
		var opts []jobs.JobOption
		if cfg.grace > 0 {
			opts = append(opts, jobs.Grace(cfg.grace))
		}
		if catchesUp(i, cfg.catchUpEvery) {
			opts = append(opts, jobs.CatchUp(cfg.catchUpWindow))
		}
		if err := runner.Add(id, spec, w.run, opts...); err != nil {
			return err
		}
	}
	for _, j := range cfg.groupJobs {
		opts := []jobs.JobOption{jobs.Group(j.group)}
		if cfg.groupGrace > 0 {
			opts = append(opts, jobs.Grace(cfg.groupGrace))
		}
		if err := runner.Add(j.id, "@every "+cfg.groupPeriod.String(), gw.run, opts...); err != nil {
			return err
		}
	}
	logger.Info("replica started", slog.String("owner", cfg.owner), slog.Int("jobs", cfg.jobs), slog.Int("group_jobs", len(cfg.groupJobs)),
		slog.Bool("batches", cfg.batches))
	return runner.Serve(ctx)
}

// catchesUp reports whether job i registers catch-up latest with
// -catch-up-every k.
func catchesUp(i, k int) bool { return k > 0 && i%k == 0 }

// worker is the job body: a fenced, two-phase write to the witness schema
// around a random amount of work, plus unfenced beliefs.
type worker struct {
	db       *sql.DB
	owner    string
	min, max time.Duration
	logger   *slog.Logger

	mu  sync.Mutex
	rng *rand.Rand
}

const (
	fenceQuery    = `UPDATE witness.fence SET max_token = $2 WHERE job = $1 AND max_token <= $2`
	startQuery    = `INSERT INTO witness.runs (job, tick, token, owner, started_at) VALUES ($1, $2, $3, $4, clock_timestamp())`
	endQuery      = `UPDATE witness.runs SET ended_at = clock_timestamp() WHERE job = $1 AND token = $2 AND owner = $3 AND ended_at IS NULL`
	rejectedQuery = `INSERT INTO witness.rejected (job, tick, token, owner, phase, at) VALUES ($1, $2, $3, $4, $5, clock_timestamp())`
	beliefQuery   = `INSERT INTO witness.beliefs (job, token, owner, at) VALUES ($1, $2, $3, clock_timestamp())`
)

// errFenced is a write the fence refused: a greater token already wrote.
var errFenced = errors.New("fenced out by a greater token")

// witnessTimeout bounds every witness statement.
const witnessTimeout = 2 * time.Second

func (w *worker) run(ctx context.Context) error {
	l, ok := jobs.LeaseFromContext(ctx)
	if !ok {
		return errors.New("no lease in the job's context")
	}
	w.belief(l.JobID, l.Token)
	if err := w.fenced(ctx, "start", l.JobID, l.Tick, l.Token); err != nil {
		return err
	}
	w.mu.Lock()
	d := w.min + time.Duration(w.rng.Int64N(int64(w.max-w.min)+1))
	w.mu.Unlock()
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	if ctx.Err() == nil {
		w.belief(l.JobID, l.Token)
	}
	// The end is written even when the run was cancelled: a write already
	// on its way when a process stalls is exactly what the fence is for.
	err := w.fenced(context.WithoutCancel(ctx), "end", l.JobID, l.Tick, l.Token)
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

func (w *worker) belief(job string, token int64) {
	ctx, cancel := context.WithTimeout(context.Background(), witnessTimeout)
	defer cancel()
	if _, err := w.db.ExecContext(ctx, beliefQuery, job, token, w.owner); err != nil {
		w.logger.Warn("belief not written", slog.String("job_id", job), slog.Any("error", err))
	}
}

// fenced runs one phase of the two-phase write in a transaction guarded by
// the fence: it succeeds only while no greater token has written.
func (w *worker) fenced(ctx context.Context, phase, job string, tick *time.Time, token int64) (err error) {
	ctx, cancel := context.WithTimeout(ctx, witnessTimeout)
	defer cancel()
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("witness %s: %w", phase, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	res, err := tx.ExecContext(ctx, fenceQuery, job, token)
	if err != nil {
		return fmt.Errorf("witness %s: %w", phase, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		_ = tx.Rollback()
		if _, rerr := w.db.ExecContext(ctx, rejectedQuery, job, tick, token, w.owner, phase); rerr != nil {
			w.logger.Warn("rejection not written", slog.String("job_id", job), slog.Any("error", rerr))
		}
		return fmt.Errorf("witness %s of token %d: %w", phase, token, errFenced)
	}
	q := startQuery
	args := []any{job, tick, token, w.owner}
	if phase == "end" {
		q, args = endQuery, []any{job, token, w.owner}
	}
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("witness %s: %w", phase, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("witness %s: commit: %w", phase, err)
	}
	return nil
}

// doer is the HTTP client of the generated leaseapi client: it sends each
// call to a random instance and records it.
type doer struct {
	apis   []*url.URL
	client string
	rec    *record.Writer
	jitter time.Duration
	hc     *http.Client
	ids    atomic.Int64

	mu  sync.Mutex
	rng *rand.Rand
}

func (d *doer) rand(n int64) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rng.Int64N(n)
}

// callBody is the union of the three request bodies.
type callBody struct {
	Owner   string `json:"owner"`
	Token   int64  `json:"token"`
	TTLMs   int64  `json:"ttlMs"`
	Tick    string `json:"tick"`
	Outcome string `json:"outcome"`
}

// batchBody is the union of the two batch request bodies: the defaults,
// and per item the fields that may override them.
type batchBody struct {
	Owner       string `json:"owner"`
	TTLMs       int64  `json:"ttlMs"`
	Tick        string `json:"tick"`
	NearestTick bool   `json:"nearestTick"`
	Items       []struct {
		JobID       string  `json:"jobId"`
		Owner       *string `json:"owner"`
		TTLMs       *int64  `json:"ttlMs"`
		Tick        *string `json:"tick"`
		NearestTick *bool   `json:"nearestTick"`
		Token       int64   `json:"token"`
	} `json:"items"`
}

// call is one lease call as the checker sees it: a single call, or one
// item of a batch.
type call struct {
	job string
	cb  callBody
}

// leaseCallPath reports whether path is that of a lease call the doer
// records: /leases/{job}/{kind}, or a batch, /acquire or /heartbeat.
func leaseCallPath(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	return len(parts) == 3 && parts[0] == "leases" || len(parts) == 1 && (parts[0] == "acquire" || parts[0] == "heartbeat")
}

// calls reads the lease calls of a request to path (a leaseCallPath) with
// body: one for /leases/{job}/{kind}, one per item for a batch, each with
// the fields its single call would send.
func calls(path string, body []byte) (kind string, cs []call) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) == 3:
		var cb callBody
		_ = json.Unmarshal(body, &cb)
		if parts[2] == "release" && cb.Outcome == "" {
			cb.Outcome = "succeeded"
		}
		return parts[2], []call{{job: parts[1], cb: cb}}
	default:
		var bb batchBody
		_ = json.Unmarshal(body, &bb)
		for _, it := range bb.Items {
			c := call{job: it.JobID, cb: callBody{Owner: bb.Owner, TTLMs: bb.TTLMs, Tick: bb.Tick, Token: it.Token}}
			if it.Owner != nil {
				c.cb.Owner = *it.Owner
			}
			if it.TTLMs != nil {
				c.cb.TTLMs = *it.TTLMs
			}
			if it.Tick != nil || it.NearestTick != nil {
				// An item that sends tick or nearestTick takes neither
				// from the defaults.
				c.cb.Tick = ""
				if it.Tick != nil {
					c.cb.Tick = *it.Tick
				}
			}
			cs = append(cs, c)
		}
		return parts[0], cs
	}
}

// itemAnswers reads the answer to a batch of n items: each item's status
// and body (its lease or problem), as its single call would have been
// answered. A batch refused as a whole gives every item that answer.
func itemAnswers(status int, body []byte, n int) (statuses []int, bodies [][]byte) {
	statuses, bodies = make([]int, n), make([][]byte, n)
	var answer struct {
		Results []struct {
			Status  int             `json:"status"`
			Lease   json.RawMessage `json:"lease"`
			Problem json.RawMessage `json:"problem"`
		} `json:"results"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &answer) != nil || len(answer.Results) != n {
		for i := range n {
			statuses[i], bodies[i] = status, body
		}
		if status == http.StatusOK {
			// An answer that cannot be read item by item: unknown.
			for i := range n {
				bodies[i] = nil
			}
		}
		return statuses, bodies
	}
	for i, res := range answer.Results {
		statuses[i], bodies[i] = res.Status, res.Problem
		if res.Status == http.StatusOK {
			bodies[i] = res.Lease
		}
	}
	return statuses, bodies
}

func (d *doer) Do(req *http.Request) (*http.Response, error) {
	inst := int(d.rand(int64(len(d.apis))))
	target := d.apis[inst]
	req.URL.Scheme, req.URL.Host, req.Host = target.Scheme, target.Host, ""
	if !leaseCallPath(req.URL.Path) {
		return d.other(req, inst)
	}
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		body = b
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	kind, cs := calls(req.URL.Path, body)
	if len(cs) == 0 {
		return d.hc.Do(req)
	}
	if kind == "acquire" && d.jitter > 0 {
		t := time.NewTimer(time.Duration(d.rand(int64(d.jitter))))
		select {
		case <-t.C:
		case <-req.Context().Done():
			t.Stop()
			return nil, req.Context().Err()
		}
	}
	ids := make([]int64, len(cs))
	var wrote atomic.Bool
	ctx := httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) },
	})
	for i, c := range cs {
		ids[i] = d.ids.Add(1)
		_ = d.rec.Write(&record.Event{
			Ev: "call", ID: ids[i], T: time.Now().UnixNano(), Client: d.client, Instance: inst,
			Job: c.job, Kind: kind, Owner: c.cb.Owner, Token: c.cb.Token, TTLMs: c.cb.TTLMs,
			Tick: c.cb.Tick, Outcome: c.cb.Outcome,
		})
	}
	// fail records that no answer came for any of the calls.
	fail := func(err error, result string) {
		now := time.Now().UnixNano()
		for _, id := range ids {
			_ = d.rec.Write(&record.Event{Ev: "ret", ID: id, T: now, Err: err.Error(), Result: result})
		}
	}
	resp, err := d.hc.Do(req.WithContext(ctx))
	if err != nil {
		fail(err, transportResult(wrote.Load()))
		return nil, err
	}
	rb, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	if rerr != nil {
		fail(rerr, "unknown")
		return nil, rerr
	}
	now := time.Now().UnixNano()
	statuses, bodies := []int{resp.StatusCode}, [][]byte{rb}
	if !strings.HasPrefix(req.URL.Path, "/leases/") { // a batch
		statuses, bodies = itemAnswers(resp.StatusCode, rb, len(cs))
	}
	for i, id := range ids {
		ret := &record.Event{Ev: "ret", ID: id, T: now, Status: statuses[i], Problem: record.ProblemOf(statuses[i], bodies[i])}
		ret.Result, ret.Lease = record.Classify(statuses[i], bodies[i])
		_ = d.rec.Write(ret)
	}
	resp.Body = io.NopCloser(bytes.NewReader(rb))
	return resp, nil
}

// transportResult is the result of a call that got no answer: unknown
// once the request was written, else not sent.
func transportResult(wrote bool) string {
	if wrote {
		return "unknown"
	}
	return "not_sent"
}

// other sends a call that is no lease call (POST /owed) and records it
// with its route and answer, whose status the checkers judge (I9).
func (d *doer) other(req *http.Request, inst int) (*http.Response, error) {
	id := d.ids.Add(1)
	_ = d.rec.Write(&record.Event{Ev: "call", ID: id, T: time.Now().UnixNano(), Client: d.client, Instance: inst,
		Route: req.Method + " " + req.URL.Path})
	var wrote atomic.Bool
	ctx := httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) },
	})
	resp, err := d.hc.Do(req.WithContext(ctx))
	if err != nil {
		_ = d.rec.Write(&record.Event{Ev: "ret", ID: id, T: time.Now().UnixNano(), Err: err.Error(), Result: transportResult(wrote.Load())})
		return nil, err
	}
	rb, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	ret := &record.Event{Ev: "ret", ID: id, T: time.Now().UnixNano(), Status: resp.StatusCode, Result: "ok"}
	switch {
	case rerr != nil:
		ret.Result, ret.Err = "unknown", rerr.Error()
	case resp.StatusCode != http.StatusOK:
		ret.Result, _ = record.Classify(resp.StatusCode, rb)
		ret.Problem = record.ProblemOf(resp.StatusCode, rb)
	}
	_ = d.rec.Write(ret)
	if rerr != nil {
		return nil, rerr
	}
	resp.Body = io.NopCloser(bytes.NewReader(rb))
	return resp, nil
}
