package rexd_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestWritePermWithSpecialBits: fs.write took perm as an octal mode
// up to 07777, but os.Root refuses to create a file with setuid, setgid
// or sticky bits, so "2750" came back as an internal error naming the
// temp file. Such a perm is bad input: an invalid-params error, and no
// file; plain permission bits still work.
func TestWritePermWithSpecialBits(t *testing.T) {
	h := start(t)
	sid := h.open()
	for _, perm := range []string{"2750", "4755", "1777", "10000"} {
		for _, atomic := range []bool{true, false} {
			name := perm + map[bool]string{true: "-atomic", false: "-plain"}[atomic]
			h.fails(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: name, Content: "x", Perm: perm, Atomic: &atomic}, protocol.CodeInvalidParams)
			if _, err := os.Lstat(filepath.Join(h.root, name)); err == nil {
				t.Errorf("perm %s (atomic %v): refused, yet the file was made", perm, atomic)
			}
		}
	}
	atomic := false
	h.ok(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "p", Content: "x", Perm: "0600", Atomic: &atomic}, nil)
	if fi, err := os.Stat(filepath.Join(h.root, "p")); err != nil || fi.Mode()&fs.ModePerm != 0o600 {
		t.Errorf("perm 0600: %v, %v", fi, err)
	}
}

// A path that ends in '/' names a directory: fs.write refuses it rather
// than clean it into a file of that name.
func TestWriteToATrailingSlashIsRefused(t *testing.T) {
	h := start(t)
	sid := h.open()
	for _, atomic := range []bool{true, false} {
		h.fails(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "g/", Content: "x", Atomic: &atomic}, protocol.CodeInvalidParams)
		if _, err := os.Lstat(filepath.Join(h.root, "g")); err == nil {
			t.Fatalf("fs.write g/ (atomic %v) made g", atomic)
		}
	}
}
