package rexd_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestReplaceThroughASymlink: writing to a path that is a symlink
// (sites-enabled/default -> ../sites-available/default, the usual
// layout) replaces the link itself with a regular file: the atomic
// replace renames the temp file over the link. The file the link names
// keeps its old content and the link is gone; the agent's edit of
// /etc/nginx/sites-enabled/default silently forks the configuration.
// (A non-atomic write goes through the link, so the two modes disagree.)
func TestReplaceThroughASymlink(t *testing.T) {
	h := start(t)
	sid := h.open()
	os.MkdirAll(filepath.Join(h.root, "avail"), 0o755)
	os.MkdirAll(filepath.Join(h.root, "enabled"), 0o755)
	real := filepath.Join(h.root, "avail", "site")
	if err := os.WriteFile(real, []byte("listen 80;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(h.root, "enabled", "site")
	if err := os.Symlink("../avail/site", link); err != nil {
		t.Fatal(err)
	}
	h.ok(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "enabled/site", Content: "listen 8080;\n"}, nil)
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced by a regular file (%v)", err)
	}
	if b, _ := os.ReadFile(real); string(b) != "listen 8080;\n" {
		t.Errorf("the file the link names still holds %q", b)
	}
}

// TestCreateOnADanglingLinkStaysAConflict: mode create keeps
// O_EXCL's rule after the symlink fix: a name that exists (a dangling
// link included) is a conflict, and nothing is created where it points.
func TestCreateOnADanglingLinkStaysAConflict(t *testing.T) {
	h := start(t)
	sid := h.open()
	if err := os.Symlink("nowhere", filepath.Join(h.root, "dangling")); err != nil {
		t.Fatal(err)
	}
	h.fails(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "dangling", Content: "x", Mode: "create"}, protocol.CodeConcurrencyConflict)
	if _, err := os.Lstat(filepath.Join(h.root, "nowhere")); err == nil {
		t.Error("create through a dangling link created its target")
	}
}
