package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/leaseapi/leaseapi"
)

// Durability says when the store may acknowledge a write.
type Durability string

const (
	// DurabilityLocal acknowledges a write once the server it reached has
	// committed it: what a single Postgres (or an asynchronous standby)
	// offers. A failover may lose acknowledged writes.
	DurabilityLocal Durability = "local"
	// DurabilityReplicated acknowledges a write only while the primary has
	// a synchronous standby (synchronous_standby_names is set) and the
	// session's synchronous_commit waits for it (on or remote_apply);
	// otherwise every statement answers ErrUnavailable.
	DurabilityReplicated Durability = "replicated"
)

// ParseDurability returns the durability named s.
func ParseDurability(s string) (Durability, error) {
	switch d := Durability(s); d {
	case DurabilityLocal, DurabilityReplicated:
		return d, nil
	}
	return "", fmt.Errorf("unknown durability %q: use %s or %s", s, DurabilityLocal, DurabilityReplicated)
}

// waitsForStandby reports whether a commit under synchronous_commit = sc
// waits until a synchronous standby has its WAL on disk (on) or applied
// (remote_apply). remote_write waits only for the standby's write, local
// and off for no standby.
func waitsForStandby(sc string) bool { return sc == "on" || sc == "remote_apply" }

// ReplicationStatus is what the database reports about its replication.
type ReplicationStatus struct {
	// InRecovery: the server is a standby (or still being promoted).
	InRecovery bool
	// SynchronousStandbyNames is the primary's synchronous_standby_names;
	// empty means commits wait for no standby.
	SynchronousStandbyNames string
	// SynchronousCommit is the session's synchronous_commit.
	SynchronousCommit string
	// SyncStandbys is the number of standbys streaming as synchronous (or
	// quorum) standbys now; -1 when the role may not read it (it needs
	// pg_monitor to see pg_stat_replication's sync_state).
	SyncStandbys int64
	// Timeline is the primary's current WAL timeline, from the name of its
	// current WAL file as Patroni reads it (pg_control_checkpoint lags
	// behind a promotion); 0 on a server in recovery.
	Timeline int64
}

// Durable returns nil when a commit made now under s waits for a
// synchronous standby, and otherwise why not.
func (s ReplicationStatus) Durable() error {
	switch {
	case s.InRecovery:
		return errors.New("the database is in recovery (a standby, or a primary still being promoted)")
	case s.SynchronousStandbyNames == "":
		return errors.New("the primary has no synchronous standby (synchronous_standby_names is empty)")
	case !waitsForStandby(s.SynchronousCommit):
		return fmt.Errorf("synchronous_commit is %s, so commits do not wait for the standby (use on or remote_apply)", s.SynchronousCommit)
	}
	return nil
}

// LogAttrs describes s for a log record.
func (s ReplicationStatus) LogAttrs() []slog.Attr {
	return []slog.Attr{
		slog.Bool("in_recovery", s.InRecovery),
		slog.String("synchronous_standby_names", s.SynchronousStandbyNames),
		slog.String("synchronous_commit", s.SynchronousCommit),
		slog.Int64("sync_standbys", s.SyncStandbys),
		slog.Int64("timeline", s.Timeline),
	}
}

// replicationQuery reads ReplicationStatus in one statement. The WAL file
// name is asked for only outside recovery, where pg_current_wal_lsn fails
// (55000); its first 8 hex digits are the timeline.
const replicationQuery = `SELECT pg_is_in_recovery(),
	current_setting('synchronous_standby_names'),
	current_setting('synchronous_commit'),
	CASE WHEN pg_is_in_recovery() THEN '' ELSE pg_walfile_name(pg_current_wal_lsn()) END,
	CASE WHEN pg_has_role('pg_monitor', 'USAGE')
		THEN (SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum'))
		ELSE -1 END`

// CheckReplication reads the database's replication status and, with
// replicated durability, opens or closes the store for statements by it:
// while Durable is not nil (or the checks keep failing, see
// maxCheckFailures), every statement but the migrations and this check
// answers ErrUnavailable with the reason, and so does Ready.
func (p *Store) CheckReplication(ctx context.Context) (ReplicationStatus, error) {
	st, err := bounded(ctx, func(ctx context.Context) (ReplicationStatus, error) {
		var (
			st      ReplicationStatus
			walfile string
		)
		err := p.db.QueryRowContext(bypassGuard(ctx), replicationQuery).Scan(
			&st.InRecovery, &st.SynchronousStandbyNames, &st.SynchronousCommit, &walfile, &st.SyncStandbys)
		if err != nil {
			return st, interpretError("check replication", err)
		}
		if walfile != "" {
			if len(walfile) < 8 {
				return st, fmt.Errorf("check replication: unexpected WAL file name %q", walfile)
			}
			tl, err := strconv.ParseInt(walfile[:8], 16, 64)
			if err != nil {
				return st, fmt.Errorf("check replication: timeline of WAL file %q: %w", walfile, err)
			}
			st.Timeline = tl
		}
		return st, nil
	})
	if p.durability != DurabilityReplicated {
		return st, err
	}
	switch {
	case err != nil:
		// One failed check (a slow answer under load) does not close a
		// durable store: its commits are still guarded one by one. A
		// store that is closed, or cannot check maxCheckFailures times
		// in a row, stays or becomes closed.
		if p.guard.checkFailures.Add(1) >= maxCheckFailures || p.guard.refusal.Load() != nil {
			p.refuse(&leaseapi.RefusedError{Reason: "replicated durability: cannot check the primary's replication", Err: err})
		}
	case st.Durable() != nil:
		p.guard.checkFailures.Store(0)
		p.refuse(&leaseapi.RefusedError{Reason: "replicated durability: " + st.Durable().Error()})
	default:
		p.guard.checkFailures.Store(0)
		p.refuse(nil)
	}
	return st, err
}

// maxCheckFailures is how many replication checks in a row may fail
// before a durable store closes.
const maxCheckFailures = 3

// Durability is the store's durability.
func (p *Store) Durability() Durability { return p.durability }

// refuse makes every guarded statement answer err; nil lets them run.
func (p *Store) refuse(err error) {
	if err == nil {
		p.guard.refusal.Store(nil)
		return
	}
	p.guard.refusal.Store(&err)
}

// CommitWaitsCancelled is the number of commits that came back with
// Postgres's "canceling wait for synchronous replication" warning and were
// answered ErrUnavailable.
func (p *Store) CommitWaitsCancelled() uint64 { return p.guard.waitsCancelled.Load() }

// ReplicationMonitor calls CheckReplication every interval, which keeps a
// store with replicated durability open only while it is durable, and
// reports each status read (for the metrics).
type ReplicationMonitor struct {
	store    *Store
	interval time.Duration
	report   func(ReplicationStatus)
	logger   *slog.Logger
}

// DefaultReplicationCheckInterval is how often the monitor checks: a
// standby that detaches stops acknowledgements within about this long
// (the per-commit guard answers 503 in the meantime), and one that
// attaches resumes them.
const DefaultReplicationCheckInterval = 2 * time.Second

// replicationCheckTimeout bounds one check of the monitor.
const replicationCheckTimeout = 2 * time.Second

// NewReplicationMonitor returns a monitor of s; interval 0 means
// DefaultReplicationCheckInterval, report may be nil.
func NewReplicationMonitor(s *Store, interval time.Duration, report func(ReplicationStatus), logger *slog.Logger) *ReplicationMonitor {
	if interval <= 0 {
		interval = DefaultReplicationCheckInterval
	}
	if report == nil {
		report = func(ReplicationStatus) {}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &ReplicationMonitor{store: s, interval: interval, report: report, logger: logger}
}

// Run checks until ctx ends, logging every change of durability.
func (m *ReplicationMonitor) Run(ctx context.Context) {
	t := time.NewTicker(m.interval)
	defer t.Stop()
	var last string
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, replicationCheckTimeout)
		st, err := m.store.CheckReplication(cctx)
		cancel()
		now, level := "durable", slog.LevelInfo
		switch {
		case err != nil:
			now, level = "check failed", slog.LevelWarn
		case st.Durable() != nil:
			now, level = st.Durable().Error(), slog.LevelWarn
		}
		if err == nil {
			m.report(st)
		}
		if now != last && ctx.Err() == nil {
			attrs := append(st.LogAttrs(), slog.String("durability", string(m.store.durability)), slog.String("state", now))
			if err != nil {
				attrs = append(attrs, slog.Any("error", err))
			}
			m.logger.LogAttrs(ctx, level, "database replication changed", attrs...)
			last = now
		}
	}
}
