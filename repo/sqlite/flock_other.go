//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly || android || ios)

package sqlite

import (
	"errors"
	"os"
)

// lockExclusive would take the embedded store's single-instance lock. This
// platform has no flock, and running without the lock could let two
// instances grant the same lease, so the embedded store refuses to open.
func lockExclusive(string) (*os.File, error) {
	return nil, errors.New("the embedded store needs flock, which this platform lacks; use Postgres (LEASEAPI_DATABASE_URL)")
}
