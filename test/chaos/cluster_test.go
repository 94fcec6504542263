//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pgBin is where Debian installs the PostgreSQL 15 server binaries.
const pgBin = "/usr/lib/postgresql/15/bin"

// cluster is a private, throwaway PostgreSQL cluster: its own data
// directory, free port and socket directory, owned by the postgres user.
// The harness restarts, crashes and freezes it; the shared server on 5432
// is never touched.
type cluster struct {
	dir, data, sock, logFile string
	port                     int
}

// pgTimeout bounds every pg_ctl call.
const pgTimeout = 60 * time.Second

// startCluster creates and starts a cluster with conf appended to its
// postgresql.conf. It is stopped (immediately) and removed at cleanup.
func startCluster(t *testing.T, conf []string) *cluster {
	t.Helper()
	pg, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("the chaos suite runs Postgres as the postgres user: %v", err)
	}
	uid, _ := strconv.Atoi(pg.Uid)
	gid, _ := strconv.Atoi(pg.Gid)
	dir, err := os.MkdirTemp("", "leaseapi-chaos-pg-")
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{dir: dir, data: filepath.Join(dir, "data"), sock: filepath.Join(dir, "sock"), logFile: filepath.Join(dir, "postgres.log")}
	for _, d := range []string{dir, c.sock} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, uid, gid); err != nil {
			t.Fatalf("chown %s to postgres (the suite must run as root): %v", d, err)
		}
	}
	t.Cleanup(func() {
		c.stopNow()
		_ = os.RemoveAll(dir)
	})
	if out, err := asPostgres(pgTimeout, "initdb", "-D", c.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	c.port = freePort(t)
	settings := append([]string{
		fmt.Sprintf("port = %d", c.port),
		"listen_addresses = '127.0.0.1'",
		fmt.Sprintf("unix_socket_directories = '%s'", c.sock),
		"max_connections = 200",
		"shared_buffers = 64MB",
		// The suite crashes processes, not machines: written WAL survives
		// a process crash without fsync, and fsync costs the shared disk.
		"fsync = off",
		"synchronous_commit = on",
		"log_min_messages = warning",
		"log_connections = off",
		// Slow statements and lock waits explain slow recoveries.
		"log_min_duration_statement = 250",
		"log_lock_waits = on",
		"deadlock_timeout = 200ms",
	}, conf...)
	f, err := os.OpenFile(filepath.Join(c.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString("\n# leaseapi chaos suite\n" + strings.Join(settings, "\n") + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := c.start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// asPostgres runs a server binary as the postgres user.
func asPostgres(timeout time.Duration, bin string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", filepath.Join(pgBin, bin)}, args...)...)
	cmd.Dir = "/"
	return cmd.CombinedOutput()
}

func (c *cluster) pgCtl(args ...string) error {
	out, err := asPostgres(pgTimeout, "pg_ctl", append([]string{"-D", c.data, "-l", c.logFile, "-t", "50"}, args...)...)
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func (c *cluster) start() error { return c.pgCtl("-w", "start") }

// restartFast is pg_ctl restart -m fast: sessions are terminated, the
// shutdown checkpoint is written, the server starts again.
func (c *cluster) restartFast() error { return c.pgCtl("-w", "-m", "fast", "restart") }

// crash is pg_ctl stop -m immediate: every server process quits at once
// without a checkpoint; the next start replays the WAL.
func (c *cluster) crash() error { return c.pgCtl("-m", "immediate", "stop") }

// stopNow stops the cluster immediately, whatever its state, and makes
// sure no process of it is left.
func (c *cluster) stopNow() {
	pids := c.pids()
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	if err := c.crash(); err != nil {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// pids returns the postmaster and its children.
func (c *cluster) pids() []int {
	b, err := os.ReadFile(filepath.Join(c.data, "postmaster.pid"))
	if err != nil {
		return nil
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pm, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return nil
	}
	pids := []int{pm}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may contain spaces
		rest := string(stat[bytes.LastIndexByte(stat, ')')+1:])
		fields := strings.Fields(rest)
		if len(fields) > 1 && fields[1] == strconv.Itoa(pm) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// signalAll sends sig to the postmaster and every child (freeze, thaw).
func (c *cluster) signalAll(sig syscall.Signal) {
	for _, pid := range c.pids() {
		_ = syscall.Kill(pid, sig)
	}
}

// dsn is a direct connection (no proxy) to database db.
func (c *cluster) dsn(db string, params ...string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable&connect_timeout=2%s", c.port, db, strings.Join(params, ""))
}

// freePort returns a TCP port nobody listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
