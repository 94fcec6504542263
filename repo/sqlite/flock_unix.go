//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly || android || ios

package sqlite

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// lockWait is how long lockExclusive waits for a held lock to be
// let go: by an instance that is still exiting while its successor starts,
// or by a child process that this process is forking, which holds a copy
// of every open file description (and so of the lock) until it execs.
const lockWait = time.Second

// lockExclusive opens path and takes an exclusive flock on it, held until
// the returned file is closed, or gives up after lockWait. flock locks
// belong to the open file description, so two stores in one process
// conflict just as two processes do, and the kernel drops the lock when the
// process dies: a crash never leaves a stale lock behind.
func lockExclusive(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(lockWait)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errInUse
		}
		return nil, err
	}
	return f, nil
}
