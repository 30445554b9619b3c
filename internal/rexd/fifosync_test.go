package rexd_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestAtomicWriteNeverOpensAFIFO: after an atomic fs.write renames its
// file into place, it opens the directory to sync it; a FIFO put in that
// directory's place in between (here a link switched by another writer in
// the roots) must not hang the request, as it did with a plain open.
// The loop is bounded; each attempt is answered, whatever it says.
func TestAtomicWriteNeverOpensAFIFO(t *testing.T) {
	h := start(t)
	sid := h.open()
	// d is a link, switched between a directory and a FIFO.
	if err := os.Mkdir(filepath.Join(h.root, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(h.root, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(h.root, "d")
	if err := os.Symlink("real", d); err != nil {
		t.Fatal(err)
	}
	flipLink(t, d, "pipe", "real")
	for i := 0; i < 500; i++ {
		h.call(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "d/f", Content: "x"})
	}
}
