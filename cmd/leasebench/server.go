package main

import (
	"context"
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

	"github.com/leaseapi/leaseapi/internal/pgcluster"
)

// buildLeaseapi builds cmd/leaseapi into dir and returns the binary's path.
// It builds from the module that contains the working directory, so the
// benchmark measures the code it is run from.
func buildLeaseapi(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("run leasebench from inside the leaseapi module (go env GOMOD is empty)")
	}
	bin := filepath.Join(dir, "leaseapi")
	// -tags leasebench: the build that has the naive baseline's knob.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-tags", "leasebench", "-o", bin, "./cmd/leaseapi")
	cmd.Dir = filepath.Dir(gomod)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/leaseapi: %w: %s", err, out)
	}
	return bin, nil
}

// server is one leaseapi process started by startServer.
type server struct {
	cmd     *exec.Cmd
	url     string
	logPath string
	done    chan error
	noDB    bool // the calibration server
}

// serverConfig is what one leaseapi process is started with.
type serverConfig struct {
	bin         string
	dsn         string
	acquireMode string // fast or naive
	logLevel    string
	logDir      string
	name        string   // for the log file
	extraEnv    []string // KEY=VALUE, after the settings above
}

// startServer starts leaseapi on a free loopback port with only the
// LEASEAPI_ settings of cfg (inherited ones are dropped), and waits until
// /readyz answers 200.
func startServer(ctx context.Context, cfg serverConfig) (*server, error) {
	port, err := pgcluster.PickPort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(cfg.logDir, cfg.name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("server log: %w", err)
	}
	defer logFile.Close() // the child has its own descriptor

	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEASEAPI_") {
			env = append(env, kv)
		}
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	env = append(env,
		"LEASEAPI_ADDR="+addr,
		"LEASEAPI_DATABASE_URL="+cfg.dsn,
		"LEASEAPI_BENCH_ACQUIRE="+cfg.acquireMode,
		"LEASEAPI_LOG_LEVEL="+cfg.logLevel,
		"LEASEAPI_LOG_FORMAT=json",
		// Ticks of the benchmark's grants must outlive its longest run.
		"LEASEAPI_MAX_TTL=1h",
	)
	env = append(env, cfg.extraEnv...)
	cmd := exec.Command(cfg.bin)
	cmd.Env = env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start leaseapi: %w", err)
	}
	s := &server{cmd: cmd, url: "http://" + addr, logPath: logPath, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()

	if err := s.waitReady(ctx, 30*time.Second); err != nil {
		_ = s.stop()
		return nil, err
	}
	return s, nil
}

// waitReady polls /readyz every 50 ms until it answers 200, the process
// exits, or limit passes.
func (s *server) waitReady(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/readyz", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-s.done:
			s.done <- err
			return fmt.Errorf("leaseapi exited before it was ready (%v); see %s", err, s.logPath)
		case <-ctx.Done():
			return fmt.Errorf("leaseapi not ready within %s; see %s", limit, s.logPath)
		case <-tick.C:
		}
	}
}

// procStats are a process's peak resident set and CPU time so far.
type procStats struct {
	peakRSSBytes int64
	cpu          time.Duration
}

// stats reads VmHWM from /proc/PID/status and utime+stime from
// /proc/PID/stat: the server's own, without the load generator's.
func (s *server) stats() (procStats, error) {
	return readProcStats(s.cmd.Process.Pid)
}

func readProcStats(pid int) (procStats, error) {
	var st procStats
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, fmt.Errorf("read status: %w", err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return st, fmt.Errorf("parse VmHWM %q: %w", rest, err)
			}
			st.peakRSSBytes = kb << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, fmt.Errorf("read stat: %w", err)
	}
	cpu, err := parseStatCPU(string(stat))
	if err != nil {
		return st, err
	}
	st.cpu = cpu
	return st, nil
}

// clockTicks is USER_HZ, which is 100 on every Linux architecture Go supports.
const clockTicks = 100

// parseStatCPU returns utime+stime (fields 14 and 15) of a /proc/PID/stat
// line. The command name (field 2) may hold spaces, so fields are counted
// after its closing parenthesis.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse stat %q: no command name", stat)
	}
	fields := strings.Fields(stat[i+1:])
	// fields[0] is field 3 (state); utime is field 14, stime field 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("parse stat %q: too few fields", stat)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse stat field %q: %w", f, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// stop sends SIGTERM, waits up to 15 s for a graceful shutdown, then kills.
func (s *server) stop() error {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return fmt.Errorf("leaseapi exited with %v; see %s", err, s.logPath)
		}
		return err
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("leaseapi did not stop within 15s of SIGTERM; killed")
	}
}
