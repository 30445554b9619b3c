package rexd_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestAtomicWriteOfALongName: a file name may be up to 255 bytes.
// An atomic write goes through a temp file named after the target plus a
// prefix and a suffix, which must not push the temp name past the limit:
// the write of a valid name must work, atomic as well as not.
func TestAtomicWriteOfALongName(t *testing.T) {
	h := start(t)
	sid := h.open()
	name := strings.Repeat("n", 255)
	for _, content := range []string{"one\n", "two\n"} { // create, then replace
		h.ok(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: name, Content: content}, nil)
		if b, err := os.ReadFile(filepath.Join(h.root, name)); err != nil || string(b) != content {
			t.Fatalf("the file holds %q, %v; want %q", b, err, content)
		}
	}
	create := protocol.WriteCreate
	h.ok(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: strings.Repeat("c", 255), Content: "x", Mode: create}, nil)
	ents, _ := os.ReadDir(h.root)
	if len(ents) != 2 {
		t.Errorf("the root holds %d entries, want the 2 files (no temp file left)", len(ents))
	}
}
