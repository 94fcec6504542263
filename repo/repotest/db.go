package repotest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/ory/dockertest/v3"
	"github.com/ory/dockertest/v3/docker"

	"github.com/leaseapi/leaseapi/repo/postgres"
)

const (
	// EnvDatabaseURL names the environment variable that points the tests at a
	// Postgres server. The harness creates and drops its databases there; the
	// database named in the URL is only used to connect.
	EnvDatabaseURL = "LEASEAPI_TEST_DATABASE_URL"

	// LocalDatabaseURL is the server tried when EnvDatabaseURL is not set.
	LocalDatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

	// probeTimeout bounds each attempt to reach a server, so that a missing
	// server costs seconds, not the test timeout.
	probeTimeout = 2 * time.Second
	// setupTimeout bounds CREATE DATABASE plus the migrations, and DROP.
	setupTimeout = 2 * time.Minute

	// The Docker fallback: the image of the production database, and the
	// password the container is started with.
	dockerRepository = "postgres"
	dockerTag        = "15"
	dockerPassword   = "leaseapi"
	// dockerMaxWait bounds how long the container may take to accept
	// connections (the first start pulls the image).
	dockerMaxWait = 3 * time.Minute

	// Database identifiers cannot be bind parameters; the names are built by
	// databaseName from [a-z0-9_] only and quoted with pq.QuoteIdentifier.
	createDatabaseSQL = `CREATE DATABASE %s`
	dropDatabaseSQL   = `DROP DATABASE IF EXISTS %s WITH (FORCE)`
)

// The harness state, written by WrapTestMain before m.Run and only read
// afterwards, so tests read it without a lock.
var (
	wrapped     bool
	databaseURL string
	serverURL   string       // the server databaseURL is on
	extraDBs    atomic.Int64 // numbers the databases of NewPostgresURL
)

// WrapTestMain runs the tests of a package against a fresh Postgres database.
// Call it from the package's TestMain:
//
//	func TestMain(m *testing.M) { repotest.WrapTestMain(m) }
//
// It finds a server (see the package documentation for the search order),
// creates a database named after the test binary and the process id, applies
// the Postgres migrations, runs the tests, drops the database and exits with
// the tests' exit code. Without a server it prints one line saying what to do
// and exits 1. With -short it sets nothing up: PostgresURL then skips.
func WrapTestMain(m *testing.M) {
	os.Exit(wrapTestMain(m))
}

func wrapTestMain(m *testing.M) int {
	// testing.Short reads the flags, which m.Run would parse only later.
	flag.Parse()
	wrapped = true
	if testing.Short() {
		return m.Run()
	}

	server, stop, err := findServer()
	if err != nil {
		fmt.Fprintf(os.Stderr, "repotest: %v\n", err)
		return 1
	}
	defer stop()

	name := databaseName(os.Args[0], os.Getpid())
	dsn, err := createDatabase(server, name)
	if err != nil {
		fmt.Fprintf(os.Stderr, "repotest: %v\n", err)
		return 1
	}
	defer func() {
		if err := dropDatabase(server, name); err != nil {
			// Not a test failure, but a leaked database should not go unnoticed.
			fmt.Fprintf(os.Stderr, "repotest: warning: %v\n", err)
		}
	}()

	databaseURL, serverURL = dsn, server
	return m.Run()
}

// PostgresURL returns the DSN of the database WrapTestMain created for this
// test package. It skips the test in -short mode and fails it when the
// package's TestMain does not call WrapTestMain.
func PostgresURL(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping database test in -short mode")
	}
	if !wrapped || databaseURL == "" {
		t.Fatal("repotest: no test database: add `func TestMain(m *testing.M) { repotest.WrapTestMain(m) }` to this package")
	}
	return databaseURL
}

// NewPostgresURL creates another fresh, migrated database on the test
// server, for a test whose data must not be seen by the other tests of the
// package (credentials close the API of every instance on a database), and
// drops it when the test ends.
func NewPostgresURL(t testing.TB) string {
	t.Helper()
	PostgresURL(t) // skips or fails like it
	name := fmt.Sprintf("%s_%d", databaseName(os.Args[0], os.Getpid()), extraDBs.Add(1))
	dsn, err := createDatabase(serverURL, name)
	if err != nil {
		t.Fatalf("repotest: %v", err)
	}
	t.Cleanup(func() {
		if err := dropDatabase(serverURL, name); err != nil {
			t.Errorf("repotest: %v", err)
		}
	})
	return dsn
}

// findServer returns the DSN of a Postgres server the harness may create
// databases on, and a function that stops the server if the harness started
// it.
func findServer() (dsn string, stop func(), err error) {
	noop := func() {}

	if env := os.Getenv(EnvDatabaseURL); env != "" {
		// An explicit choice is never overridden by a fallback.
		if err := probe(env); err != nil {
			return "", nil, fmt.Errorf("%s is set but its server does not answer: %w", EnvDatabaseURL, err)
		}
		return env, noop, nil
	}

	localErr := probe(LocalDatabaseURL)
	if localErr == nil {
		return LocalDatabaseURL, noop, nil
	}

	pool, dockerErr := dockerPool()
	if dockerErr == nil {
		dsn, stop, err := startDocker(pool)
		if err != nil {
			return "", nil, fmt.Errorf("no Postgres on 127.0.0.1:5432 and the Docker fallback failed: %w", err)
		}
		return dsn, stop, nil
	}

	return "", nil, fmt.Errorf("no Postgres for the tests (127.0.0.1:5432: %v; Docker: %v): "+
		"set %s, start Postgres on 127.0.0.1:5432 (user postgres, trust auth), "+
		"or run `make test`, which installs one on Debian; -short skips the database tests",
		localErr, dockerErr, EnvDatabaseURL)
}

// probe connects to dsn and pings it, within probeTimeout.
func probe(dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()

	db, err := sqlx.Open("postgres", withConnectTimeout(dsn))
	if err != nil {
		return err
	}
	defer db.Close()
	return db.PingContext(ctx)
}

// dockerPool returns a dockertest pool whose daemon answers a ping.
func dockerPool() (*dockertest.Pool, error) {
	pool, err := dockertest.NewPool("")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	if err := pool.Client.PingWithContext(ctx); err != nil {
		return nil, fmt.Errorf("no daemon answers: %w", err)
	}
	return pool, nil
}

// startDocker runs postgres:15 and waits until it accepts connections.
func startDocker(pool *dockertest.Pool) (dsn string, stop func(), err error) {
	res, err := pool.RunWithOptions(&dockertest.RunOptions{
		Repository: dockerRepository,
		Tag:        dockerTag,
		Env:        []string{"POSTGRES_PASSWORD=" + dockerPassword},
	}, func(hc *docker.HostConfig) {
		hc.AutoRemove = true
		hc.RestartPolicy = docker.RestartPolicy{Name: "no"}
	})
	if err != nil {
		return "", nil, fmt.Errorf("start %s:%s: %w", dockerRepository, dockerTag, err)
	}
	stop = func() {
		if err := pool.Purge(res); err != nil {
			fmt.Fprintf(os.Stderr, "repotest: warning: purge container %s: %v\n", res.Container.ID, err)
		}
	}
	// Should the test binary be killed before Purge, Docker removes the
	// container anyway once the test timeout has passed.
	if err := res.Expire(expireSeconds()); err != nil {
		stop()
		return "", nil, fmt.Errorf("set container expiry: %w", err)
	}

	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword("postgres", dockerPassword),
		Host:     res.GetHostPort("5432/tcp"),
		Path:     "/postgres",
		RawQuery: "sslmode=disable",
	}
	dsn = u.String()
	pool.MaxWait = dockerMaxWait
	if err := pool.Retry(func() error { return probe(dsn) }); err != nil {
		stop()
		return "", nil, fmt.Errorf("wait for the container's Postgres: %w", err)
	}
	return dsn, stop, nil
}

// expireSeconds is the container's lifetime: the test timeout plus a margin.
func expireSeconds() uint {
	timeout := time.Hour
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 0 {
			timeout = d
		}
	}
	return uint((timeout + 5*time.Minute) / time.Second)
}

// createDatabase creates database name on server, applies the Postgres
// migrations to it and returns its DSN.
func createDatabase(server, name string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()

	admin, err := sqlx.Open("postgres", withConnectTimeout(server))
	if err != nil {
		return "", fmt.Errorf("connect to the test server: %w", err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, fmt.Sprintf(createDatabaseSQL, pq.QuoteIdentifier(name))); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}

	dsn, err := withDatabase(server, name)
	if err == nil {
		err = migrate(ctx, dsn)
	}
	if err != nil {
		if _, dropErr := admin.ExecContext(ctx, fmt.Sprintf(dropDatabaseSQL, pq.QuoteIdentifier(name))); dropErr != nil {
			err = errors.Join(err, fmt.Errorf("drop database %s: %w", name, dropErr))
		}
		return "", err
	}
	return dsn, nil
}

// migrate applies the migrations through the store itself, so the tests run
// on exactly the schema the service creates.
func migrate(ctx context.Context, dsn string) error {
	store, err := postgres.Open(ctx, postgres.Config{
		DSN:    dsn,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return fmt.Errorf("open the test database: %w", err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate the test database: %w", err)
	}
	return nil
}

// dropDatabase drops database name, disconnecting whoever is still connected.
func dropDatabase(server, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()

	admin, err := sqlx.Open("postgres", withConnectTimeout(server))
	if err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, fmt.Sprintf(dropDatabaseSQL, pq.QuoteIdentifier(name))); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// databaseName names a package's test database after its test binary
// ("repo.test" → "repo", as River names its schemas) and the process id, so
// that packages, and parallel runs of one package, never share a database.
// The result is a valid, lower-case Postgres identifier of at most 63 bytes.
func databaseName(binary string, pid int) string {
	base := filepath.Base(binary)
	base = strings.TrimSuffix(base, ".exe")
	base = strings.TrimSuffix(base, ".test")

	var b strings.Builder
	for _, r := range strings.ToLower(base) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	pkg := strings.Trim(b.String(), "_")
	if pkg == "" {
		pkg = "pkg"
	}
	const maxPkg = 30 // "leaseapi_test_" + 30 + "_" + a pid stays under 63 bytes
	if len(pkg) > maxPkg {
		pkg = pkg[:maxPkg]
	}
	return "leaseapi_test_" + pkg + "_" + strconv.Itoa(pid)
}

// withDatabase returns dsn (a postgres:// URL or a key=value string) with its
// database replaced by name.
func withDatabase(dsn, name string) (string, error) {
	if !isURL(dsn) {
		// lib/pq keeps the last value of a repeated key.
		return dsn + " dbname=" + name, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("parse %s: %w", EnvDatabaseURL, err)
	}
	u.Path, u.RawPath = "/"+name, ""
	q := u.Query()
	q.Del("dbname")
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// withConnectTimeout adds connect_timeout to dsn unless it has one, so that
// an unreachable server fails the probe instead of hanging it.
func withConnectTimeout(dsn string) string {
	const key = "connect_timeout"
	seconds := strconv.Itoa(int(probeTimeout / time.Second))
	if !isURL(dsn) {
		if strings.Contains(dsn, key+"=") {
			return dsn
		}
		return dsn + " " + key + "=" + seconds
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn // sql.Open reports the parse error
	}
	q := u.Query()
	if q.Has(key) {
		return dsn
	}
	q.Set(key, seconds)
	u.RawQuery = q.Encode()
	return u.String()
}

func isURL(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}
