package fanout_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
)

// swallow passes writes on to w until shut, then discards them: requests
// the client sends (an exec.kill) never reach rexd, and go unanswered.
type swallow struct {
	mu   sync.Mutex
	shut bool
	w    io.Writer
}

func (s *swallow) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shut {
		return len(p), nil
	}
	return s.w.Write(p)
}

func (s *swallow) close() {
	s.mu.Lock()
	s.shut = true
	s.mu.Unlock()
}

// TestNoOutputAfterTheResult: a cancelled target whose process does not
// confirm its end within killWait is reported (EventResult) and is then
// done: the output that process goes on sending is not emitted after its
// result, where a front end has finished with the target (and the
// secrets maskers were flushed). Before, it streamed on as long as the
// connection lived.
func TestNoOutputAfterTheResult(t *testing.T) {
	dir := t.TempDir()
	sw := &swallow{}
	var cmd *exec.Cmd
	conn := fanout.ConnectorFunc(func(ctx context.Context, tg fanout.Target) (*fanout.Conn, error) {
		cmd = exec.Command(rexdBin, "--stdio", "--root", dir, "--no-audit", "--limit", "default_timeout_ms=0")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		sw.w = in
		c := rexclient.NewConn(out, sw, closerFunc(func() error { in.Close(); return cmd.Wait() }))
		s, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "fanout-test"})
		if err != nil {
			c.Close()
			return nil, err
		}
		return &fanout.Conn{Session: s, Closer: c}, nil
	})
	pool := fanout.NewPool(conn, fanout.PoolOptions{})
	defer pool.Close()

	var mu sync.Mutex
	reported, late := false, 0
	onEvent := func(ev fanout.Event) {
		mu.Lock()
		defer mu.Unlock()
		if reported {
			late++
		}
		if ev.Kind == fanout.EventResult {
			reported = true
		}
	}
	pidFile, ticks := filepath.Join(dir, "pid"), filepath.Join(dir, "ticks")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *fanout.Summary)
	go func() {
		done <- fanout.Run(ctx, pool, targets("h1"), fanout.Task{
			Command: "echo $$ > pid; while :; do echo tick; echo tick >> ticks; sleep 0.05; done", Cwd: dir,
		}, fanout.Options{OnEvent: onEvent})
	}()
	waitLines(t, pidFile, 1)
	defer func() {
		b, _ := os.ReadFile(pidFile)
		var pid int
		for _, f := range strings.Fields(string(b)) {
			pid = atoi(f)
		}
		syscall.Kill(-pid, syscall.SIGKILL) // the loop and its sleep
	}()
	sw.close() // the kill will not reach rexd: the process runs on
	cancel()
	s := <-done
	if !s.Results[0].Cancelled {
		t.Fatalf("result %+v, want cancelled", s.Results[0])
	}
	// The process writes each tick to stdout, then to the file: once
	// the file has 20 more, so much output reached rexd after the
	// result. No event says it reached the client: bounded poll on the file.
	b, _ := os.ReadFile(ticks)
	waitLines(t, ticks, len(strings.Fields(string(b)))+20)
	pool.Close() // the client has read everything rexd sent
	mu.Lock()
	defer mu.Unlock()
	if late > 0 {
		t.Fatalf("%d events emitted after the target's result", late)
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	return n
}
