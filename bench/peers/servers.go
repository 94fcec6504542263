package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// serverInfo is what serve mode prints about the server it started.
type serverInfo struct {
	System   string `json:"system"`
	Endpoint string `json:"endpoint"`
	PID      int    `json:"pid"`
	Version  string `json:"version"`
	// Durability is the durability settings in force, as the server
	// reports them where it can.
	Durability string `json:"durability"`
}

// server is one etcd or redis-server process started by startServer.
type server struct {
	serverInfo
	cmd     *exec.Cmd
	dir     string
	logPath string
	done    chan error
}

func (s *server) info() *serverInfo { return &s.serverInfo }

// readyTimeout bounds a server's start.
const readyTimeout = 30 * time.Second

// startServer starts a fresh etcd or redis-server: its data in a new
// temporary directory, listening on free loopback ports only, durable on
// disk (etcd fsyncs its write-ahead log before it answers a write, always;
// Redis with appendfsync always fsyncs its append-only file before it
// answers), and waits until it answers.
func startServer(ctx context.Context, system string) (*server, error) {
	dir, err := os.MkdirTemp("", "leasebench-"+system+"-")
	if err != nil {
		return nil, err
	}
	if err := onDisk(dir); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s := &server{dir: dir, logPath: filepath.Join(dir, system+".log"), done: make(chan error, 1)}
	s.System = system
	var args []string
	switch system {
	case "etcd":
		client, err1 := freePort()
		peer, err2 := freePort()
		if err := errors.Join(err1, err2); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		s.Endpoint = net.JoinHostPort("127.0.0.1", strconv.Itoa(client))
		clientURL := "http://" + s.Endpoint
		peerURL := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(peer))
		args = []string{"etcd",
			"--name", "bench",
			"--data-dir", filepath.Join(dir, "data"),
			"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
			"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
			"--initial-cluster", "bench=" + peerURL, "--initial-cluster-state", "new",
			"--logger", "zap", "--log-level", "warn",
		}
	case "redis":
		port, err := freePort()
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		s.Endpoint = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		args = []string{"redis-server",
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--dir", dir, "--appendonly", "yes", "--appendfsync", "always", "--save", "",
			"--daemonize", "no", "--logfile", s.logPath,
		}
	default:
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("unknown system %q", system)
	}
	bin, err := exec.LookPath(args[0])
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("%s not on PATH: run bash scripts/ensure-packages.sh etcd:etcd-server redis-server:redis-server", args[0])
	}
	logFile, err := os.Create(s.logPath + ".out")
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	s.cmd = exec.Command(bin, args[1:]...)
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", args[0], err)
	}
	s.PID = s.cmd.Process.Pid
	go func() { s.done <- s.cmd.Wait() }()

	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	ready := s.etcdReady
	if system == "redis" {
		ready = s.redisReady
	}
	for {
		err := ready(ctx)
		if err == nil {
			return s, nil
		}
		select {
		case werr := <-s.done:
			s.done <- werr
			return nil, errors.Join(fmt.Errorf("%s exited before it answered (%v): %s", system, werr, s.logTail()), s.stop())
		case <-ctx.Done():
			return nil, errors.Join(fmt.Errorf("%s did not answer within %s (%v): %s", system, readyTimeout, err, s.logTail()), s.stop())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// etcdReady asks /health and /version of the client URL.
func (s *server) etcdReady(ctx context.Context) error {
	var health struct {
		Health string `json:"health"`
	}
	if err := getJSON(ctx, "http://"+s.Endpoint+"/health", &health); err != nil {
		return err
	}
	if health.Health != "true" {
		return fmt.Errorf("health %q", health.Health)
	}
	var version struct {
		Server string `json:"etcdserver"`
	}
	if err := getJSON(ctx, "http://"+s.Endpoint+"/version", &version); err != nil {
		return err
	}
	s.Version = version.Server
	// Every entry is fsynced to the write-ahead log before etcd answers; only
	// --unsafe-no-fsync (3.5 and later) turns that off, and it is not given.
	s.Durability = "WAL fsynced before every answered write (etcd's default; no --unsafe-no-fsync)"
	return nil
}

func getJSON(ctx context.Context, url string, into any) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

// redisReady pings and reads the version and the persistence settings.
func (s *server) redisReady(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: s.Endpoint, MaxRetries: -1, DialTimeout: time.Second, PoolSize: 1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		return err
	}
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			s.Version = strings.TrimSpace(v)
		}
	}
	var settings []string
	for _, name := range []string{"appendonly", "appendfsync", "save"} {
		kv, err := c.ConfigGet(ctx, name).Result()
		if err != nil {
			return err
		}
		settings = append(settings, fmt.Sprintf("%s %q", name, kv[name]))
	}
	s.Durability = strings.Join(settings, ", ")
	return nil
}

// logTail is the end of the server's log, for errors.
func (s *server) logTail() string {
	var out []string
	for _, p := range []string{s.logPath, s.logPath + ".out"} {
		b, _ := os.ReadFile(p)
		if len(b) > 1500 {
			b = b[len(b)-1500:]
		}
		if t := strings.TrimSpace(string(b)); t != "" {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return "no log"
	}
	return strings.Join(out, "\n")
}

// stop sends SIGTERM, waits up to 10 s, then kills; the data directory is
// removed either way.
func (s *server) stop() error {
	defer os.RemoveAll(s.dir)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		return nil // a server stopped by SIGTERM may exit non-zero; nothing to report
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("%s did not stop within 10s of SIGTERM; killed", s.System)
	}
}

// tmpfsMagic is the f_type statfs reports for tmpfs (linux/magic.h).
const tmpfsMagic = 0x01021994

// onDisk refuses a directory in memory: there an fsync costs nothing and
// the peers would not be durable on disk as leaseapi's Postgres is.
func onDisk(dir string) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", dir, err)
	}
	if st.Type == tmpfsMagic {
		return fmt.Errorf("%s is on tmpfs, where fsync writes nothing to disk: set TMPDIR to a directory on disk", dir)
	}
	return nil
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
