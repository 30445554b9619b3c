package rexd_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/protocol"
)

// TestCASMaterializeDestinationNotADirectory: a destination that is a
// file or a symlink is the client's choice of path, refused with -32602
// and the sentence that says why, never internal_error; nothing changes.
func TestCASMaterializeDestinationNotADirectory(t *testing.T) {
	h := start(t)
	sid := h.open()
	tree, _ := cas.Tree{}.Encode()
	td := cas.DigestOf(tree)
	h.ok(protocol.MethodCASPut, protocol.CASPutParams{SessionID: sid, Objects: []protocol.CASObject{{Digest: td.String(), Data: base64.StdEncoding.EncodeToString(tree)}}}, nil)
	os.WriteFile(filepath.Join(h.root, "file"), []byte("keep\n"), 0o644)
	os.Mkdir(filepath.Join(h.root, "dir"), 0o755)
	os.Symlink("dir", filepath.Join(h.root, "link"))
	for _, tc := range []struct{ path, says string }{
		{"file", "is not a directory"},
		{"link", "is a symlink"},
	} {
		for _, atomic := range []bool{false, true} {
			e := h.fails(protocol.MethodCASMaterialize, protocol.CASMaterializeParams{SessionID: sid, Tree: td.String(), Path: tc.path, Atomic: atomic, Delete: true}, protocol.CodeInvalidParams)
			if !strings.Contains(e.Message, tc.says) {
				t.Errorf("%s (atomic %v): %q", tc.path, atomic, e.Message)
			}
		}
	}
	if b, _ := os.ReadFile(filepath.Join(h.root, "file")); string(b) != "keep\n" {
		t.Fatalf("file = %q", b)
	}
}
