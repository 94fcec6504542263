package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/internal/metrics"
)

// TestGroupSeries: the refresher reads the first groups from the store
// into leaseapi_group_limit and leaseapi_group_held, with their team, says
// when groups were left out, and a group that is gone disappears.
func TestGroupSeries(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	reg, m := newMetrics(t)
	if err := m.EnableGroupSeries(reg, 2); err != nil {
		t.Fatal(err)
	}
	if err := m.EnableGroupSeries(reg, 2); err == nil {
		t.Error("EnableGroupSeries twice: no error")
	}
	s := openSQLite(t, nil)
	for _, g := range []struct {
		name  string
		limit int
	}{{"billing:warehouse", 2}, {"ops.partner", 1}, {"zz-left-out", 5}} {
		if _, err := s.PutGroup(ctx, &leaseapi.PutGroupParams{Name: g.name, Limit: g.limit, By: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	group := "billing:warehouse"
	if _, err := s.Acquire(ctx, &leaseapi.AcquireParams{JobID: "billing:report", Owner: "a", TTL: time.Hour, Group: &group}); err != nil {
		t.Fatal(err)
	}
	r, err := metrics.NewStatsRefresher(s, m, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := metrics.RefreshOnce(ctx, r); err != nil {
		t.Fatal(err)
	}
	const want = `
# HELP leaseapi_group_held Slots of the concurrency group in use (above the limit for a while after it was lowered). As of the last refresh.
# TYPE leaseapi_group_held gauge
leaseapi_group_held{group="billing:warehouse",team="billing:"} 1
leaseapi_group_held{group="ops.partner",team="ops."} 0
# HELP leaseapi_group_limit How many of the concurrency group's jobs may hold a lease at once. As of the last refresh.
# TYPE leaseapi_group_limit gauge
leaseapi_group_limit{group="billing:warehouse",team="billing:"} 2
leaseapi_group_limit{group="ops.partner",team="ops."} 1
# HELP leaseapi_group_metrics_truncated 1 when groups were left out of the per-group series (they cover the first groups in name order), as of the last refresh; else 0.
# TYPE leaseapi_group_metrics_truncated gauge
leaseapi_group_metrics_truncated 1
`
	names := []string{"leaseapi_group_held", "leaseapi_group_limit", "leaseapi_group_metrics_truncated"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}

	m.SetGroups(leaseapi.GroupPage{Groups: []leaseapi.Group{{Name: "ops.partner", Limit: 3}}})
	if got, err := testutil.GatherAndCount(reg, "leaseapi_group_limit"); err != nil || got != 1 {
		t.Errorf("leaseapi_group_limit after billing:warehouse went: %d series (%v), want 1", got, err)
	}
}

// TestNoGroupSeriesByDefault: without EnableGroupSeries no series carries
// a group.
func TestNoGroupSeriesByDefault(t *testing.T) {
	t.Parallel()
	reg, m := newMetrics(t)
	m.SetGroups(leaseapi.GroupPage{Groups: []leaseapi.Group{{Name: "billing:warehouse", Limit: 1}}})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "leaseapi_group_") {
			t.Errorf("%s exported without EnableGroupSeries", f.GetName())
		}
	}
}
