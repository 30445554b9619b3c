package rexclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rexconsole/rex/internal/secrets"
)

// localCloseGrace is how long a local rexd has to finish after its input
// closes before it is killed.
const localCloseGrace = 5 * time.Second

// StartLocal runs `rexdPath --stdio args...` as a subprocess and returns a
// client speaking to it: the `local` target. Closing the client closes
// rexd's input, which ends its non-detached processes, and waits for it.
func StartLocal(ctx context.Context, rexdPath string, args ...string) (*Client, error) {
	cmd := exec.Command(rexdPath, append([]string{"--stdio"}, args...)...)
	// The local rexd and every process it starts (an agent's `env` among
	// them) go without rex's own secrets, as a remote host's do; a
	// device's secrets reach a process only as the variables it was
	// given, masked in its output.
	cmd.Env = secrets.Environ()
	// rexd gets its own process group so a ctrl+c meant for the console
	// does not reach it (and its children) directly.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("start local rexd: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start local rexd: %w", err)
	}
	stderr := &tailBuffer{max: 4096}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start local rexd %s: %w", rexdPath, err)
	}
	lc := &localCloser{cmd: cmd, stdin: stdin, stderr: stderr, exited: make(chan struct{})}
	go func() {
		lc.waitErr = cmd.Wait()
		close(lc.exited)
	}()
	return NewConn(stdout, stdin, lc), nil
}

type localCloser struct {
	cmd     *exec.Cmd
	stdin   io.Closer
	stderr  *tailBuffer
	exited  chan struct{}
	waitErr error
	once    sync.Once
}

func (l *localCloser) Close() error {
	l.once.Do(func() {
		l.stdin.Close()
		select {
		case <-l.exited:
		case <-time.After(localCloseGrace):
			l.cmd.Process.Kill()
			<-l.exited
		}
	})
	var ee *exec.ExitError
	if l.waitErr != nil && !errors.As(l.waitErr, &ee) {
		return l.waitErr
	}
	if l.waitErr != nil {
		if msg := strings.TrimSpace(l.stderr.String()); msg != "" {
			return fmt.Errorf("local rexd: %s", msg)
		}
	}
	return nil
}

// tailBuffer keeps the last max bytes written (rexd's stderr, for errors).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}
