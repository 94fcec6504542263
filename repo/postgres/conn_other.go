//go:build !linux

package postgres

import (
	"syscall"
	"time"
)

// setUserTimeout is a no-op where TCP_USER_TIMEOUT does not exist; the
// per-operation socket deadlines still bound every call.
func setUserTimeout(time.Duration) func(network, address string, c syscall.RawConn) error {
	return nil
}
