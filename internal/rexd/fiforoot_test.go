package rexd_test

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestFIFOAsADirectoryNeverBlocks: a FIFO in the roots named where a
// directory is expected, as a session's workspace root or as the
// directory a glob walks, is refused or matches nothing, at once. Both
// went through os.Root.OpenRoot, which opens its last component with
// neither O_DIRECTORY nor O_NONBLOCK: the open hung until someone wrote
// into the FIFO. session.open runs on the connection's reader, so the
// whole connection stopped answering; each glob held one of the 64
// working slots for good.
func TestFIFOAsADirectoryNeverBlocks(t *testing.T) {
	h := start(t)
	sid := h.open()
	if err := syscall.Mkfifo(filepath.Join(h.root, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, pattern := range []string{"pipe/*", "pipe/x", filepath.Join(h.root, "pipe", "**")} {
		var res protocol.FSGlobResult
		h.ok(protocol.MethodFSGlob, protocol.FSGlobParams{SessionID: sid, Pattern: pattern}, &res)
		if len(res.Matches) != 0 {
			t.Errorf("fs.glob %s: %v", pattern, res.Matches)
		}
	}
	if m := h.call(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "test",
		WorkspaceRoots: []string{filepath.Join(h.root, "pipe")}}); m.Error == nil {
		t.Errorf("session.open with a FIFO as its workspace root: %s", m.Result)
	}
	// The connection still answers.
	var st protocol.FSStatResult
	h.ok(protocol.MethodFSStat, protocol.FSStatParams{SessionID: sid, Path: "pipe"}, &st)
}
