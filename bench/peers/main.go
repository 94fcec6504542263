// Command peers drives the lock services that leaseapi is compared with,
// etcd and Redis, for the lock scenario of cmd/leasebench. It is a module
// of its own so that leaseapi's go.mod does not carry the etcd, gRPC and
// Redis clients (users import leaseapi's jobs package).
//
// Serve mode starts a fresh server on free loopback ports in a temporary
// directory, durable on disk, waits until it answers, prints one JSON line
// (event "serving": endpoint, pid, version, durability settings) and stops
// it, removing the directory, when its standard input closes:
//
//	peers -serve -system etcd
//
// Run mode is the load: -clients clients, each on a lock of its own,
// acquire then release in a loop for -warmup + -duration. It prints JSON
// lines: event "measure" when the measured window starts, "done" when the
// last cycle started in it has ended (the caller reads the server's CPU
// time at these two), then "result":
//
//	peers -system etcd -endpoint 127.0.0.1:2379 -clients 32 -duration 15s
//
// etcd's cycle is the official client's concurrency.Mutex (one session
// per client, Lock then Unlock); Redis's is SET key token NX PX 30000 then
// a compare-and-delete script by EVALSHA.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers: "+err.Error())
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	system := fs.String("system", "", "etcd or redis")
	serve := fs.Bool("serve", false, "start a fresh server, print its endpoint, stop it when stdin closes")
	endpoint := fs.String("endpoint", "", "run mode: the server's host:port")
	clients := fs.Int("clients", 32, "run mode: concurrent clients, each on a lock of its own")
	duration := fs.Duration("duration", 15*time.Second, "run mode: measured time")
	warmup := fs.Duration("warmup", time.Second, "run mode: unmeasured time before it")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *system != "etcd" && *system != "redis" {
		return fmt.Errorf("-system: want etcd or redis, got %q", *system)
	}
	out := &events{enc: json.NewEncoder(stdout)}
	if *serve {
		srv, err := startServer(ctx, *system)
		if err != nil {
			return err
		}
		out.emit(event{Event: "serving", Server: srv.info()})
		// Until the caller closes stdin (or a signal).
		done := make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, bufio.NewReader(stdin))
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
		}
		return srv.stop()
	}
	if *endpoint == "" || *clients < 1 || *duration <= 0 || *warmup < 0 {
		return errors.New("run mode needs -endpoint, -clients ≥ 1, -duration > 0, -warmup ≥ 0")
	}
	newLocker := func(ctx context.Context, i int) (locker, error) {
		if *system == "etcd" {
			return newEtcdLocker(ctx, *endpoint, i)
		}
		return newRedisLocker(ctx, *endpoint, i)
	}
	res, err := runLoad(ctx, newLocker, *clients, *warmup, *duration, out)
	if err != nil {
		return err
	}
	res.System = *system
	out.emit(event{Event: "result", Result: &res})
	return nil
}

// event is one line of output.
type event struct {
	Event  string      `json:"event"` // serving, measure, done, result
	Server *serverInfo `json:"server,omitempty"`
	Result *result     `json:"result,omitempty"`
}

// events writes events as JSON lines, one at a time.
type events struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (e *events) emit(ev event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	_ = e.enc.Encode(ev)
}
