package rexclient_test

import (
	"context"
	"errors"
	"os/exec"
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
	root := t.TempDir()
	cmd := exec.Command(rexdBin, "--stdio", "--root", root, "--no-audit")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	v := newValve(out)
	c := rexclient.NewConn(v.pr, in, in)
	t.Cleanup(func() { v.set(false); c.Close(); cmd.Wait() })
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
