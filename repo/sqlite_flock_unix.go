//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly || android || ios

package repo

import (
	"errors"
	"os"
	"syscall"
)

// lockSQLiteFile opens path and takes an exclusive, non-blocking flock on it,
// held until the returned file is closed. flock locks belong to the open
// file description, so two stores in one process conflict just as two
// processes do, and the kernel drops the lock when the process dies: a
// crash never leaves a stale lock behind.
func lockSQLiteFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errSQLiteInUse
		}
		return nil, err
	}
	return f, nil
}
