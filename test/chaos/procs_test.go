//go:build chaos

package chaos

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one OS process the harness started: a leaseapi instance or a
// replica incarnation. Its output goes to a log file in the artifacts.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}

	mu sync.Mutex
	// expected is set before the harness signals the process to end, so
	// that an exit on its own can be told apart.
	expected bool
	exitErr  error
	exited   time.Time
}

// startProc starts path with args and env, appending its output to logPath.
func startProc(name, path string, args, env []string, logPath string) (*proc, error) {
	return startProcIn(name, path, args, env, logPath, nil, "")
}

// startProcIn is startProc for a process that runs with the credential
// cred (nil: the harness's own) in dir ("": the harness's).
func startProcIn(name, path string, args, env []string, logPath string, cred *syscall.Credential, dir string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Env, cmd.Dir = env, dir
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group: a terminal's signals do not reach it, and the
	// harness signals it alone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.exitErr, p.exited = err, time.Now()
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// exitError is how the process ended (nil while it runs, or when it exited
// with status 0).
func (p *proc) exitError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}

// tail returns the last n lines of the file at path, or why it cannot.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *proc) signal(sig syscall.Signal) {
	if p.alive() {
		_ = syscall.Kill(p.pid(), sig)
	}
}

// kill sends SIGKILL (after SIGCONT, so that a stopped process dies at
// once) and waits for the exit.
func (p *proc) kill() {
	p.mu.Lock()
	p.expected = true
	p.mu.Unlock()
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGKILL)
	<-p.done
}

// stop asks the process to end (SIGCONT, SIGTERM) and kills it when it has
// not exited within grace. It reports whether it ended on its own.
func (p *proc) stop(grace time.Duration) bool {
	p.mu.Lock()
	p.expected = true
	p.mu.Unlock()
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		p.kill()
		return false
	}
}

// unexpectedExit describes an exit the harness did not cause, or "".
func (p *proc) unexpectedExit() string {
	if p.alive() {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.expected {
		// A clean stop still has to be clean.
		var ee *exec.ExitError
		if errors.As(p.exitErr, &ee) && ee.Exited() && ee.ExitCode() != 0 {
			return fmt.Sprintf("%s exited with code %d after SIGTERM", p.name, ee.ExitCode())
		}
		return ""
	}
	return fmt.Sprintf("%s exited on its own at %s: %v", p.name, p.exited.Format("15:04:05.000"), p.exitErr)
}
