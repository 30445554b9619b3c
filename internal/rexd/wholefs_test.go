package rexd_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestWholeFileSystemRoot: with --root / (what rex passes for a device
// without roots) a session starts in the home directory, relative paths
// start there, and a path outside the home is reachable.
func TestWholeFileSystemRoot(t *testing.T) {
	h := start(t, "--root", "/")
	var open protocol.SessionOpenResult
	h.ok(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "test"}, &open)
	if open.Cwd != h.root {
		t.Errorf("cwd %q, want the home directory %q", open.Cwd, h.root)
	}
	if len(open.WorkspaceRoots) != 1 || open.WorkspaceRoots[0] != "/" {
		t.Errorf("roots %v, want [/]", open.WorkspaceRoots)
	}
	if err := os.WriteFile(filepath.Join(h.root, "rel.txt"), []byte("home"), 0o644); err != nil {
		t.Fatal(err)
	}
	var rd protocol.FSReadResult
	h.ok(protocol.MethodFSRead, protocol.FSReadParams{SessionID: open.SessionID, Path: "rel.txt"}, &rd)
	if rd.Content != "home" {
		t.Errorf("relative read %q", rd.Content)
	}
	outside := filepath.Join(t.TempDir(), "out.txt")
	os.WriteFile(outside, []byte("outside"), 0o644)
	h.ok(protocol.MethodFSRead, protocol.FSReadParams{SessionID: open.SessionID, Path: outside}, &rd)
	if rd.Content != "outside" {
		t.Errorf("read outside the home: %q", rd.Content)
	}
}
