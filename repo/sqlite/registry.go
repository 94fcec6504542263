package sqlite

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/leaseapi/leaseapi"
)

var _ leaseapi.Registry = (*Store)(nil)

// staleInstanceAge: as in the Postgres store.
const staleInstanceAge = 24 * time.Hour

const (
	deleteStaleInstancesQuery = `DELETE FROM instances WHERE seen_at < $1`
	recordInstanceQuery       = `
INSERT INTO instances (id, host, version, feature_level, started_at, seen_at) VALUES ($1, $2, $3, $4, $5, $5)
ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at`
	forgetInstanceQuery = `DELETE FROM instances WHERE id = $1`
	liveInstancesQuery  = `
SELECT id, host, version, feature_level, started_at, seen_at FROM instances
WHERE seen_at > $1 ORDER BY started_at, id`
	featureLevelQuery      = `SELECT level FROM feature_level`
	raiseFeatureLevelQuery = `UPDATE feature_level SET level = $1, finalized_at = $2 WHERE level < $1`
)

// RecordInstance records in as seen now. See leaseapi.Registry.
func (s *Store) RecordInstance(ctx context.Context, in leaseapi.Instance) (int, error) {
	return transact(ctx, s, "record instance", s.writeTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (int, error) {
		if _, err := tx.ExecContext(ctx, deleteStaleInstancesQuery, now-staleInstanceAge.Milliseconds()); err != nil {
			return 0, err
		}
		if _, err := tx.ExecContext(ctx, recordInstanceQuery, in.ID, in.Host, in.Version, in.Level, now); err != nil {
			return 0, err
		}
		var level int
		return level, tx.GetContext(ctx, &level, featureLevelQuery)
	})
}

// ForgetInstance deletes the instance's record. See leaseapi.Registry.
func (s *Store) ForgetInstance(ctx context.Context, id string) error {
	_, err := transact(ctx, s, "forget instance", s.writeTx, func(ctx context.Context, tx *sqlx.Tx, _ int64) (struct{}, error) {
		_, err := tx.ExecContext(ctx, forgetInstanceQuery, id)
		return struct{}{}, err
	})
	return err
}

// Instances returns the live instances and the finalized level. See
// leaseapi.Registry.
func (s *Store) Instances(ctx context.Context, live time.Duration) ([]leaseapi.Instance, int, error) {
	type result struct {
		list  []leaseapi.Instance
		level int
	}
	r, err := transact(ctx, s, "instances", s.readTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (result, error) {
		var r result
		if err := tx.GetContext(ctx, &r.level, featureLevelQuery); err != nil {
			return r, err
		}
		var err error
		r.list, err = liveInstances(ctx, tx, now, live)
		return r, err
	})
	return r.list, r.level, err
}

// Finalize raises the finalized level when no live instance is older. See
// leaseapi.Registry.
func (s *Store) Finalize(ctx context.Context, level int, live time.Duration) error {
	_, err := transact(ctx, s, "finalize", s.writeTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (struct{}, error) {
		list, err := liveInstances(ctx, tx, now, live)
		if err != nil {
			return struct{}{}, err
		}
		if err := leaseapi.CheckFinalize(level, list); err != nil {
			return struct{}{}, err
		}
		_, err = tx.ExecContext(ctx, raiseFeatureLevelQuery, level, now)
		return struct{}{}, err
	})
	return err
}

// finalizeSelf raises the level to this build's: the embedded store is
// served by one process at a time (the file lock), so when it starts it
// is every instance there is.
func (s *Store) finalizeSelf(ctx context.Context) error {
	return s.writeTx(ctx, func(tx *sqlx.Tx, now int64) error {
		_, err := tx.ExecContext(ctx, raiseFeatureLevelQuery, leaseapi.FeatureLevel, now)
		return err
	})
}

type instanceRow struct {
	ID        string `db:"id"`
	Host      string `db:"host"`
	Version   string `db:"version"`
	Level     int    `db:"feature_level"`
	StartedAt int64  `db:"started_at"`
	SeenAt    int64  `db:"seen_at"`
}

func liveInstances(ctx context.Context, tx *sqlx.Tx, now int64, live time.Duration) ([]leaseapi.Instance, error) {
	var rows []instanceRow
	if err := tx.SelectContext(ctx, &rows, liveInstancesQuery, now-live.Milliseconds()); err != nil {
		return nil, err
	}
	list := make([]leaseapi.Instance, len(rows))
	for i, r := range rows {
		list[i] = leaseapi.Instance{ID: r.ID, Host: r.Host, Version: r.Version, Level: r.Level,
			StartedAt: fromMs(r.StartedAt), SeenAt: fromMs(r.SeenAt)}
	}
	return list, nil
}
