package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/leaseapi/leaseapi/repo/repotest"
)

// signalHandler is a slog handler that tells ch about each record whose
// message is msg.
type signalHandler struct {
	slog.Handler
	msg string
	ch  chan<- slog.Record
}

func (h signalHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case h.ch <- r:
		default:
		}
	}
	return h.Handler.Handle(ctx, r)
}

// A database that refuses connections at start (as a node does while it
// starts up or recovers, SQLSTATE 55000/57P03; a primary being promoted is
// read-only, 25006, which the store maps the same way) is retried, not the
// end of the process: the start completes once the database accepts.
func TestStartRetriesAnUnavailableDatabase(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(repotest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("leaseapi_start_retry_%d", os.Getpid())
	u.Path = "/postgres"
	admin, err := sql.Open("postgres", u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() }) // after the DROP below
	exec := func(q string) {
		t.Helper()
		if _, err := admin.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec("DROP DATABASE IF EXISTS " + pq.QuoteIdentifier(name) + " WITH (FORCE)")
	exec("CREATE DATABASE " + pq.QuoteIdentifier(name))
	t.Cleanup(func() { exec("DROP DATABASE IF EXISTS " + pq.QuoteIdentifier(name) + " WITH (FORCE)") })
	exec("ALTER DATABASE " + pq.QuoteIdentifier(name) + " ALLOW_CONNECTIONS false")

	retrying := make(chan slog.Record, 1)
	logs := new(strings.Builder)
	logger := slog.New(signalHandler{Handler: slog.NewTextHandler(logs, nil), msg: "database unavailable at start; retrying", ch: retrying})
	cfg := serveConfig(t)
	u.Path = "/" + name
	cfg.DatabaseURL = u.String()
	cfg.StartTimeout = waitTimeout

	opened := make(chan error, 1)
	go func() {
		s, err := openStore(t.Context(), cfg, logger, nil)
		if err == nil {
			err = s.Close()
		}
		opened <- err
	}()
	select {
	case r := <-retrying:
		var step string
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "step" {
				step = a.Value.String()
			}
			return true
		})
		if step != "migrate" {
			t.Errorf("retried step %q, want migrate", step)
		}
	case err := <-opened:
		t.Fatalf("openStore on a database that refuses connections returned %v without retrying\nlogs:\n%s", err, logs)
	}
	exec("ALTER DATABASE " + pq.QuoteIdentifier(name) + " ALLOW_CONNECTIONS true")
	if err := <-opened; err != nil {
		t.Fatalf("openStore after the database accepted connections: %v\nlogs:\n%s", err, logs)
	}
}

// A database that stays unavailable ends the start after START_TIMEOUT,
// with an error that names it.
func TestStartGivesUpAfterStartTimeout(t *testing.T) {
	t.Parallel()
	cfg := serveConfig(t)
	cfg.DatabaseURL = "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2"
	cfg.StartTimeout = time.Second
	_, err := openStore(t.Context(), cfg, slog.New(slog.DiscardHandler), nil)
	if err == nil || !strings.Contains(err.Error(), "LEASEAPI_START_TIMEOUT") {
		t.Fatalf("openStore with an unreachable database = %v, want an error naming LEASEAPI_START_TIMEOUT", err)
	}
}

// With replicated durability on a primary without a synchronous standby
// (the single test server), leaseapi starts and serves /healthz, but lease
// calls answer 503 unavailable and /readyz says why; /metrics shows the
// replication it found.
func TestServeReplicatedWithoutStandby(t *testing.T) {
	t.Parallel()
	cfg := serveConfig(t)
	cfg.DatabaseURL = repotest.PostgresURL(t)
	cfg.Durability = "replicated"
	srv := startServe(t, cfg)

	if got := do(t, http.MethodGet, srv.url+"/healthz", ""); got.status != http.StatusOK {
		t.Errorf("GET /healthz = %d, want 200", got.status)
	}
	got := do(t, http.MethodPost, srv.url+"/leases/replicated-"+t.Name()+"/acquire", `{"owner":"replica-a","ttlMs":30000}`)
	const why = "replicated durability: the primary has no synchronous standby (synchronous_standby_names is empty)"
	if detail, _ := got.body["detail"].(string); got.status != http.StatusServiceUnavailable || got.body["code"] != "unavailable" ||
		!strings.Contains(detail, why) || got.header.Get("Retry-After") == "" {
		t.Errorf("acquire = %d %v (Retry-After %q), want 503 unavailable whose detail says %q", got.status, got.body, got.header.Get("Retry-After"), why)
	}
	// /readyz fails and says why, and so does its log line.
	if ready := do(t, http.MethodGet, srv.url+"/readyz", ""); ready.status != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz = %d %v, want 503", ready.status, ready.body)
	} else if detail, _ := ready.body["detail"].(string); !strings.Contains(detail, why) {
		t.Errorf("GET /readyz detail = %q, want it to say %q", detail, why)
	}
	if !strings.Contains(srv.logs.String(), "synchronous_standby_names is empty") {
		t.Errorf("no log line says the primary has no synchronous standby\nlogs:\n%s", srv.logs)
	}
	if recs := srv.logs.records(t, "replicated durability: lease calls answer 503 unavailable and /readyz fails until the primary is durable"); len(recs) != 1 {
		t.Errorf("start-up warning about replicated durability: got %v, want one\nlogs:\n%s", recs, srv.logs)
	}
	resp, err := httpClient.Get(srv.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	metrics := string(raw)
	for _, line := range []string{"leaseapi_database_timeline 1", "leaseapi_database_sync_standbys 0", "leaseapi_commit_waits_cancelled_total 0"} {
		if !strings.Contains(metrics, "\n"+line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
}
