// Package pgcluster starts private, throwaway PostgreSQL 15 clusters for
// tests that must restart, crash, freeze or reconfigure a server: the chaos
// suite, the store's tests of synchronous replication and the benchmark's
// replicated row. The shared server the other tests use is never touched.
// It runs the server as the postgres user, so its callers run as root.
package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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

// Cluster is a private, throwaway PostgreSQL cluster: its own data
// directory, free port and socket directory, owned by the postgres user.
// The harness restarts, crashes and freezes it; the shared server on 5432
// is never touched.
type Cluster struct {
	Dir, Data, Sock, LogFile string
	Port                     int
}

// pgTimeout bounds every pg_ctl call.
const pgTimeout = 60 * time.Second

// Start creates and starts a cluster with conf appended to its
// postgresql.conf. It is stopped (immediately) and removed at cleanup.
func Start(t testing.TB, conf []string) *Cluster {
	t.Helper()
	c, err := New(conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Remove)
	return c
}

// StartStandby is NewStandby for a test: the standby is removed at
// cleanup.
func StartStandby(t testing.TB, primary *Cluster, name string, conf []string) *Cluster {
	t.Helper()
	c, err := NewStandby(primary, name, conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Remove)
	return c
}

// PostgresUser is the uid and gid of the user postgres, which the Postgres
// servers of tests run as.
func PostgresUser(t testing.TB) (uid, gid int) {
	t.Helper()
	uid, gid, err := postgresUser()
	if err != nil {
		t.Fatal(err)
	}
	return uid, gid
}

// FreePort returns a loopback TCP port nobody listens on right now, below
// the kernel's ephemeral range (see PickPort).
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := PickPort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// Available says why clusters cannot be started here, or nil: they need
// root (the servers run as the postgres user) and PostgreSQL 15's server
// binaries.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("private Postgres clusters need root (their servers run as the postgres user)")
	}
	if _, _, err := postgresUser(); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(pgBin, "initdb")); err != nil {
		return fmt.Errorf("private Postgres clusters need PostgreSQL 15's server binaries in %s (Debian: postgresql-15): %w", pgBin, err)
	}
	return nil
}

// New creates and starts a cluster with conf appended to its
// postgresql.conf (later settings win, so conf may undo the defaults
// below, fsync = off among them). The caller removes it with Remove.
func New(conf []string) (c *Cluster, err error) {
	c, err = newDir()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Remove()
		}
	}()
	if out, err := asPostgres(pgTimeout, "initdb", "-D", c.Data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	if c.Port, err = PickPort(); err != nil {
		return nil, err
	}
	settings := append([]string{
		fmt.Sprintf("port = %d", c.Port),
		"listen_addresses = '127.0.0.1'",
		fmt.Sprintf("unix_socket_directories = '%s'", c.Sock),
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
	if err := c.appendConf(settings); err != nil {
		return nil, err
	}
	if err := c.StartServer(); err != nil {
		return nil, err
	}
	return c, nil
}

// NewStandby makes a streaming standby of primary (pg_basebackup -R: a
// copy of its data directory that replicates from it, named name in its
// primary_conninfo, so that synchronous_standby_names can name it) and
// starts it. The caller removes it with Remove.
func NewStandby(primary *Cluster, name string, conf []string) (c *Cluster, err error) {
	c, err = newDir()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Remove()
		}
	}()
	if out, err := asPostgres(pgTimeout, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.Port), "-U", "postgres",
		"-D", c.Data, "-R", "-X", "stream", "-c", "fast", "-d", "application_name="+name); err != nil {
		return nil, fmt.Errorf("pg_basebackup: %w\n%s", err, out)
	}
	if c.Port, err = PickPort(); err != nil {
		return nil, err
	}
	// The copy has the primary's settings; these, appended, win.
	if err := c.appendConf(append([]string{
		fmt.Sprintf("port = %d", c.Port),
		fmt.Sprintf("unix_socket_directories = '%s'", c.Sock),
		"hot_standby = on",
	}, conf...)); err != nil {
		return nil, err
	}
	if err := c.StartServer(); err != nil {
		return nil, err
	}
	return c, nil
}

// Remove stops the cluster immediately and removes its directory.
func (c *Cluster) Remove() {
	c.StopNow()
	_ = os.RemoveAll(c.Dir)
}

func postgresUser() (uid, gid int, err error) {
	pg, err := user.Lookup("postgres")
	if err != nil {
		return 0, 0, fmt.Errorf("look up the postgres user (Postgres runs as it): %w", err)
	}
	uid, _ = strconv.Atoi(pg.Uid)
	gid, _ = strconv.Atoi(pg.Gid)
	return uid, gid, nil
}

// newDir makes a cluster's directories, owned by the postgres user.
func newDir() (*Cluster, error) {
	uid, gid, err := postgresUser()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "leaseapi-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Data: filepath.Join(dir, "data"), Sock: filepath.Join(dir, "sock"), LogFile: filepath.Join(dir, "postgres.log")}
	for _, d := range []string{dir, c.Sock} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		if err := os.Chown(d, uid, gid); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("chown %s to postgres (private clusters need root): %w", d, err)
		}
	}
	return c, nil
}

// Stop is pg_ctl stop -m fast: a clean shutdown, after which the server
// can be started again (or its WAL reset).
func (c *Cluster) Stop() error { return c.pgCtl("-w", "-m", "fast", "stop") }

// Promote ends a standby's recovery (pg_ctl promote) and waits until it
// accepts writes on its new timeline.
func (c *Cluster) Promote() error { return c.pgCtl("-w", "promote") }

// ResetWAL is pg_resetwal -l walfile on the stopped server: its next WAL
// file, and with it its timeline (the first 8 hex digits), is walfile.
func (c *Cluster) ResetWAL(walfile string) error {
	out, err := asPostgres(pgTimeout, "pg_resetwal", "-l", walfile, c.Data)
	if err != nil {
		return fmt.Errorf("pg_resetwal -l %s: %w: %s", walfile, err, bytes.TrimSpace(out))
	}
	return nil
}

// appendConf appends settings to the cluster's postgresql.conf.
func (c *Cluster) appendConf(settings []string) error {
	f, err := os.OpenFile(filepath.Join(c.Data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString("\n# leaseapi pgcluster\n" + strings.Join(settings, "\n") + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// asPostgres runs a server binary as the postgres user.
func asPostgres(timeout time.Duration, bin string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", filepath.Join(pgBin, bin)}, args...)...)
	cmd.Dir = "/"
	return cmd.CombinedOutput()
}

func (c *Cluster) pgCtl(args ...string) error {
	out, err := asPostgres(pgTimeout, "pg_ctl", append([]string{"-D", c.Data, "-l", c.LogFile, "-t", "50"}, args...)...)
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// StartServer starts the stopped server and waits until it accepts connections.
func (c *Cluster) StartServer() error { return c.pgCtl("-w", "start") }

// RestartFast is pg_ctl restart -m fast: sessions are terminated, the
// shutdown checkpoint is written, the server starts again.
func (c *Cluster) RestartFast() error { return c.pgCtl("-w", "-m", "fast", "restart") }

// Crash is pg_ctl stop -m immediate: every server process quits at once
// without a checkpoint; the next start replays the WAL.
func (c *Cluster) Crash() error { return c.pgCtl("-m", "immediate", "stop") }

// StopNow stops the cluster immediately, whatever its state, and makes
// sure no process of it is left.
func (c *Cluster) StopNow() {
	pids := c.PIDs()
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	if err := c.Crash(); err != nil {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// PIDs returns the postmaster and its children.
func (c *Cluster) PIDs() []int {
	b, err := os.ReadFile(filepath.Join(c.Data, "postmaster.pid"))
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

// SignalAll sends sig to the postmaster and every child (freeze, thaw).
func (c *Cluster) SignalAll(sig syscall.Signal) {
	for _, pid := range c.PIDs() {
		_ = syscall.Kill(pid, sig)
	}
}

// DSN is a direct connection (no proxy) to database db.
func (c *Cluster) DSN(db string, params ...string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable&connect_timeout=2%s", c.Port, db, strings.Join(params, ""))
}

// PickPort returns a loopback TCP port nobody listens on right now, for a
// server that binds it a moment later. It is drawn from below the kernel's
// ephemeral range: a port of that range (what listening on port 0 returns)
// can be handed to an outgoing connection or another port-0 listener before
// the server binds it, and the server then fails to start.
func PickPort() (int, error) {
	lo := ephemeralLow()
	const from = 20000
	for range 100 {
		if lo <= from {
			break
		}
		port := from + rand.IntN(lo-from)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // taken; draw again
		}
		_ = l.Close()
		return port, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux:
// net.ipv4.ip_local_port_range), 32768 when it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return lo
}
