package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leaseapi/leaseapi/internal/metrics"
	"github.com/leaseapi/leaseapi/internal/version"
)

func TestBuildInfo(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	info := version.Info{Version: "1.2.3", Commit: "23bd4ba", CommitTime: "2026-12-06T10:00:00Z", GoVersion: "go1.26.8"}
	if err := metrics.RegisterBuildInfo(reg, info); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP leaseapi_build_info Always 1; the labels are the version, commit and Go of the build that serves.
# TYPE leaseapi_build_info gauge
leaseapi_build_info{commit="23bd4ba",goversion="go1.26.8",version="1.2.3"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "leaseapi_build_info"); err != nil {
		t.Error(err)
	}
	if err := metrics.RegisterBuildInfo(reg, info); err == nil {
		t.Error("a second RegisterBuildInfo on the same registry succeeded, want the duplicate refused")
	}
}
