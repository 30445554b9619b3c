package rexd_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestReplaceThroughALinkUnderALinkedDirectory: a replace of a
// symlink writes the file the link names, as open(2) would. When the link
// sits in a directory reached through a symlink (conf -> etc/app) and
// names its target with ".." (../shared/site), the kernel resolves ".."
// from the directory the link is really in (etc/shared/site). Resolving it
// lexically from the path as sent gives another file (shared/site at the
// top): the write lands there, the link's target keeps its old content.
func TestReplaceThroughALinkUnderALinkedDirectory(t *testing.T) {
	h := start(t)
	sid := h.open()
	for _, d := range []string{"etc/app", "etc/shared"} {
		if err := os.MkdirAll(filepath.Join(h.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	real := filepath.Join(h.root, "etc/shared/site")
	if err := os.WriteFile(real, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("etc/app", filepath.Join(h.root, "conf")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../shared/site", filepath.Join(h.root, "etc/app/site")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(h.root, "conf/site")); err != nil || string(b) != "old\n" {
		t.Fatalf("setup: conf/site reads %q, %v", b, err)
	}
	for _, atomic := range []bool{true, false} {
		os.WriteFile(real, []byte("old\n"), 0o644)
		os.Remove(filepath.Join(h.root, "shared"))
		h.ok(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "conf/site", Content: "new\n", Atomic: &atomic}, nil)
		if b, _ := os.ReadFile(real); string(b) != "new\n" {
			t.Errorf("atomic=%v: the file the link names (%s) still holds %q", atomic, real, b)
		}
		if _, err := os.Lstat(filepath.Join(h.root, "shared")); err == nil {
			t.Errorf("atomic=%v: the write made %s, a path the link does not name", atomic, filepath.Join(h.root, "shared"))
			os.RemoveAll(filepath.Join(h.root, "shared"))
		}
	}
}
