package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"
)

// These tests run the drivers against real servers, started as the
// benchmark starts them (fresh, loopback, temporary directory). They need
// the etcd and redis-server binaries; `make test` installs them first.

func startTestServer(t *testing.T, system string) *server {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real " + system + " server")
	}
	bin := map[string]string{"etcd": "etcd", "redis": "redis-server"}[system]
	if _, err := exec.LookPath(bin); err != nil {
		t.Fatalf("%s not on PATH: run bash scripts/ensure-packages.sh etcd:etcd-server redis-server:redis-server (from the repository root)", bin)
	}
	ctx, cancel := context.WithTimeout(t.Context(), readyTimeout)
	defer cancel()
	srv, err := startServer(ctx, system)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.stop(); err != nil {
			t.Error(err)
		}
	})
	return srv
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestServersReportDurability(t *testing.T) {
	t.Parallel()
	etcd := startTestServer(t, "etcd")
	if !strings.HasPrefix(etcd.Version, "3.") {
		t.Errorf("etcd version %q, want 3.x", etcd.Version)
	}
	redis := startTestServer(t, "redis")
	if want := `appendonly "yes", appendfsync "always", save ""`; redis.Durability != want {
		t.Errorf("redis durability %q, want %q", redis.Durability, want)
	}
}

func TestEtcdCycles(t *testing.T) {
	t.Parallel()
	srv := startTestServer(t, "etcd")
	ctx := testContext(t)
	for i := range 2 {
		l, err := newEtcdLocker(ctx, srv.Endpoint, i)
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if err := l.cycle(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEtcdMutexExcludesASecondHolder(t *testing.T) {
	t.Parallel()
	srv := startTestServer(t, "etcd")
	ctx := testContext(t)
	a, err := newEtcdLocker(ctx, srv.Endpoint, 7)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	b, err := newEtcdLocker(ctx, srv.Endpoint, 7) // the same lock, another session
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	if err := a.mutex.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.mutex.TryLock(ctx); !errors.Is(err, concurrency.ErrLocked) {
		t.Fatalf("second holder's TryLock while held: %v, want ErrLocked", err)
	}
	if err := a.mutex.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.mutex.TryLock(ctx); err != nil {
		t.Fatalf("TryLock after the holder unlocked: %v", err)
	}
	if err := b.mutex.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestRedisCycles(t *testing.T) {
	t.Parallel()
	srv := startTestServer(t, "redis")
	ctx := testContext(t)
	l, err := newRedisLocker(ctx, srv.Endpoint, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	for range 5 {
		if err := l.cycle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := l.c.Exists(ctx, l.key).Result(); err != nil || n != 0 {
		t.Fatalf("after the cycles the key exists %d times (%v), want 0", n, err)
	}
}

func TestRedisGrantsOnceAndReleasesOnlyTheHoldersToken(t *testing.T) {
	t.Parallel()
	srv := startTestServer(t, "redis")
	ctx := testContext(t)
	l, err := newRedisLocker(ctx, srv.Endpoint, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	if ok, err := l.tryAcquire(ctx, "holder"); err != nil || !ok {
		t.Fatalf("first SET NX: granted %v (%v), want granted", ok, err)
	}
	if ok, err := l.tryAcquire(ctx, "other"); err != nil || ok {
		t.Fatalf("SET NX while held: granted %v (%v), want refused", ok, err)
	}
	if ttl, err := l.c.PTTL(ctx, l.key).Result(); err != nil || ttl <= 0 || ttl > redisLockTTL {
		t.Fatalf("PTTL %v (%v), want within (0, %v]", ttl, err, redisLockTTL)
	}
	if ok, err := l.release(ctx, "other"); err != nil || ok {
		t.Fatalf("compare-and-delete with a wrong token: released %v (%v), want refused", ok, err)
	}
	if v, err := l.c.Get(ctx, l.key).Result(); err != nil || v != "holder" {
		t.Fatalf("after the refused release the key holds %q (%v), want the holder's token", v, err)
	}
	if ok, err := l.release(ctx, "holder"); err != nil || !ok {
		t.Fatalf("compare-and-delete with the holder's token: released %v (%v), want released", ok, err)
	}
	if ok, err := l.tryAcquire(ctx, "other"); err != nil || !ok {
		t.Fatalf("SET NX after the release: granted %v (%v), want granted", ok, err)
	}
}

// TestRunPrintsTheWindowAndTheResult runs the program's run mode as
// leasebench does and reads its JSON lines.
func TestRunPrintsTheWindowAndTheResult(t *testing.T) {
	t.Parallel()
	srv := startTestServer(t, "redis")
	var out, errOut bytes.Buffer
	args := []string{"-system", "redis", "-endpoint", srv.Endpoint, "-clients", "4", "-warmup", "0s", "-duration", "200ms"}
	if err := run(testContext(t), args, strings.NewReader(""), &out, &errOut); err != nil {
		t.Fatalf("run: %v; stderr: %s", err, errOut.String())
	}
	var got []string
	var res *result
	dec := json.NewDecoder(&out)
	for dec.More() {
		var ev event
		if err := dec.Decode(&ev); err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Event)
		if ev.Result != nil {
			res = ev.Result
		}
	}
	if strings.Join(got, ",") != "measure,done,result" {
		t.Fatalf("events %v, want measure, done, result", got)
	}
	if res.System != "redis" || res.Clients != 4 || res.Cycles < 1 || res.Errors != 0 || res.P50Ms <= 0 || res.P99Ms < res.P50Ms {
		t.Fatalf("result %+v: want redis, 4 clients, cycles without errors, 0 < p50 ≤ p99", *res)
	}
}

// TestServeStopsWhenStdinCloses runs serve mode with an empty stdin: it
// prints the server it started, then stops it at once.
func TestServeStopsWhenStdinCloses(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a real redis server")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not on PATH: run bash scripts/ensure-packages.sh etcd:etcd-server redis-server:redis-server (from the repository root)")
	}
	var out, errOut bytes.Buffer
	if err := run(testContext(t), []string{"-serve", "-system", "redis"}, strings.NewReader(""), &out, &errOut); err != nil {
		t.Fatalf("serve: %v; stderr: %s", err, errOut.String())
	}
	var ev event
	if err := json.Unmarshal(out.Bytes(), &ev); err != nil {
		t.Fatalf("serve printed %q: %v", out.String(), err)
	}
	if ev.Event != "serving" || ev.Server == nil || ev.Server.PID <= 0 || !strings.HasPrefix(ev.Server.Endpoint, "127.0.0.1:") {
		t.Fatalf("serve printed %+v, want a serving event with a pid and a loopback endpoint", ev)
	}
	if err := syscall.Kill(ev.Server.PID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("redis-server %d still there after serve returned (kill -0: %v)", ev.Server.PID, err)
	}
}
