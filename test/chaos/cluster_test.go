//go:build chaos

package chaos

import (
	"testing"

	"github.com/leaseapi/leaseapi/internal/pgcluster"
)

// cluster is the suite's private PostgreSQL cluster: the harness restarts,
// crashes and freezes it.
type cluster = pgcluster.Cluster

func startCluster(t *testing.T, conf []string) *cluster { return pgcluster.Start(t, conf) }

func freePort(t *testing.T) int { return pgcluster.FreePort(t) }
