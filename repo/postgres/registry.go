package postgres

import (
	"context"
	"time"

	"github.com/leaseapi/leaseapi"
)

var _ leaseapi.Registry = (*Store)(nil)

// staleInstanceAge is how long the record of an instance that stopped
// without deleting it (a crash, SIGKILL) is kept before RecordInstance
// deletes it.
const staleInstanceAge = 24 * time.Hour

const (
	recordInstanceQuery = `
WITH stale AS (
    DELETE FROM instances WHERE seen_at < now() - make_interval(secs => $5)
), recorded AS (
    INSERT INTO instances (id, host, version, feature_level) VALUES ($1, $2, $3, $4)
    ON CONFLICT (id) DO UPDATE SET seen_at = now()
)
SELECT level FROM feature_level`
	forgetInstanceQuery = `DELETE FROM instances WHERE id = $1`
	liveInstancesQuery  = `
SELECT id, host, version, feature_level, started_at, seen_at FROM instances
WHERE seen_at > now() - make_interval(secs => $1)
ORDER BY started_at, id`
	featureLevelQuery      = `SELECT level FROM feature_level`
	lockFeatureLevelQuery  = `SELECT level FROM feature_level FOR UPDATE`
	raiseFeatureLevelQuery = `UPDATE feature_level SET level = $1, finalized_at = now() WHERE level < $1`
)

// The registry's statements run also while replicated durability refuses
// lease calls (bypassGuard): they decide no lease, and an instance must
// record itself to start.

// RecordInstance records in as seen now. See leaseapi.Registry.
func (p *Store) RecordInstance(ctx context.Context, in leaseapi.Instance) (int, error) {
	return bounded(bypassGuard(ctx), func(ctx context.Context) (int, error) {
		var level int
		err := p.db.GetContext(ctx, &level, recordInstanceQuery,
			in.ID, in.Host, in.Version, in.Level, staleInstanceAge.Seconds())
		return level, interpretError("record instance", err)
	})
}

// ForgetInstance deletes the instance's record. See leaseapi.Registry.
func (p *Store) ForgetInstance(ctx context.Context, id string) error {
	_, err := bounded(bypassGuard(ctx), func(ctx context.Context) (struct{}, error) {
		_, err := p.db.ExecContext(ctx, forgetInstanceQuery, id)
		return struct{}{}, interpretError("forget instance", err)
	})
	return err
}

// Instances returns the live instances and the finalized level. See
// leaseapi.Registry.
func (p *Store) Instances(ctx context.Context, live time.Duration) ([]leaseapi.Instance, int, error) {
	return bounded2(bypassGuard(ctx), func(ctx context.Context) ([]leaseapi.Instance, int, error) {
		var level int
		if err := p.db.GetContext(ctx, &level, featureLevelQuery); err != nil {
			return nil, 0, interpretError("instances", err)
		}
		list, err := p.liveInstances(ctx, p.db, live)
		return list, level, err
	})
}

// Finalize raises the finalized level when no live instance is older. See
// leaseapi.Registry.
func (p *Store) Finalize(ctx context.Context, level int, live time.Duration) error {
	_, err := bounded(bypassGuard(ctx), func(ctx context.Context) (struct{}, error) {
		tx, err := p.db.BeginTxx(ctx, nil)
		if err != nil {
			return struct{}{}, interpretError("finalize", err)
		}
		defer func() { _ = tx.Rollback() }()
		// The lock orders concurrent finalizes; an instance that starts
		// after this read sees the new level when it records itself and
		// refuses to serve if its build is older (cmd/leaseapi).
		var current int
		if err := tx.GetContext(ctx, &current, lockFeatureLevelQuery); err != nil {
			return struct{}{}, interpretError("finalize", err)
		}
		if level <= current {
			return struct{}{}, nil
		}
		list, err := p.liveInstances(ctx, tx, live)
		if err != nil {
			return struct{}{}, err
		}
		if err := leaseapi.CheckFinalize(level, list); err != nil {
			return struct{}{}, err
		}
		if _, err := tx.ExecContext(ctx, raiseFeatureLevelQuery, level); err != nil {
			return struct{}{}, interpretError("finalize", err)
		}
		return struct{}{}, interpretError("finalize", tx.Commit())
	})
	return err
}

type instanceRow struct {
	ID        string    `db:"id"`
	Host      string    `db:"host"`
	Version   string    `db:"version"`
	Level     int       `db:"feature_level"`
	StartedAt time.Time `db:"started_at"`
	SeenAt    time.Time `db:"seen_at"`
}

func (p *Store) liveInstances(ctx context.Context, q querier, live time.Duration) ([]leaseapi.Instance, error) {
	var rows []instanceRow
	if err := q.SelectContext(ctx, &rows, liveInstancesQuery, live.Seconds()); err != nil {
		return nil, interpretError("instances", err)
	}
	list := make([]leaseapi.Instance, len(rows))
	for i, r := range rows {
		list[i] = leaseapi.Instance{ID: r.ID, Host: r.Host, Version: r.Version, Level: r.Level,
			StartedAt: r.StartedAt.UTC(), SeenAt: r.SeenAt.UTC()}
	}
	return list, nil
}
