// Command leaseapi serves the lease API: one small shared HTTP service that
// hands out leases so that exactly one replica of a horizontally scaled cron
// service runs each tick of a job.
//
//	leaseapi            serve (migrations are applied at start)
//	leaseapi migrate    apply the database migrations and exit
//	leaseapi credentials create|list|revoke
//	                    manage the API's credentials on the database
//	leaseapi upgrade status|finalize
//	                    list the instances; turn on a release's gated rules
//	leaseapi version    print the version, commit, commit time and Go (also --version)
//	leaseapi -h         list the commands and every LEASEAPI_ setting
//
// All configuration comes from the environment; see config.go.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/handlers"
	"github.com/leaseapi/leaseapi/internal/metrics"
	"github.com/leaseapi/leaseapi/internal/version"
	"github.com/leaseapi/leaseapi/repo"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/sqlite"
	"github.com/leaseapi/leaseapi/webhook"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, restore the default handling so that a second
	// one ends a shutdown that hangs.
	go func() {
		<-ctx.Done()
		stop()
	}()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "leaseapi: "+oneLine(err.Error()))
		os.Exit(1)
	}
}

// oneLine folds a multi-line error (errors.Join) into one line.
func oneLine(s string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ")
}

// Server timeouts. Each request also gets Config.RequestTimeout from the
// handlers (a batch Config.BatchTimeout); the write timeout leaves room for
// the longer of the two plus writing the answer.
const (
	readHeaderTimeout = 2 * time.Second
	readTimeout       = 5 * time.Second
	writeSlack        = 5 * time.Second
	idleTimeout       = 60 * time.Second
	// maxHeaderBytes makes a request line plus headers above 16 KiB a 431:
	// net/http reads MaxHeaderBytes plus 4096 bytes of slack before it
	// refuses (http.Server.initialReadLimitSize).
	maxHeaderBytes = 16<<10 - 4096

	// postgresMaxOpenConns bounds the pool of one instance.
	postgresMaxOpenConns = 20
	// pruneBatchSize bounds the rows one pruning statement deletes.
	pruneBatchSize = 1000
)

// run is the whole program: main only adds the signals and the exit code.
// ctx ends the server; run returns nil after a clean shutdown.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	command, rest, err := parseArgs(args)
	if err != nil {
		return err
	}
	switch command {
	case "help":
		return usage(stdout)
	case "version":
		_, err := io.WriteString(stdout, version.Get().String())
		return err
	}
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	logger, err := newLogger(cfg, stderr)
	if err != nil {
		return err
	}
	switch command {
	case "migrate":
		return migrate(ctx, cfg, logger)
	case "credentials":
		return credentials(ctx, cfg, logger, rest, stdout)
	case "upgrade":
		return upgrade(ctx, cfg, logger, rest, stdout)
	default:
		return serve(ctx, cfg, logger)
	}
}

// parseArgs returns "serve", "migrate", "credentials" or "upgrade" (with the arguments
// after it), "version" or "help".
func parseArgs(args []string) (string, []string, error) {
	fs := flag.NewFlagSet("leaseapi", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // run prints the usage and the error itself
	fs.Usage = func() {}
	printVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "help", nil, nil
		}
		return "", nil, fmt.Errorf("%w (see leaseapi -h)", err)
	}
	rest := fs.Args()
	if *printVersion {
		if len(rest) > 0 {
			return "", nil, fmt.Errorf("--version takes no command, got %q (see leaseapi -h)", rest)
		}
		return "version", nil, nil
	}
	if len(rest) == 0 {
		return "serve", nil, nil
	}
	switch rest[0] {
	case "serve", "migrate", "version", "help":
		if len(rest) > 1 {
			return "", nil, fmt.Errorf("%s takes no arguments, got %q (see leaseapi -h)", rest[0], rest[1:])
		}
		return rest[0], nil, nil
	case "credentials", "upgrade":
		return rest[0], rest[1:], nil
	}
	return "", nil, fmt.Errorf("unknown command %q (see leaseapi -h)", rest[0])
}

const usageText = `leaseapi hands out leases so that exactly one replica of a horizontally
scaled cron service runs each tick of a job.

Usage:
  leaseapi [serve]    serve the HTTP API; pending migrations are applied first
  leaseapi migrate    apply the database migrations and exit
  leaseapi credentials create --name NAME --role read|lease|admin --scope PREFIX [--scope ...] [--rate N]
                      create a credential on the database and print its token (shown once)
  leaseapi credentials list
                      list the credentials (never a secret)
  leaseapi credentials revoke ID
                      revoke a credential; every instance refuses it within 5 s
  leaseapi upgrade status
                      list the live instances, their versions and the finalized feature level
  leaseapi upgrade finalize
                      turn on the rules of this release once every live instance runs it
  leaseapi version    print the version, commit, commit time and Go (also --version)
  leaseapi help       print this help (also -h, --help)

Settings are read from the environment. With LEASEAPI_DATABASE_URL empty,
leaseapi uses the embedded SQLite store in LEASEAPI_SQLITE_PATH, which serves
a single instance; for several instances, use Postgres.

`

func usage(w io.Writer) error {
	if _, err := io.WriteString(w, usageText); err != nil {
		return err
	}
	return writeSettings(w)
}

// newLogger builds the process's logger. It is passed to every component;
// library packages never use slog's default.
func newLogger(cfg Config, w io.Writer) (*slog.Logger, error) {
	level, err := parseLevel(cfg.LogLevel)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key("LOG_LEVEL"), err)
	}
	opts := &slog.HandlerOptions{Level: level}
	if strings.EqualFold(cfg.LogFormat, "text") {
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return slog.New(slog.NewJSONHandler(w, opts)), nil
}

// store is what run needs of both stores.
type store interface {
	leaseapi.Store
	leaseapi.CredentialStore
	leaseapi.WebhookStore
	leaseapi.IdempotencyStore
	leaseapi.Registry
	Migrate(ctx context.Context) error
}

// openStore opens the configured store and applies pending migrations (under
// an advisory lock on Postgres, so instances starting together are safe).
// A Postgres that is unreachable or not (yet) a writable primary is retried
// with backoff for up to START_TIMEOUT (see retryUnavailable).
func openStore(ctx context.Context, cfg Config, logger *slog.Logger, observer leaseapi.Observer) (store, error) {
	var (
		s   store
		pg  *postgres.Store
		err error
	)
	if cfg.DatabaseURL != "" {
		logger.Info("using the Postgres store", slog.String("database", describeDSN(cfg.DatabaseURL)),
			slog.String("durability", cfg.Durability))
		pg, err = openPostgres(ctx, postgres.Config{
			DSN:          cfg.DatabaseURL,
			Logger:       logger,
			MaxOpenConns: postgresMaxOpenConns,
			Observer:     observer,
			Durability:   postgres.Durability(cfg.Durability),
			MaxTickAhead: cfg.MaxTickAhead,
		})
		s = pg
	} else {
		logger.Info("using the embedded SQLite store",
			slog.String("path", cfg.SQLitePath),
			slog.String("note", "the embedded store serves a single leaseapi instance; use Postgres ("+key("DATABASE_URL")+") for several"))
		s, err = sqlite.Open(ctx, sqlite.Config{Path: cfg.SQLitePath, Logger: logger, Observer: observer,
			MaxTickAhead: cfg.MaxTickAhead})
	}
	if err != nil {
		return nil, err
	}
	// Each attempt is not bounded by a timeout: waiting for another
	// instance's migration lock is expected. A signal (ctx) ends the wait.
	if err := retryUnavailable(ctx, "migrate", cfg.StartTimeout, logger, s.Migrate); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	if pg != nil {
		checkReplication(ctx, pg, logger)
	}
	return s, nil
}

// Start-up retries back off from startBackoffMin to startBackoffMax.
const (
	startBackoffMin = 250 * time.Millisecond
	startBackoffMax = 5 * time.Second
)

// retryUnavailable runs fn until it succeeds, fails with an error other
// than leaseapi.ErrUnavailable, or ctx ends, waiting between attempts with
// a doubling backoff; it gives up (with the last error) when the next
// attempt would start later than timeout after the first. A database that
// is unreachable or read-only at start is usually a failover in progress,
// which takes seconds; one that stays so is a configuration error, and
// exiting with the error (Kubernetes restarts the pod with its own backoff)
// shows it where an operator looks, before a startup probe kills the
// process without a word.
func retryUnavailable(ctx context.Context, step string, timeout time.Duration, logger *slog.Logger, fn func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	wait := startBackoffMin
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil || !errors.Is(err, leaseapi.ErrUnavailable) {
			return err
		}
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("%s: the database stayed unavailable for %s (%s): %w", step, timeout, key("START_TIMEOUT"), err)
		}
		logger.Warn("database unavailable at start; retrying",
			slog.String("step", step), slog.Int("attempt", attempt),
			slog.Duration("retry_in", wait), slog.Any("error", err))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: %w (last error: %w)", step, ctx.Err(), err)
		case <-t.C:
		}
		wait = min(2*wait, startBackoffMax)
	}
}

// replicationCheckTimeout bounds the start-up check of the replication.
const replicationCheckTimeout = 5 * time.Second

// checkReplication logs what the database reports about its replication,
// and warns when it may lose acknowledged commits: a Postgres crash with
// synchronous_commit off lost acknowledged token increments, and with
// replicated durability a primary without a synchronous standby answers
// 503. It warns and serves (it may be a test database); the replication
// monitor keeps checking.
func checkReplication(ctx context.Context, pg *postgres.Store, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, replicationCheckTimeout)
	defer cancel()
	st, err := pg.CheckReplication(ctx)
	if err != nil {
		logger.Warn("cannot read the database's replication status", slog.Any("error", err))
		return
	}
	logger.LogAttrs(ctx, slog.LevelInfo, "database replication", st.LogAttrs()...)
	if !st.InRecovery && st.SynchronousStandbyNames == "" {
		logger.Info("the primary has no synchronous standby: a failover can lose acknowledged grants and fencing tokens (see docs/high-availability.md)")
	}
	if st.SyncStandbys < 0 {
		logger.Warn("the database role cannot see its standbys: grant it pg_monitor for leaseapi_database_sync_standbys")
	}
	if !st.InRecovery && st.SynchronousCommit != "on" && st.SynchronousCommit != "remote_apply" {
		// local and remote_write wait for less than on does; off waits for nothing.
		logger.Warn("synchronous_commit is not on: a database crash or failover can lose acknowledged grants and fencing tokens; set synchronous_commit = on",
			slog.String("synchronous_commit", st.SynchronousCommit))
	}
	if derr := st.Durable(); derr != nil && pg.Durability() == postgres.DurabilityReplicated {
		logger.Warn("replicated durability: lease calls answer 503 unavailable and /readyz fails until the primary is durable",
			slog.String("reason", derr.Error()))
	}
}

// servedStore is the store the handlers serve: s with at most MAX_IN_FLIGHT
// lease calls at once (repo.LimitCalls sheds the rest with a fast 503) and
// (except in the benchmark's naive baseline) concurrent acquires of one job in this process
// decided by one store call (repo.CoalesceAcquires), which turns the tick
// herd into about one database call per job. The coalescer sits above the
// limit, so the acquires it decides together take one slot; it refuses a
// follower's tick ahead of the clock with the store's maxTickAhead.
func servedStore(s leaseapi.Store, maxInFlight int, maxTickAhead time.Duration, naive bool) leaseapi.Store {
	limited := repo.LimitCalls(s, maxInFlight)
	if naive {
		return limited
	}
	return repo.CoalesceAcquires(limited, maxTickAhead)
}

// describeDSN names the database without its credentials or parameters:
// host and database of a URL, nothing for a key=value DSN (it may hold a
// password anywhere).
func describeDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "(key=value DSN)"
	}
	return u.Host + u.Path
}

func migrate(ctx context.Context, cfg Config, logger *slog.Logger) error {
	s, err := openStore(ctx, cfg, logger, nil)
	if err != nil {
		return err
	}
	logger.Info("migrations are up to date")
	return s.Close()
}

// serverLimits are the http.Server's protections against slow and
// oversized clients.
type serverLimits struct {
	readHeaderTimeout, readTimeout, writeSlack, idleTimeout time.Duration
	maxHeaderBytes                                          int
	// certCheckInterval: see the constant.
	certCheckInterval time.Duration
}

// defaultServerLimits are the limits of every real server. Only tests pass
// others to serveWith: shorter timeouts cut slow clients without making the
// tests wait seconds.
func defaultServerLimits() serverLimits {
	return serverLimits{
		readHeaderTimeout: readHeaderTimeout,
		readTimeout:       readTimeout,
		writeSlack:        writeSlack,
		idleTimeout:       idleTimeout,
		maxHeaderBytes:    maxHeaderBytes,
		certCheckInterval: certCheckInterval,
	}
}

// serve runs the HTTP server until ctx ends, then shuts down in order:
// requests in flight (bounded by SHUTDOWN_TIMEOUT), the background loops,
// the store.
func serve(ctx context.Context, cfg Config, logger *slog.Logger) error {
	setMemoryLimit(logger, memlimit.FromCgroup)
	defer keepHeapFloor(logger, heapFloor)()
	return serveWith(ctx, cfg, logger, defaultServerLimits())
}

// serveWith is serve with the given server limits.
func serveWith(ctx context.Context, cfg Config, logger *slog.Logger, limits serverLimits) (err error) {
	tlsConfig, err := newTLSConfig(cfg, logger, limits.certCheckInterval)
	if err != nil {
		return err
	}
	// /metrics serves the handlers' collectors, the lease metrics the store
	// tells, and the Go runtime and process.
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	build := version.Get()
	if err := metrics.RegisterBuildInfo(registry, build); err != nil {
		return err
	}
	leaseMetrics, err := metrics.New(registry)
	if err != nil {
		return err
	}
	if cfg.JobMetrics {
		if err := leaseMetrics.EnableJobSeries(registry, cfg.JobMetricsLimit); err != nil {
			return err
		}
		// Group names are named like job ids: their series go with the
		// per-job ones, behind the metrics token.
		if err := leaseMetrics.EnableGroupSeries(registry, metrics.DefaultGroupSeriesLimit); err != nil {
			return err
		}
	}
	s, err := openStore(ctx, cfg, logger, leaseMetrics)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := s.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close store: %w", cerr))
		}
	}()

	if len(cfg.APITokens) == 0 && len(cfg.AdminTokens) == 0 && !apiClosed(ctx, s) {
		if cfg.Open {
			logger.Warn("no credential or token exists and " + key("OPEN") + " is true: the API is open to anyone who can reach it; " +
				"create a credential (leaseapi credentials create) or set " + key("API_TOKENS") + " and " + key("ADMIN_TOKENS"))
		} else {
			logger.Warn("no credential or token exists: the API answers only requests from this host to localhost until a credential " +
				"is created (leaseapi credentials create); set " + key("OPEN") + "=true to serve every peer without one")
		}
	}
	warnFastSchedules(ctx, s, cfg.MinTTL, logger)
	reportJobsAhead(ctx, s, cfg.MaxTickAhead, logger)
	sealer, err := webhook.NewSealer(cfg.WebhookKey) // validated with the configuration
	if err != nil {
		return fmt.Errorf("%s: %w", key("WEBHOOK_KEY"), err)
	}
	if sealer == nil {
		logger.Warn(key("WEBHOOK_KEY") + " is not set: webhook signing secrets and URLs are stored as given, so a copy of the " +
			"database is enough to sign messages its receivers trust and to post to its Slack URLs; set it to the output of " +
			"openssl rand -base64 32 (webhooks created before then stay readable)")
	}
	if cfg.WebhookAllowPrivate {
		logger.Warn(key("WEBHOOK_ALLOW_PRIVATE") + "=true: webhooks may reach loopback, private and link-local addresses, " +
			"this host and its network included")
	}
	webhookMetrics, err := metrics.NewWebhooks(registry)
	if err != nil {
		return err
	}

	gate, recorder, err := startInstance(ctx, s, cfg.StartTimeout, logger)
	if err != nil {
		return err
	}
	loops, err := backgroundLoops(cfg, s, leaseMetrics, webhookMetrics, sealer, logger)
	if err != nil {
		return err
	}
	// The recorder stops last of the loops' start order; it deletes the
	// record once the server has drained.
	loops = append(loops, recorder)
	if pg, ok := s.(*postgres.Store); ok {
		monitor, err := replicationMonitor(pg, registry, logger)
		if err != nil {
			return err
		}
		loops = append(loops, monitor)
	}

	handler := handlers.New(servedStore(s, cfg.MaxInFlight, cfg.MaxTickAhead, naiveAcquire()), handlers.Options{
		DefaultTTL:     cfg.DefaultTTL,
		MinTTL:         cfg.MinTTL,
		MaxTTL:         cfg.MaxTTL,
		RequestTimeout: cfg.RequestTimeout,
		BatchTimeout:   cfg.BatchTimeout,
		Version:        build.Version,
		APITokens:      cfg.APITokens,
		AdminTokens:    cfg.AdminTokens,
		// The credentials are read from the store itself, not through the
		// wrappers of servedStore, which keep no credentials.
		Credentials:  s,
		Logger:       logger,
		Registry:     registry,
		MetricsToken: cfg.MetricsToken,
		GroupMetrics: cfg.JobMetrics,
		MissedGrace:  cfg.MissedGrace,
		TriggerGrace: cfg.TriggerGrace,
		RateLimit:    cfg.RateLimit,
		// A repair undoes the marks of ticks past this window, and never
		// back past the history kept.
		MaxTickAhead:     cfg.MaxTickAhead,
		HistoryRetention: cfg.HistoryRetention,
		// Like the credentials, from the store itself.
		Webhooks:            s,
		WebhookSealer:       sealer,
		WebhookAllowPrivate: cfg.WebhookAllowPrivate,
		Open:                cfg.Open,
		// Like the credentials, from the store itself.
		Idempotency: s,
		// The rules this build knows stay off until the database is
		// finalized for them (startInstance).
		Gate: gate,
	})
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: limits.readHeaderTimeout,
		ReadTimeout:       limits.readTimeout,
		WriteTimeout:      max(cfg.RequestTimeout, cfg.BatchTimeout) + limits.writeSlack,
		IdleTimeout:       limits.idleTimeout,
		MaxHeaderBytes:    limits.maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		TLSConfig:         tlsConfig,
	}

	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}

	// The loops outlive ctx: they stop after the server has drained.
	loopCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLoops()
	var loopsDone sync.WaitGroup
	for _, loop := range loops {
		loopsDone.Go(func() { loop.Run(loopCtx) })
	}

	serveErr := make(chan error, 1)
	go func() { serveErr <- serveOn(srv, ln) }()
	logger.Info("listening",
		slog.String("addr", ln.Addr().String()),
		slog.Bool("tls", tlsConfig != nil),
		slog.String("default_ttl", cfg.DefaultTTL.String()),
		slog.String("min_ttl", cfg.MinTTL.String()),
		slog.String("max_ttl", cfg.MaxTTL.String()),
		slog.String("request_timeout", cfg.RequestTimeout.String()),
		slog.String("batch_timeout", cfg.BatchTimeout.String()),
		slog.String("history_retention", cfg.HistoryRetention.String()),
		slog.Int("max_in_flight", cfg.MaxInFlight))
	if naiveAcquire() {
		logger.Warn("benchmark build: every acquire takes the row lock and nothing is coalesced (the naive baseline)")
	}

	select {
	case <-ctx.Done():
		logger.Info("shutting down", slog.String("timeout", cfg.ShutdownTimeout.String()))
	case err = <-serveErr:
		// Serve never returns nil; it failed before any Shutdown.
		err = fmt.Errorf("serve: %w", err)
		logger.Error("server failed", slog.Any("error", err))
	}

	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if serr := srv.Shutdown(shutdownCtx); serr != nil {
		logger.Warn("requests still in flight at the shutdown deadline; closing their connections", slog.Any("error", serr))
		_ = srv.Close()
	}
	stopLoops()
	loopsDone.Wait()
	if err == nil {
		logger.Info("stopped")
	}
	return err
}

// replicationMonitor registers the database metrics and returns the loop
// that keeps them (and, with replicated durability, the store's consent to
// acknowledge) up to date.
func replicationMonitor(pg *postgres.Store, reg prometheus.Registerer, logger *slog.Logger) (loop, error) {
	dm, err := metrics.NewDatabase(reg, pg.CommitWaitsCancelled)
	if err != nil {
		return nil, err
	}
	report := func(st postgres.ReplicationStatus) { dm.SetReplication(st.Timeline, st.SyncStandbys) }
	ctx, cancel := context.WithTimeout(context.Background(), replicationCheckTimeout)
	defer cancel()
	if st, err := pg.CheckReplication(ctx); err == nil {
		report(st)
	}
	return postgres.NewReplicationMonitor(pg, 0, report, logger), nil
}

// jobsAheadLogged bounds the job ids the start's report of jobs ahead names.
const jobsAheadLogged = 20

// jobsAheadTimeout bounds the start's count of jobs ahead.
const jobsAheadTimeout = 10 * time.Second

// reportJobsAhead warns, at start, of the jobs whose stored marks lie
// later than the database clock plus window: a replica whose clock was
// fast left them, before such ticks were refused, and every later tick of
// such a job may be refused tick_done until it is repaired. A failed count
// is logged and does not stop the start; leaseapi_jobs_ticks_ahead counts
// them from then on.
func reportJobsAhead(ctx context.Context, s leaseapi.Store, window time.Duration, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, jobsAheadTimeout)
	defer cancel()
	ja, err := s.JobsAhead(ctx, window, jobsAheadLogged)
	if err != nil {
		logger.Warn("counting the jobs with ticks ahead of the clock failed", slog.Any("error", err))
		return
	}
	if ja.Count == 0 {
		return
	}
	logger.Warn("jobs have ticks ahead of the database clock by more than "+key("MAX_TICK_AHEAD")+
		" (a replica's clock was fast); repair each with POST /leases/{jobId}/repair or leasectl repair JOB",
		slog.Int64("count", ja.Count), slog.Any("job_ids", ja.JobIDs), slog.Bool("more", ja.Count > int64(len(ja.JobIDs))))
}

// loop is a background loop of the service; Run returns when ctx ends.
type loop interface{ Run(ctx context.Context) }

// backgroundLoops are the service's loops: the run-history pruner, the
// tick sweeper, the refresher of the gauges and the webhook deliverer.
// Each is safe to run on every instance at once.
func backgroundLoops(cfg Config, s store, m *metrics.Leases, wm *metrics.Webhooks, sealer *webhook.Sealer, logger *slog.Logger) ([]loop, error) {
	pruner, err := repo.NewRunPruner(s, repo.RunPrunerConfig{
		Retention: cfg.HistoryRetention,
		Interval:  cfg.PruneInterval,
		BatchSize: pruneBatchSize,
	}, logger)
	if err != nil {
		return nil, err
	}
	sweeper, err := repo.NewTickSweeper(s, repo.TickSweeperConfig{Interval: cfg.MissedSweep}, logger)
	if err != nil {
		return nil, err
	}
	stats, err := metrics.NewStatsRefresher(s, m, cfg.StatsInterval, logger)
	if err != nil {
		return nil, err
	}
	stats.CountOutbox(s, wm)
	stats.CountJobsAhead(cfg.MaxTickAhead)
	// Every instance delivers; each attempt is claimed by one of them.
	deliverer, err := repo.NewWebhookDeliverer(s, repo.WebhookDelivererConfig{
		AllowPrivate: cfg.WebhookAllowPrivate,
		Timeout:      cfg.WebhookTimeout,
		PublicURL:    cfg.PublicURL,
		Sealer:       sealer,
		DataFunc:     api.MarshalWebhookData,
		Observer:     wm,
	}, logger)
	if err != nil {
		return nil, err
	}
	return []loop{pruner, sweeper, stats, deliverer}, nil
}
