package rexd_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestWorkspaceRootsCannotExhaustDescriptors: session.open holds one
// descriptor per workspace root for the session's life. With no bound on
// how many a request names, one session.open (a line of under a
// megabyte) took every descriptor rexd may have, and the other sessions
// of the connection could no longer start a process (pipe2: too many open
// files) nor use the per-user limits' registry. At most 64 are taken.
func TestWorkspaceRootsCannotExhaustDescriptors(t *testing.T) {
	h := start(t)
	other := h.open()
	tooMany := make([]string, 65)
	for i := range tooMany {
		tooMany[i] = h.root
	}
	h.fails(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "greedy", WorkspaceRoots: tooMany}, protocol.CodeResourceLimit)
	pid := strconv.Itoa(h.cmd.Process.Pid)
	b, err := os.ReadFile("/proc/" + pid + "/limits")
	if err != nil {
		t.Skip("no /proc")
	}
	limit := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Max open files") {
			limit, _ = strconv.Atoi(strings.Fields(l)[3])
		}
	}
	fds, _ := os.ReadDir("/proc/" + pid + "/fd")
	if limit-len(fds) > 200_000 {
		t.Skipf("a descriptor limit of %d takes more roots than a request line holds", limit)
	}
	roots := make([]string, limit-len(fds)-1)
	for i := range roots {
		roots[i] = h.root
	}
	t.Logf("descriptor limit %d, %d in use, asking for %d roots", limit, len(fds), len(roots))
	m := h.call(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "greedy", WorkspaceRoots: roots})
	if m.Error == nil || m.Error.Code != protocol.CodeResourceLimit {
		t.Errorf("session.open with %d workspace roots: %v, want %d", len(roots), m.Error, protocol.CodeResourceLimit)
	}
	h.ok(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "fine", WorkspaceRoots: roots[:64]}, nil)
	_, errOut, exit := h.run(other, protocol.ExecStartParams{Argv: []string{"true"}})
	if exit.ExitCode == nil || *exit.ExitCode != 0 {
		t.Fatalf("another session's exec.start after one session.open: exit %+v, %q, %v", exit, errOut, h.errorEvents(exit.ProcessID))
	}
}
