package metrics

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaseapi/leaseapi"
)

// groupSeries are the per-group series: the last page of groups the
// refresher read, served whole at every scrape and replaced whole at every
// refresh, as the per-job series are.
type groupSeries struct {
	page atomic.Pointer[leaseapi.GroupPage]

	limit, held, truncated *prometheus.Desc
}

// DefaultGroupSeriesLimit is how many groups have series by default.
const DefaultGroupSeriesLimit = 1000

// groupLabels are the labels of every per-group series.
var groupLabels = []string{"group", "team"}

func newGroupSeries() *groupSeries {
	return &groupSeries{
		limit: prometheus.NewDesc("leaseapi_group_limit",
			"How many of the concurrency group's jobs may hold a lease at once. As of the last refresh.", groupLabels, nil),
		held: prometheus.NewDesc("leaseapi_group_held",
			"Slots of the concurrency group in use (above the limit for a while after it was lowered). As of the last refresh.", groupLabels, nil),
		truncated: prometheus.NewDesc("leaseapi_group_metrics_truncated",
			"1 when groups were left out of the per-group series (they cover the first groups in name order), as of the last refresh; else 0.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (s *groupSeries) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.limit
	ch <- s.held
	ch <- s.truncated
}

// Collect implements prometheus.Collector.
func (s *groupSeries) Collect(ch chan<- prometheus.Metric) {
	page := s.page.Load()
	if page == nil {
		ch <- prometheus.MustNewConstMetric(s.truncated, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(s.truncated, prometheus.GaugeValue, bit(page.More))
	for i := range page.Groups {
		g := &page.Groups[i]
		labels := []string{g.Name, Team(g.Name)}
		ch <- prometheus.MustNewConstMetric(s.limit, prometheus.GaugeValue, float64(g.Limit), labels...)
		ch <- prometheus.MustNewConstMetric(s.held, prometheus.GaugeValue, float64(g.Held), labels...)
	}
}

// EnableGroupSeries registers the per-group series on reg (labels group
// and team: group names are named like job ids, so they go where the
// per-job series go): from then on the refresher also reads the first
// limit groups (at least 1) at every refresh, by one query of the store.
func (m *Leases) EnableGroupSeries(reg prometheus.Registerer, limit int) error {
	if limit < 1 {
		return fmt.Errorf("per-group series: limit %d must be at least 1", limit)
	}
	if m.groups != nil {
		return fmt.Errorf("per-group series: already enabled")
	}
	s := newGroupSeries()
	if err := reg.Register(s); err != nil {
		return fmt.Errorf("register per-group series: %w", err)
	}
	m.groups, m.groupLimit = s, limit
	return nil
}

// SetGroups replaces the per-group series with page's; a no-op unless
// EnableGroupSeries was called.
func (m *Leases) SetGroups(page leaseapi.GroupPage) {
	if m.groups == nil {
		return
	}
	// Only the names, limits and counts are served: the holders are
	// dropped rather than kept until the next refresh.
	kept := leaseapi.GroupPage{Groups: make([]leaseapi.Group, len(page.Groups)), More: page.More}
	for i, g := range page.Groups {
		kept.Groups[i] = leaseapi.Group{Name: g.Name, Limit: g.Limit, Held: g.Held}
	}
	m.groups.page.Store(&kept)
}

// refreshGroups reads the first groups into the per-group series.
func (m *Leases) refreshGroups(ctx context.Context, store leaseapi.Store) error {
	page, err := store.Groups(ctx, &leaseapi.GroupListParams{Limit: m.groupLimit})
	if err != nil {
		return fmt.Errorf("per-group series: %w", err)
	}
	m.SetGroups(page)
	return nil
}
