// Command leasebench measures leaseapi against its database floor, in one
// run, on the local Postgres (`make bench`, which runs
// `go run -tags leasebench ./cmd/leasebench`: the build with the naive
// baseline the herd phase compares with).
//
// It creates a fresh database, builds cmd/leaseapi, and for each scenario
// measures the store's own operations called directly (the floor, no HTTP)
// and a separate leaseapi process over keep-alive HTTP at the same
// concurrency, reading the process's peak RSS (VmHWM) and CPU time from
// /proc. Scenarios:
//
//	calibrate  a trivial net/http handler in its own process: the HTTP ceiling here
//	cycle      acquire → heartbeat → release, each worker on a job of its own
//	contended  every worker an owner of its own on 4 shared jobs; a grant is released at once
//	herd       R replicas × J jobs acquire one tick at once; exactly J grants,
//	           with the fast path (default) and the naive path (a -tags leasebench build with LEASEAPI_BENCH_ACQUIRE=naive)
//	batch      the herd with each replica's acquires as one POST /acquire, next to the herd of
//	           single acquires; 1,000-item batches at saturation and their latency at half of it
//	group      cycle and herd with their jobs in concurrency groups with room for every holder,
//	           against the same without, in alternated rounds
//	policy     cycle with its jobs under an alert policy (consecutiveFailures 3; a failure rate over
//	           64 runs), against the same without, in alternated rounds
//	latency    p99 acquire latency, open loop at half the saturation rate of cycle
//	list       GET /leases first and deep keyset page with 1 k, 100 k and 1 M leases
//	rss        leaseapi's peak RSS with 100 k leases and 1,000 concurrent clients
//	sweep      one pass of the tick sweep (SweepTicks, the production batch) over 1 M scheduled
//	           jobs of which 1 k are due, against a pass over the 1 k alone
//	lock       acquire → release on a lock of one's own, leaseapi against etcd and
//	           Redis (durable on disk, fresh servers, interleaved rounds; lock.go)
//
// It prints one table, writes the results as JSON (-out) and, with -doc,
// replaces the results section of docs/performance.md. Timing targets are
// evaluated here, never in tests. The database is dropped at the end.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leaseapi/leaseapi/internal/version"
	"github.com/leaseapi/leaseapi/repo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var err error
	if len(os.Args) == 3 && os.Args[1] == noopServeFlag {
		err = serveNoop(ctx, os.Args[2])
	} else {
		err = run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "leasebench: "+err.Error())
		os.Exit(1)
	}
}

// options are the command-line flags.
type options struct {
	quick             bool
	dsn               string
	concurrency       int
	duration          time.Duration
	warmup            time.Duration
	herdReplicas      int
	herdJobs          int
	herdShuffled      bool
	herdNaive         bool
	leaseapiBin       string
	groupRounds       int
	groupHerdReplicas int
	groupHerdJobs     int
	policyRounds      int
	listSizes         []int
	listDuration      time.Duration
	rssLeases         int
	rssClients        int
	openDuration      time.Duration
	sweepJobs         int
	sweepDue          int
	sweepBatch        int
	lockDuration      time.Duration
	lockRounds        int
	logLevel          string
	out               string
	doc               string
	perfDir           string
	serverEnv         []string
	only              []string
	command           string
}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("leasebench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.quick, "quick", false, "small sizes and short runs for development (one to two minutes); does not update -doc")
	fs.StringVar(&o.dsn, "dsn", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "Postgres server to create the benchmark database on (URL form)")
	fs.IntVar(&o.concurrency, "c", 32, "concurrency C of the closed-loop scenarios (cycle, contended, list)")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "measured time of each closed-loop run")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured time before each closed-loop run")
	fs.IntVar(&o.herdReplicas, "herd-replicas", 200, "replicas of the herd")
	fs.IntVar(&o.herdJobs, "herd-jobs", 1000, "jobs of the herd")
	fs.IntVar(&o.groupRounds, "group-rounds", 2, "rounds of the group phase, each running every scenario with and without groups, in alternating order")
	fs.IntVar(&o.groupHerdReplicas, "group-herd-replicas", 100, "replicas of the group phase's herds")
	fs.IntVar(&o.groupHerdJobs, "group-herd-jobs", 300, "jobs of the group phase's herds (at most 10000, a group's largest limit)")
	fs.IntVar(&o.policyRounds, "policy-rounds", 2, "rounds of the policy phase, each running the cycle without and with each policy, in alternating order")
	fs.BoolVar(&o.herdShuffled, "herd-shuffled", false, "also run the fast-path herd with every replica in its own random job order (slow: few acquires of a job meet, so the coalescer rarely helps)")
	fs.BoolVar(&o.herdNaive, "herd-naive", true, "also run the herd on the naive path (-herd-naive=false for A/B runs of the fast path)")
	fs.StringVar(&o.leaseapiBin, "leaseapi", "", "a leaseapi binary to measure instead of building this tree's, e.g. an older commit's for an A/B (a -tags leasebench build for the naive herd)")
	sizes := fs.String("list-sizes", "1000,100000,1000000", "comma-separated lease counts of the list scenario")
	fs.DurationVar(&o.listDuration, "list-duration", 3*time.Second, "measured time of each list run")
	fs.IntVar(&o.rssLeases, "rss-leases", 100000, "leases in the table during the RSS check")
	fs.IntVar(&o.rssClients, "rss-clients", 1000, "concurrent clients of the RSS check")
	fs.DurationVar(&o.openDuration, "open-duration", 10*time.Second, "duration of the open-loop latency run")
	fs.IntVar(&o.sweepJobs, "sweep-jobs", 1000000, "scheduled jobs in the table during the large sweep pass")
	fs.IntVar(&o.sweepDue, "sweep-due", 1000, "of them due (the small pass has only these)")
	fs.IntVar(&o.sweepBatch, "sweep-batch", repo.DefaultSweepBatch, "the batch of each SweepTicks call (default: the production batch, repo.DefaultSweepBatch)")
	fs.DurationVar(&o.lockDuration, "lock-duration", 15*time.Second, "measured time of each row of the lock scenario")
	fs.IntVar(&o.lockRounds, "lock-rounds", 3, "rounds of the lock scenario (each: leaseapi, etcd, redis; then as many rows of leaseapi-replicated, on a synchronous pair, when root)")
	fs.StringVar(&o.logLevel, "log-level", "info", "LEASEAPI_LOG_LEVEL of the measured leaseapi (info = the default, with the access log)")
	fs.StringVar(&o.out, "out", "", "JSON results file (default bench/results.json; with -quick, leasebench-quick.json in the temporary directory)")
	fs.StringVar(&o.doc, "doc", "", "Markdown page whose results section to replace (e.g. docs/performance.md); ignored with -quick")
	fs.StringVar(&o.perfDir, "perf", "", "directory for a `perf record -g` profile of the leaseapi process of every HTTP row (needs perf); read with perf report -i")
	fs.Func("server-env", "extra KEY=VALUE in the environment of every leaseapi process (repeatable), e.g. GOMEMLIMIT=48MiB", func(kv string) error {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("%q is not KEY=VALUE", kv)
		}
		o.serverEnv = append(o.serverEnv, kv)
		return nil
	})
	only := fs.String("only", "", "comma-separated phases to run ("+strings.Join(phaseNames, ", ")+"; latency needs cycle; console needs chromium); default all")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.quick {
		// Quick sizes, unless a flag says otherwise.
		quick := map[string]func(){
			"duration":            func() { o.duration = time.Second },
			"warmup":              func() { o.warmup = 300 * time.Millisecond },
			"herd-replicas":       func() { o.herdReplicas = 50 },
			"herd-jobs":           func() { o.herdJobs = 100 },
			"group-herd-replicas": func() { o.groupHerdReplicas = 50 },
			"group-herd-jobs":     func() { o.groupHerdJobs = 100 },
			"list-sizes":          func() { *sizes = "1000,20000" },
			"list-duration":       func() { o.listDuration = time.Second },
			"rss-leases":          func() { o.rssLeases = 20000 },
			"rss-clients":         func() { o.rssClients = 200 },
			"open-duration":       func() { o.openDuration = 3 * time.Second },
			"sweep-jobs":          func() { o.sweepJobs = 100000 },
			"lock-duration":       func() { o.lockDuration = 2 * time.Second },
		}
		for name, apply := range quick {
			if !set[name] {
				apply()
			}
		}
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 2 {
			return o, fmt.Errorf("-list-sizes: %q is not a lease count of at least 2", s)
		}
		o.listSizes = append(o.listSizes, n)
	}
	switch {
	case o.concurrency < 1, o.herdReplicas < 1, o.herdJobs < 1, o.rssClients < 1, o.rssLeases < 1, o.groupHerdReplicas < 1, o.groupHerdJobs < 1:
		return o, errors.New("-c, -herd-replicas, -herd-jobs, -group-herd-replicas, -group-herd-jobs, -rss-clients and -rss-leases must be at least 1")
	case o.duration <= 0, o.warmup < 0, o.listDuration <= 0, o.openDuration <= 0, o.lockDuration <= 0:
		return o, errors.New("durations must be positive")
	case o.lockRounds < 1, o.groupRounds < 1, o.policyRounds < 1:
		return o, errors.New("-lock-rounds, -group-rounds and -policy-rounds must be at least 1")
	case o.sweepDue < 1, o.sweepJobs < o.sweepDue, o.sweepJobs > 9_999_999, o.sweepBatch < 1:
		return o, errors.New("-sweep-due and -sweep-batch must be at least 1 and -sweep-jobs between -sweep-due and 9,999,999")
	}
	if *only != "" {
		for _, p := range strings.Split(*only, ",") {
			p = strings.TrimSpace(p)
			if !slices.Contains(phaseNames, p) {
				return o, fmt.Errorf("-only: unknown phase %q (want some of %s)", p, strings.Join(phaseNames, ", "))
			}
			o.only = append(o.only, p)
		}
	}
	if o.out == "" {
		o.out = "bench/results.json"
		if o.quick {
			// Quick numbers are for development: keep them out of the tree.
			o.out = filepath.Join(os.TempDir(), "leasebench-quick.json")
		}
	}
	if o.quick {
		o.doc = ""
	}
	o.command = "go run -tags leasebench ./cmd/leasebench " + strings.Join(args, " ")
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if version.IsFlag(args) {
		_, err := fmt.Fprint(stdout, version.Get())
		return err
	}
	o, err := parseOptions(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if !baselineBuild && o.herdNaive && (len(o.only) == 0 || slices.Contains(o.only, "herd")) {
		return errors.New("the herd phase measures the naive baseline, which only a -tags leasebench build has: " +
			"go run -tags leasebench ./cmd/leasebench (as make bench does), or leave out the naive herd with -herd-naive=false")
	}
	b := &bench{opts: o, log: stderr}
	report, err := b.run(ctx)
	if report != nil {
		printTable(stdout, report)
		if werr := writeJSON(o.out, report); werr != nil {
			err = errors.Join(err, werr)
		} else {
			fmt.Fprintf(stdout, "\nresults: %s\n", o.out)
		}
		if o.doc != "" && err == nil {
			if derr := updateDoc(o.doc, report); derr != nil {
				err = errors.Join(err, derr)
			} else {
				fmt.Fprintf(stdout, "updated: %s\n", o.doc)
			}
		}
	}
	return err
}
