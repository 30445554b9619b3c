package rexclient_test

import (
	"context"
	"errors"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
)

// TestAbandonedOpenSessionExecStopsTheProcess: a caller that gives up on
// a pipelined session.open + exec.start before either answer leaves
// nothing running once the late answers arrive, with the connection kept
// open (a pooled one lives on). Before, the abandoned session.open's
// answer was dropped, so the exec.start's undo named no session and the
// process ran on in a session nobody knew.
func TestAbandonedOpenSessionExecStopsTheProcess(t *testing.T) {
	c, v, root := valvedClient(t, nil)
	v.set(true)

	pidFile := filepath.Join(root, "pid")
	ctx, cancel := context.WithCancel(context.Background())
	po, err := c.SendSessionExec(protocol.SessionOpenParams{ClientName: "t"},
		protocol.ExecStartParams{Argv: []string{"sh", "-c", "echo $$ > pid; exec sleep 60"}}, rexclient.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pid := readPid(t, pidFile) // rexd started it; both answers are held
	cancel()
	if _, _, _, err := po.Wait(ctx); !errors.Is(err, context.Canceled) || !errors.Is(err, rexclient.ErrMayHaveStarted) {
		t.Fatalf("Wait returned %v, want context.Canceled and ErrMayHaveStarted", err)
	}
	v.set(false)
	// No event tells the test that rexd stopped it: poll, bounded.
	waitFor(t, func() bool { return syscall.Kill(pid, 0) != nil })
}

// TestAbandonedOpenSessionIsClosed: a session.open the caller gave up on
// (a cancelled AcquireAs) does not leave its session open on rexd for as
// long as the connection lives: each one counted against the user's
// max_concurrent_sessions there until none could open.
func TestAbandonedOpenSessionIsClosed(t *testing.T) {
	// Sessions are counted per user in a registry: this rexd's own.
	c, v, _ := valvedClient(t, []string{"XDG_CACHE_HOME=" + t.TempDir()}, "--limit", "max_concurrent_sessions=1")
	v.set(true)

	ctx, cancel := context.WithCancel(context.Background())
	opened := make(chan error, 1)
	go func() {
		_, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "t"})
		opened <- err
	}()
	waitFor(t, v.isHolding) // rexd opened it; the answer is held
	cancel()
	if err := <-opened; !errors.Is(err, context.Canceled) {
		t.Fatalf("OpenSession returned %v, want context.Canceled", err)
	}
	v.set(false)
	// The late answer closes the session on its own goroutine; nothing
	// tells the test when: poll, bounded, until the one session allowed
	// can open again.
	var err error
	defer func() {
		if t.Failed() {
			t.Logf("the last open: %v", err)
		}
	}()
	waitFor(t, func() bool {
		var s *rexclient.Session
		if s, err = c.OpenSession(context.Background(), protocol.SessionOpenParams{ClientName: "t"}); err == nil {
			s.Close(context.Background())
		}
		return err == nil
	})
}
