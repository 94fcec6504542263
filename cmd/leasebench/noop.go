package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/leaseapi/leaseapi/internal/pgcluster"
)

// noopServeFlag makes leasebench serve the calibration handler instead of
// benchmarking; the benchmark starts itself with it as a separate process.
const noopServeFlag = "-noop-serve"

// noopBody is about the size of a lease_held problem with its lease.
var noopBody = []byte(`{"type":"https://leaseapi.dev/problems/lease_held","title":"Lease held","status":409,` +
	`"detail":"the lease is held by replica-000 for another run; retry after Retry-After seconds","code":"lease_held",` +
	`"lease":{"jobId":"herd-0000","owner":"replica-000","token":1,"state":"held","acquiredAt":"2026-11-30T08:44:44.144Z",` +
	`"renewedAt":"2026-11-30T08:44:44.144Z","expiresAt":"2026-11-30T08:54:44.144Z","releasedAt":null,"ttlMs":600000,` +
	`"tick":"2026-11-30T08:44:00.000Z","lastCompletedTick":null,"lastOutcome":null}}`)

// serveNoop serves the calibration handler on addr until ctx ends: it
// reads the request body and answers every request with a canned 409, and
// /readyz with 200. It is the ceiling of any handler on this machine with
// this load generator.
func serveNoop(ctx context.Context, addr string) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write(noopBody)
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// startNoop starts this program as the calibration server.
func startNoop(ctx context.Context, logDir string) (*server, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("calibration server: %w", err)
	}
	port, err := pgcluster.PickPort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(exe, noopServeFlag, addr)
	log, err := os.Create(logDir + "/noop.log")
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("calibration server: %w", err)
	}
	s := &server{cmd: cmd, url: "http://" + addr, logPath: log.Name(), done: make(chan error, 1), noDB: true}
	go func() { s.done <- cmd.Wait() }()
	if err := s.waitReady(ctx, 30*time.Second); err != nil {
		_ = s.stop()
		return nil, err
	}
	return s, nil
}
