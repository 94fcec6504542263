package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leaseapi/leaseapi/internal/metrics"
)

// The database metrics show the last replication check and read the
// store's count of cancelled commit waits at each scrape.
func TestDatabaseMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	var cancelled uint64 = 3
	d, err := metrics.NewDatabase(reg, func() uint64 { return cancelled })
	if err != nil {
		t.Fatal(err)
	}
	d.SetReplication(4, 1)
	names := []string{"leaseapi_database_timeline", "leaseapi_database_sync_standbys", "leaseapi_commit_waits_cancelled_total"}
	want := func(timeline, standbys, cancelled string) string {
		return `
# HELP leaseapi_commit_waits_cancelled_total Commits that came back with Postgres's "canceling wait for synchronous replication" warning: visible on the primary, maybe on no standby; each was answered 503, never acknowledged.
# TYPE leaseapi_commit_waits_cancelled_total counter
leaseapi_commit_waits_cancelled_total ` + cancelled + `
# HELP leaseapi_database_sync_standbys Standbys streaming from the primary as synchronous (or quorum) standbys; -1 when the database role lacks pg_monitor and cannot see them.
# TYPE leaseapi_database_sync_standbys gauge
leaseapi_database_sync_standbys ` + standbys + `
# HELP leaseapi_database_timeline The Postgres primary's current WAL timeline (from pg_walfile_name(pg_current_wal_lsn())); it grows by one at every promotion. 0 while the database is in recovery.
# TYPE leaseapi_database_timeline gauge
leaseapi_database_timeline ` + timeline + `
`
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want("4", "1", "3")), names...); err != nil {
		t.Error(err)
	}
	cancelled = 5
	d.SetReplication(5, -1)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want("5", "-1", "5")), names...); err != nil {
		t.Error(err)
	}
}
