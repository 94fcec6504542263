package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Database are the metrics of the Postgres primary's replication, set by
// the store's replication check every few seconds (not per request).
type Database struct {
	timeline     prometheus.Gauge
	syncStandbys prometheus.Gauge
}

// NewDatabase registers the database metrics on reg;
// commitWaitsCancelled reads the store's count of commits whose wait for
// the synchronous standby was cancelled.
func NewDatabase(reg prometheus.Registerer, commitWaitsCancelled func() uint64) (*Database, error) {
	d := &Database{
		timeline: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "leaseapi_database_timeline",
			Help: "The Postgres primary's current WAL timeline (from pg_walfile_name(pg_current_wal_lsn())); it grows by one at every promotion. 0 while the database is in recovery.",
		}),
		syncStandbys: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "leaseapi_database_sync_standbys",
			Help: "Standbys streaming from the primary as synchronous (or quorum) standbys; -1 when the database role lacks pg_monitor and cannot see them.",
		}),
	}
	cancelled := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "leaseapi_commit_waits_cancelled_total",
		Help: "Commits that came back with Postgres's \"canceling wait for synchronous replication\" warning: visible on the primary, maybe on no standby; each was answered 503, never acknowledged.",
	}, func() float64 { return float64(commitWaitsCancelled()) })
	for _, c := range []prometheus.Collector{d.timeline, d.syncStandbys, cancelled} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register database metrics: %w", err)
		}
	}
	return d, nil
}

// SetReplication sets the gauges from a replication check.
func (d *Database) SetReplication(timeline, syncStandbys int64) {
	d.timeline.Set(float64(timeline))
	d.syncStandbys.Set(float64(syncStandbys))
}
