package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaseapi/leaseapi/internal/version"
)

// RegisterBuildInfo registers leaseapi_build_info, always 1, whose labels
// say which build serves: join on it to tell the instances of a rolling
// upgrade apart (count by (version) (leaseapi_build_info)).
func RegisterBuildInfo(reg prometheus.Registerer, info version.Info) error {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "leaseapi_build_info",
		Help: "Always 1; the labels are the version, commit and Go of the build that serves.",
		ConstLabels: prometheus.Labels{
			"version":   info.Version,
			"commit":    info.Commit,
			"goversion": info.GoVersion,
		},
	})
	g.Set(1)
	return reg.Register(g)
}
