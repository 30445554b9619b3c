package rexclient_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
)

// gate holds back everything rexd says until the client has written n
// request lines: a client that waited for an answer before sending the
// next request would never get one.
type gate struct {
	w    io.Writer
	r    io.Reader
	n    int
	mu   sync.Mutex
	seen int
	open chan struct{}
}

func (g *gate) Write(p []byte) (int, error) {
	g.mu.Lock()
	before := g.seen
	g.seen += bytes.Count(p, []byte("\n"))
	if before < g.n && g.seen >= g.n {
		close(g.open)
	}
	g.mu.Unlock()
	return g.w.Write(p)
}

func (g *gate) Read(p []byte) (int, error) {
	<-g.open
	return g.r.Read(p)
}

type procCloser struct {
	stdin io.Closer
	cmd   *exec.Cmd
}

func (c procCloser) Close() error {
	c.stdin.Close()
	return c.cmd.Wait()
}

// gated starts the real rexd behind a gate of n lines.
func gated(t *testing.T, n int) *rexclient.Client {
	t.Helper()
	cmd := exec.Command(rexdBin, "--stdio", "--root", t.TempDir(), "--no-audit")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &gate{w: stdin, r: stdout, n: n, open: make(chan struct{})}
	if n <= 0 {
		close(g.open) // nothing held back
	}
	c := rexclient.NewConn(g, g, procCloser{stdin, cmd})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestOpenSessionExecIsOneFlight: the session and its first process are
// asked for together; the process's output reaches the caller.
func TestOpenSessionExecIsOneFlight(t *testing.T) {
	c := gated(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	s, proc, startErr, err := c.OpenSessionExec(ctx, protocol.SessionOpenParams{ClientName: "pipe"},
		protocol.ExecStartParams{Argv: []string{"sh", "-c", "echo one flight"}}, rexclient.ExecOptions{Stdout: &out})
	if err != nil || startErr != nil {
		t.Fatalf("OpenSessionExec: %v, start: %v", err, startErr)
	}
	if s.ID == "" || s.Info.SessionID != s.ID {
		t.Errorf("session id %q, info %q", s.ID, s.Info.SessionID)
	}
	exit, err := proc.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if *exit.ExitCode != 0 || out.String() != "one flight\n" {
		t.Errorf("exit %v, stdout %q", *exit.ExitCode, out.String())
	}
	if exit.SessionID != s.ID {
		t.Errorf("the process ran in session %q, not %q", exit.SessionID, s.ID)
	}
	// The session goes on serving.
	proc, err = s.Exec(ctx, protocol.ExecStartParams{Argv: []string{"true"}}, rexclient.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := proc.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if !c.Idle() {
		t.Errorf("client not idle once every process has ended")
	}
}

// TestOpenSessionExecStartFails: the session opens and the start's own
// error is reported apart from it.
func TestOpenSessionExecStartFails(t *testing.T) {
	c := gated(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, proc, startErr, err := c.OpenSessionExec(ctx, protocol.SessionOpenParams{ClientName: "pipe"},
		protocol.ExecStartParams{Argv: []string{"true"}, Cwd: "/nonexistent-dir-of-rex-test"}, rexclient.ExecOptions{})
	if err != nil || s == nil {
		t.Fatalf("the session did not open: %v", err)
	}
	var pe *protocol.Error
	if proc != nil || !errors.As(startErr, &pe) {
		t.Fatalf("start: proc %v, err %v; want a protocol error", proc, startErr)
	}
}

// TestOpenSessionExecOtherBuild: a rexd whose build hash is not one asked
// for opens nothing and runs nothing.
func TestOpenSessionExecOtherBuild(t *testing.T) {
	c := gated(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	s, proc, startErr, err := c.OpenSessionExec(ctx, protocol.SessionOpenParams{ClientName: "pipe", BuildHashes: []string{strings.Repeat("f", 64)}},
		protocol.ExecStartParams{Argv: []string{"echo", "ran"}}, rexclient.ExecOptions{Stdout: &out})
	if err == nil || s != nil || proc != nil {
		t.Fatalf("opened on another build: session %v, proc %v, start err %v", s, proc, startErr)
	}
	if !strings.Contains(err.Error(), "build hash") {
		t.Errorf("error %q does not say why", err)
	}
	if out.Len() != 0 {
		t.Errorf("the command ran: %q", out.String())
	}
}

// TestOpenSessionExecUnansweredMayHaveStarted: when the caller gives up
// after exec.start went out but before any answer, the error says the
// command may have started (it did), and closing the connection stops it.
func TestOpenSessionExecUnansweredMayHaveStarted(t *testing.T) {
	c := gated(t, 3) // two lines go out; rexd's answers are held back
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, _, _, err := c.OpenSessionExec(ctx, protocol.SessionOpenParams{ClientName: "pipe"},
		protocol.ExecStartParams{Argv: []string{"sh", "-c", `echo $$ > "$1"; exec sleep 60`, "sh", pidFile}}, rexclient.ExecOptions{})
	if !errors.Is(err, rexclient.ErrMayHaveStarted) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the deadline and ErrMayHaveStarted", err)
	}
	pid := readPid(t, pidFile)
	c.Close()
	waitFor(t, func() bool { return syscall.Kill(pid, 0) != nil })
}

// TestOpenSessionExecNotSentDidNotStart: a connection that is gone before
// anything went out is not reported as a command that may have started.
func TestOpenSessionExecNotSentDidNotStart(t *testing.T) {
	c := gated(t, 0)
	c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, _, _, err := c.OpenSessionExec(ctx, protocol.SessionOpenParams{ClientName: "pipe"},
		protocol.ExecStartParams{Argv: []string{"true"}}, rexclient.ExecOptions{})
	if err == nil || errors.Is(err, rexclient.ErrMayHaveStarted) {
		t.Fatalf("error %v, want one without ErrMayHaveStarted", err)
	}
}
