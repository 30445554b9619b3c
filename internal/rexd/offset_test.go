package rexd_test

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestReadAtTheLargestOffset: an offset past the end of a file
// reads nothing (content "", truncated false), however far past. Near
// math.MaxInt64 the kernel refuses a read whose end would overflow, and
// fs.read answered -32603 "read F: read F: invalid argument" instead.
func TestReadAtTheLargestOffset(t *testing.T) {
	h := start(t)
	sid := h.open()
	if err := os.WriteFile(filepath.Join(h.root, "f"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64 - 100_000} {
		var res protocol.FSReadResult
		h.ok(protocol.MethodFSRead, protocol.FSReadParams{SessionID: sid, Path: "f", Offset: off}, &res)
		if res.Content != "" || res.Truncated || res.Size != 5 {
			t.Errorf("offset %d: %+v", off, res)
		}
	}
}
