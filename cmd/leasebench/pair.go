package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/leaseapi/leaseapi/internal/pgcluster"
)

// replicatedPair is the Postgres of the leaseapi-replicated lock row: a
// primary whose commits wait for one synchronous standby, both private
// clusters on loopback with fsync on (as the shared server), started for
// the lock scenario and removed after it.
type replicatedPair struct {
	primary, standby *pgcluster.Cluster
	adminDSN         string
	durability       string
	version          string
}

// errPairUnavailable marks a machine where the pair cannot be started
// (not root, no PostgreSQL 15 server binaries): the row is skipped, and
// the report says why.
var errPairUnavailable = errors.New("no synchronous pair")

// startReplicatedPair starts the pair and waits until the standby streams
// as the synchronous one.
func startReplicatedPair(ctx context.Context) (_ *replicatedPair, err error) {
	if err := pgcluster.Available(); err != nil {
		return nil, fmt.Errorf("%w: %v", errPairUnavailable, err)
	}
	p := &replicatedPair{}
	defer func() {
		if err != nil {
			p.remove()
		}
	}()
	// Later settings win over pgcluster's fsync = off: the row must be as
	// durable on disk as the shared server's, and then on the standby too.
	conf := []string{"fsync = on", "synchronous_standby_names = 'standby'"}
	if p.primary, err = pgcluster.New(conf); err != nil {
		return nil, err
	}
	if p.standby, err = pgcluster.NewStandby(p.primary, "standby", nil); err != nil {
		return nil, err
	}
	p.adminDSN = p.primary.DSN("postgres")
	db, err := sql.Open("postgres", p.adminDSN)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		var n int
		err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = 'sync'`).Scan(&n)
		if err == nil && n == 1 {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the standby did not stream as the synchronous standby within a minute (last error: %v); logs in %s and %s",
				err, p.primary.LogFile, p.standby.LogFile)
		case <-time.After(100 * time.Millisecond):
		}
	}
	var fsync, syncCommit string
	if err := db.QueryRowContext(ctx, `SELECT current_setting('fsync'), current_setting('synchronous_commit'), current_setting('server_version')`).
		Scan(&fsync, &syncCommit, &p.version); err != nil {
		return nil, err
	}
	p.durability = fmt.Sprintf("fsync %s, synchronous_commit %s, one synchronous standby streaming (LEASEAPI_DURABILITY=replicated)", fsync, syncCommit)
	return p, nil
}

// checkpoint writes the dirty pages of both servers (a restartpoint on
// the standby), so that a row's window does not pay for an earlier row's.
func (p *replicatedPair) checkpoint(ctx context.Context) error {
	for _, c := range []*pgcluster.Cluster{p.primary, p.standby} {
		db, err := sql.Open("postgres", c.DSN("postgres"))
		if err != nil {
			return err
		}
		_, err = db.ExecContext(ctx, `CHECKPOINT`)
		db.Close()
		if err != nil {
			return fmt.Errorf("checkpoint the pair: %w", err)
		}
	}
	return nil
}

// remove stops and removes both clusters.
func (p *replicatedPair) remove() {
	for _, c := range []*pgcluster.Cluster{p.standby, p.primary} {
		if c != nil {
			c.Remove()
		}
	}
}
