package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/repotest"
	"github.com/leaseapi/leaseapi/repo/sqlite"
)

// TestSQLite holds the embedded store to the shared contract. The suite runs
// its subtests in parallel and the store allows one open store per file, so
// every subtest gets its own file (named after it, in one directory of this
// test); the suite's reopen calls of a subtest find the same file.
func TestSQLite(t *testing.T) {
	dir := t.TempDir()
	repotest.RunStoreSuite(t, func(t *testing.T, o repotest.StoreOptions) leaseapi.Store {
		name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
		return repotest.OpenSQLite(t, filepath.Join(dir, name+".db"), o)
	})
}

// TestSQLiteRepair runs the repair suite on the embedded store, a file per
// subtest.
func TestSQLiteRepair(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Every subtest has a file of its own.
	open := func(t *testing.T) leaseapi.Store {
		name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
		return repotest.OpenSQLite(t, filepath.Join(dir, name+".db"))
	}
	repotest.RunRepairSuite(t, &repotest.RepairHarness{
		Open:      open,
		OpenAlone: open,
		SetTicks: func(t *testing.T, s leaseapi.Store, jobID string, grant, owed *time.Time) {
			t.Helper()
			if err := s.(*sqlite.Store).SetTicks(t.Context(), jobID, grant, owed); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// TestSQLiteSweep runs the sweep suite on the embedded store: one store
// (one instance per file) on a file of each subtest's own.
func TestSQLiteSweep(t *testing.T) {
	t.Parallel()
	repotest.RunSweepSuite(t, func(t *testing.T, o leaseapi.Observer) *repotest.SweepHarness {
		s, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "leaseapi.db"), Observer: o})
		if err != nil {
			t.Fatalf("sqlite.Open: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		if err := s.Migrate(t.Context()); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		return &repotest.SweepHarness{
			Stores: []leaseapi.Store{s},
			Rewind: func(t *testing.T, jobID string, d time.Duration) {
				t.Helper()
				if err := s.Rewind(t.Context(), jobID, d); err != nil {
					t.Fatal(err)
				}
			},
		}
	})
}

func TestSQLiteSingleInstance(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "leaseapi.db")
	first := repotest.OpenSQLite(t, path)

	// A second store on the same file, in this process, is refused; so is
	// one reached through another path or a symbolic link.
	dir := filepath.Dir(path)
	link := filepath.Join(t.TempDir(), "link.db")
	if err := os.Symlink(path, link); err != nil {
		t.Fatalf("symlink: %v", err)
	}
	dirLink := filepath.Join(t.TempDir(), "dir")
	if err := os.Symlink(dir, dirLink); err != nil {
		t.Fatalf("symlink: %v", err)
	}
	for _, p := range []string{path, filepath.Join(dir, ".", "leaseapi.db"), link, filepath.Join(dirLink, "leaseapi.db")} {
		second, err := sqlite.Open(t.Context(), sqlite.Config{Path: p})
		if err == nil {
			_ = second.Close()
			t.Fatalf("second OpenSQLite(%s) while the first is open: got nil error, want in use", p)
		}
		if !strings.Contains(err.Error(), "in use by another process") || !strings.Contains(err.Error(), "LEASEAPI_DATABASE_URL") {
			t.Errorf("second OpenSQLite(%s): got %q, want it to say the store is in use and to point to Postgres", p, err)
		}
	}
	// The refused open did not disturb the first store.
	l, err := first.Acquire(t.Context(), &leaseapi.AcquireParams{JobID: "single", Owner: "a", TTL: time.Hour})
	if err != nil {
		t.Fatalf("Acquire on the first store: %v", err)
	}

	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Errorf("second Close: got %v, want nil", err)
	}
	if _, err := first.Get(t.Context(), "single"); err == nil {
		t.Errorf("Get after Close: got nil error, want one")
	}

	// Once closed, the file can be opened again, and the data is there.
	again := repotest.OpenSQLite(t, path)
	got, err := again.Get(t.Context(), "single")
	if err != nil {
		t.Fatalf("Get after reopening: %v", err)
	}
	if got.Token != l.Token || got.Owner != "a" || got.State != leaseapi.StateHeld {
		t.Errorf("Get after reopening: got token %d owner %s state %s, want token %d owner a held", got.Token, got.Owner, got.State, l.Token)
	}
}

// TestSQLiteWaitsForTheLock: a store opened while another one is closing
// waits for the lock instead of failing, as a restart does while the old
// instance exits (or while a forked child briefly holds a copy of the lock).
func TestSQLiteWaitsForTheLock(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "leaseapi.db")
	first := repotest.OpenSQLite(t, path)
	opened := make(chan error, 1)
	go func() {
		s, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
		if err == nil {
			err = s.Close()
		}
		opened <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the second open find the lock held
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-opened; err != nil {
		t.Errorf("OpenSQLite while the other store closed: %v, want it to wait for the lock", err)
	}
}

// otherProcessEnv makes the test binary, started again by
// TestSQLiteOtherProcess, open the store at its value and report.
const otherProcessEnv = "LEASEAPI_TEST_SQLITE_OTHER_PROCESS"

// TestSQLiteOtherProcess: another process cannot open a file this one has
// open, and can once it is closed.
func TestSQLiteOtherProcess(t *testing.T) {
	if path := os.Getenv(otherProcessEnv); path != "" {
		s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
		if err != nil {
			fmt.Println("open error:", err)
			return
		}
		fmt.Println("opened")
		if err := s.Close(); err != nil {
			fmt.Println("close error:", err)
		}
		return
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "leaseapi.db")
	other := func() string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestSQLiteOtherProcess$", "-test.short", "-test.count=1")
		cmd.Env = append(os.Environ(), otherProcessEnv+"="+path)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("other process: %v\n%s", err, out)
		}
		return string(out)
	}

	s := repotest.OpenSQLite(t, path)
	if out := other(); !strings.Contains(out, "open error:") || !strings.Contains(out, "in use by another process") {
		t.Errorf("other process while this one has the store open: got output %q, want it refused as in use", out)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if out := other(); !strings.Contains(out, "opened") {
		t.Errorf("other process after Close: got output %q, want it opened", out)
	}
}

func TestSQLiteOpenErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		path string
	}{
		{"Empty", ""},
		{"Memory", ":memory:"},
		{"URI", "file:leaseapi.db?mode=memory"},
		{"MissingDirectory", filepath.Join(t.TempDir(), "missing", "leaseapi.db")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := sqlite.Open(t.Context(), sqlite.Config{Path: tc.path})
			if err == nil {
				_ = s.Close()
				t.Fatalf("OpenSQLite(%q): got nil error, want one", tc.path)
			}
		})
	}
}

func TestSQLiteMigrate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "leaseapi.db")
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatalf("OpenSQLite: %v", err)
	}
	defer func() { _ = s.Close() }()

	if err := s.Ready(ctx); err == nil || !strings.Contains(err.Error(), "pending") {
		t.Errorf("Ready before Migrate: got %v, want migrations pending", err)
	}
	for i := range 2 { // the second run finds nothing to do
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate #%d: %v", i+1, err)
		}
		if err := s.Ready(ctx); err != nil {
			t.Errorf("Ready after Migrate #%d: %v", i+1, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	// A fresh store over the migrated file is ready without migrating.
	s2, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatalf("OpenSQLite again: %v", err)
	}
	defer func() { _ = s2.Close() }()
	if err := s2.Ready(ctx); err != nil {
		t.Errorf("Ready of a reopened migrated file: %v", err)
	}
}

// TestSQLiteMilliseconds: times are kept in milliseconds, and what a write
// returns is what a read returns.
func TestSQLiteMilliseconds(t *testing.T) {
	t.Parallel()
	s := repotest.OpenSQLite(t, filepath.Join(t.TempDir(), "leaseapi.db"))
	tick := time.Date(2026, time.November, 30, 7, 0, 0, 123456789, time.FixedZone("X", 3600))
	l, err := s.Acquire(t.Context(), &leaseapi.AcquireParams{JobID: "ms", Owner: "a", TTL: 1500*time.Millisecond + 700*time.Microsecond, Tick: &tick})
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	for name, v := range map[string]time.Time{"Tick": *l.Tick, "AcquiredAt": l.AcquiredAt, "RenewedAt": l.RenewedAt, "ExpiresAt": l.ExpiresAt} {
		if !v.Equal(v.Truncate(time.Millisecond)) || v.Location() != time.UTC {
			t.Errorf("%s: got %s, want UTC with millisecond precision", name, v.Format(time.RFC3339Nano))
		}
	}
	if want := tick.Truncate(time.Millisecond); !l.Tick.Equal(want) {
		t.Errorf("Tick: got %s, want %s", l.Tick, want)
	}
	if l.TTL != 1500*time.Millisecond || !l.ExpiresAt.Equal(l.AcquiredAt.Add(1500*time.Millisecond)) {
		t.Errorf("TTL: got %v and expiresAt - acquiredAt %v, want 1.5s for both", l.TTL, l.ExpiresAt.Sub(l.AcquiredAt))
	}
	got, err := s.Get(t.Context(), "ms")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if !got.AcquiredAt.Equal(l.AcquiredAt) || !got.ExpiresAt.Equal(l.ExpiresAt) || !got.Tick.Equal(*l.Tick) {
		t.Errorf("Get: got %+v, want the times Acquire returned %+v", got, l)
	}

	// The same tick at another precision is the same tick.
	sameTick := tick.Truncate(time.Millisecond).UTC()
	if _, err := s.Acquire(t.Context(), &leaseapi.AcquireParams{JobID: "ms", Owner: "a", TTL: time.Minute, Tick: &sameTick}); err != nil {
		t.Errorf("re-acquire with the truncated tick: %v", err)
	}
}

// TestSQLiteUnavailable: a call whose context ends while it waits for the
// database returns ErrUnavailable by the deadline, and the store works
// afterwards.
func TestSQLiteUnavailable(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "leaseapi.db")
	s := repotest.OpenSQLite(t, path)
	ctx := t.Context()
	if _, err := s.Acquire(ctx, &leaseapi.AcquireParams{JobID: "u", Owner: "a", TTL: time.Hour}); err != nil {
		t.Fatalf("Acquire: %v", err)
	}

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Acquire(canceled, &leaseapi.AcquireParams{JobID: "u2", Owner: "a", TTL: time.Hour}); !errors.Is(err, leaseapi.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire with a canceled context: got %v, want ErrUnavailable and context.Canceled", err)
	}
	if _, err := s.Get(canceled, "u"); !errors.Is(err, leaseapi.ErrUnavailable) {
		t.Errorf("Get with a canceled context: got %v, want ErrUnavailable", err)
	}

	// A foreign connection (the lock is advisory, SQLite's own is not)
	// holds the write lock: writes wait for it until their deadline.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatalf("open a foreign connection: %v", err)
	}
	defer func() { _ = db.Close() }()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatalf("foreign connection: %v", err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatalf("BEGIN IMMEDIATE: %v", err)
	}

	var wg sync.WaitGroup
	for _, op := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Acquire", func(ctx context.Context) error {
			_, err := s.Acquire(ctx, &leaseapi.AcquireParams{JobID: "u3", Owner: "a", TTL: time.Hour})
			return err
		}},
		{"Heartbeat", func(ctx context.Context) error {
			_, err := s.Heartbeat(ctx, &leaseapi.HeartbeatParams{JobID: "u", Owner: "a", Token: 1})
			return err
		}},
		{"Revoke", func(ctx context.Context) error {
			_, err := s.Revoke(ctx, &leaseapi.RevokeParams{JobID: "u"})
			return err
		}},
		{"PruneRuns", func(ctx context.Context) error {
			_, err := s.PruneRuns(ctx, 0, 10)
			return err
		}},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			err := op.call(ctx)
			if !errors.Is(err, leaseapi.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s while another connection holds the write lock: got %v, want ErrUnavailable and context.DeadlineExceeded", op.name, err)
			}
		}()
	}
	wg.Wait()

	// Reads do not wait for writers (WAL).
	if l, err := s.Get(ctx, "u"); err != nil || l.State != leaseapi.StateHeld {
		t.Errorf("Get while another connection holds the write lock: got %+v, %v, want the held lease", l, err)
	}

	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatalf("ROLLBACK: %v", err)
	}
	l, err := s.Heartbeat(ctx, &leaseapi.HeartbeatParams{JobID: "u", Owner: "a", Token: 1})
	if err != nil || l.Token != 1 || l.State != leaseapi.StateHeld {
		t.Errorf("Heartbeat after the lock is gone: got %+v, %v, want the held lease, token 1", l, err)
	}
	if _, err := s.Get(ctx, "u3"); !errors.Is(err, leaseapi.ErrNotFound) {
		t.Errorf("Get of the job whose acquire timed out: got %v, want ErrNotFound (nothing was written)", err)
	}
}

// TestSQLiteFiles: the database lives where it was asked to, in WAL mode,
// with the lock file beside it.
func TestSQLiteFiles(t *testing.T) {
	t.Parallel()
	// Characters a file: URI must escape.
	dir := filepath.Join(t.TempDir(), "a dir?#%20")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("mkdir: %v", err)
	}
	path := filepath.Join(dir, "leaseapi.db")
	s := repotest.OpenSQLite(t, path)
	if _, err := s.Acquire(t.Context(), &leaseapi.AcquireParams{JobID: "f", Owner: "a", TTL: time.Hour}); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read dir: %v", err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	for _, name := range []string{"leaseapi.db", "leaseapi.db.lock", "leaseapi.db-wal"} {
		if !slices.Contains(names, name) {
			t.Errorf("files in %s: got %q, want %s among them", dir, names, name)
		}
	}
}
