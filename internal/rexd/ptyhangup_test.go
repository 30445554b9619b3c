package rexd_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestPTYShellExitHangsUpItsJobs: when the program on a terminal ends on
// its own (the user types exit), the background jobs it leaves on the
// terminal are hung up, as closing an ssh session does, and pty.exit goes
// out. rexd hung them up only after pty.exit, which waited for them to
// end: a 'sleep 60 &' left in an interactive shell kept the terminal
// open, pty.exit unsent and the process counted for its whole minute
// (for a longer job, up to the drain loop's bound of half an hour).
func TestPTYShellExitHangsUpItsJobs(t *testing.T) {
	h := start(t)
	sid := h.open()
	pidFile := filepath.Join(h.root, "pids")
	p := h.openPTY(protocol.PTYOpenParams{SessionID: sid, Argv: []string{"bash", "--norc", "--noprofile", "-i"}})
	h.typeInto(sid, p, "sleep 60 & echo $! >> pids; echo $$ >> pids\n")
	waitPidFile(t, pidFile, 2)
	if n := len(pidsAlive(t, pidFile)); n != 2 {
		t.Fatalf("%d of 2 test processes alive", n)
	}
	h.typeInto(sid, p, "exit\n")
	exit := h.exitOf(p.ProcessID, 20*time.Second)
	if exit.ExitCode == nil || *exit.ExitCode != 0 {
		t.Errorf("pty.exit: %+v, want the shell's exit 0", exit)
	}
	noneAliveWithin(t, pidFile, 20*time.Second)
}
