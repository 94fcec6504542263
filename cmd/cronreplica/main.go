// Command cronreplica is a runnable cron replica for demos and tests: it runs
// simulated jobs on their cron schedules under leaseapi leases with
// jobs.Runner, so that any number of replicas run each tick once.
//
//	cronreplica -api http://leaseapi:8080 -job report='*/10 * * * * *' -job cleanup='@every 1m' -work 2s
//
// Each run sleeps for -work (or until the runner cancels it). With -record,
// every run that acquired its lease appends one JSON line to the file:
//
//	{"job":"report","tick":"...","token":7,"owner":"...","start":"...","end":"...","outcome":"succeeded","slot":1,"slotToken":9}
//
// where outcome is succeeded, failed or lost. SIGTERM or SIGINT stops taking
// ticks, cancels running jobs, releases them failed and exits.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
	_ "time/tzdata" // CRON_TZ= specs work in images without a zone database

	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/api/client"
	"github.com/leaseapi/leaseapi/internal/version"
	"github.com/leaseapi/leaseapi/jobs"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv("LEASEAPI_TOKEN"), os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "cronreplica:", err)
		os.Exit(1)
	}
}

// jobFlag collects repeated -job NAME=SPEC flags in order.
type jobFlag struct {
	names, specs []string
}

func (f *jobFlag) String() string {
	var parts []string
	for i := range f.names {
		parts = append(parts, f.names[i]+"="+f.specs[i])
	}
	return strings.Join(parts, ", ")
}

func (f *jobFlag) Set(v string) error {
	name, spec, ok := strings.Cut(v, "=")
	if !ok || name == "" || strings.TrimSpace(spec) == "" {
		return fmt.Errorf("want NAME=SPEC, e.g. report='*/10 * * * * *', got %q", v)
	}
	f.names = append(f.names, name)
	f.specs = append(f.specs, spec)
	return nil
}

// run parses args, serves the jobs until ctx is cancelled, and returns nil
// after a clean shutdown. envToken is $LEASEAPI_TOKEN, the default of -token.
// Only -version writes to stdout.
func run(ctx context.Context, args []string, envToken string, stdout, stderr io.Writer) error {
	hostname, _ := os.Hostname()
	fs := flag.NewFlagSet("cronreplica", flag.ContinueOnError)
	fs.SetOutput(stderr)
	apiURL := fs.String("api", "http://localhost:8080", "base URL of leaseapi")
	owner := fs.String("owner", hostname, "this replica's identity (unique per replica, e.g. the pod name)")
	var jobFlags jobFlag
	fs.Var(&jobFlags, "job", "a job as NAME=SPEC (cron spec with optional seconds, a descriptor, or @every D); repeatable")
	ttl := fs.Duration("ttl", jobs.DefaultTTL, "lease TTL")
	heartbeat := fs.Duration("heartbeat", 0, "heartbeat interval (default ttl/3, at most ttl/2)")
	requestTimeout := fs.Duration("request-timeout", 0, "deadline of one request to leaseapi (default the heartbeat interval)")
	work := fs.Duration("work", 100*time.Millisecond, "simulated work per run: a sleep that stops when the run is cancelled")
	record := fs.String("record", "", "append one JSON line per run to this file")
	token := fs.String("token", envToken, "bearer token for leaseapi (default $LEASEAPI_TOKEN)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	shutdownTimeout := fs.Duration("shutdown-timeout", 0, "how long shutdown waits for running jobs (default ttl)")
	catchUp := fs.Duration("catch-up", 0, "register catch-up latest for every job with this window (1m to 168h): after an outage a job runs its latest missed tick once (default off)")
	group := fs.String("group", "", "put every job in this concurrency group (it must exist: PUT /groups/{name})")
	owedPoll := fs.Duration("owed-poll", 0, "how often to ask leaseapi what the jobs owe (default 10s; negative: never)")
	printVersion := fs.Bool("version", false, "print the version, commit, commit time and Go, and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *printVersion {
		_, err := fmt.Fprint(stdout, version.Get())
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if len(jobFlags.names) == 0 {
		return errors.New("no jobs: add at least one -job NAME=SPEC")
	}
	if *work < 0 {
		return fmt.Errorf("-work %s must not be negative", *work)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("-log-level %q: want debug, info, warn or error", *logLevel)
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))

	// Every job of the replica talks to one leaseapi: keep enough idle
	// connections for all of them (the default keeps two per host).
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 64
	c, err := client.NewClientWithResponses(*apiURL,
		client.WithHTTPClient(&http.Client{Transport: transport}),
		client.WithBearerToken(*token))
	if err != nil {
		return fmt.Errorf("-api %q: %w", *apiURL, err)
	}

	var rec *recorder
	if *record != "" {
		rec, err = openRecorder(*record)
		if err != nil {
			return err
		}
		defer rec.close()
	}
	runner, err := jobs.New(jobs.Config{
		Client:            c,
		Owner:             *owner,
		TTL:               *ttl,
		HeartbeatInterval: *heartbeat,
		RequestTimeout:    *requestTimeout,
		ShutdownTimeout:   *shutdownTimeout,
		OwedPollInterval:  *owedPoll,
		Logger:            logger,
		ReportFunc: func(rep jobs.Report) {
			if rec == nil {
				return
			}
			if err := rec.write(rep); err != nil {
				logger.Error("record run", slog.String("job_id", rep.JobID), slog.Any("error", err))
			}
		},
	})
	if err != nil {
		return err
	}
	var opts []jobs.JobOption
	if *catchUp != 0 {
		opts = append(opts, jobs.CatchUp(*catchUp))
	}
	if *group != "" {
		opts = append(opts, jobs.Group(*group))
	}
	for i, name := range jobFlags.names {
		if err := runner.Add(name, jobFlags.specs[i], simulatedWork(*work), opts...); err != nil {
			return err
		}
	}
	logger.Info("cronreplica started", slog.String("owner", *owner), slog.String("api", *apiURL),
		slog.String("jobs", jobFlags.String()), slog.String("ttl", ttl.String()), slog.String("work", work.String()))
	return runner.Serve(ctx)
}

// simulatedWork sleeps for d, or returns the cancellation cause early.
func simulatedWork(d time.Duration) jobs.Func {
	return func(ctx context.Context) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// record is one line of the -record file.
type record struct {
	Job     string `json:"job"`
	Tick    string `json:"tick"`
	Token   int64  `json:"token"`
	Owner   string `json:"owner"`
	Start   string `json:"start"`
	End     string `json:"end"`
	Outcome string `json:"outcome"`
	// Slot and SlotToken: the group slot the grant took (omitted outside
	// a group).
	Slot      int   `json:"slot,omitempty"`
	SlotToken int64 `json:"slotToken,omitempty"`
}

// recorder appends records to a file opened O_APPEND, one write per line:
// several processes may append to one file, and a line never interleaves
// with another.
type recorder struct {
	mu sync.Mutex
	f  *os.File
}

func openRecorder(path string) (*recorder, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("-record: %w", err)
	}
	return &recorder{f: f}, nil
}

func (r *recorder) write(rep jobs.Report) error {
	line, err := json.Marshal(record{
		Job:       rep.JobID,
		Tick:      api.FormatTime(rep.Tick),
		Token:     rep.Token,
		Owner:     rep.Owner,
		Start:     api.FormatTime(rep.Start),
		End:       api.FormatTime(rep.End),
		Outcome:   string(rep.Result),
		Slot:      rep.Slot,
		SlotToken: rep.SlotToken,
	})
	if err != nil {
		return fmt.Errorf("encode record: %w", err)
	}
	line = append(line, '\n')
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.f.Write(line); err != nil {
		return fmt.Errorf("append record: %w", err)
	}
	return nil
}

func (r *recorder) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.f.Close()
}
