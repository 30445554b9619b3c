package rexd_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestGlobOfManyDoubleStars: a glob pattern is bounded only by the
// request line (16 MiB). One made of millions of "**" segments makes the
// matcher recurse once per segment for every entry it visits (a stack of
// hundreds of MiB, tables of len(pattern)×depth) with no check of the
// request's end in between: rexd must answer it promptly (a result or an
// invalid-params error) and stay up.
func TestGlobOfManyDoubleStars(t *testing.T) {
	h := start(t)
	sid := h.open()
	// An ordinary tree: a chain of 24 directories.
	if err := os.MkdirAll(filepath.Join(h.root, strings.Repeat("a/", 24)), 0o755); err != nil {
		t.Fatal(err)
	}
	pattern := strings.Repeat("**/", 4<<20) + "nomatch"
	begun := time.Now()
	m := h.call(protocol.MethodFSGlob, protocol.FSGlobParams{SessionID: sid, Pattern: pattern})
	if took := time.Since(begun); took > 10*time.Second {
		t.Errorf("fs.glob of %d \"**\" segments took %s", 4<<20, took)
	}
	if m.Error != nil && m.Error.Code != protocol.CodeInvalidParams {
		t.Errorf("fs.glob: %v", m.Error)
	}
	h.ok(protocol.MethodFSStat, protocol.FSStatParams{SessionID: sid, Path: "a"}, nil)
}

// TestGlobOfManySegments: past the "**" runs, a pattern of more
// segments than any walk could match is refused in one sentence.
func TestGlobOfManySegments(t *testing.T) {
	h := start(t)
	sid := h.open()
	pattern := strings.Repeat("**/x/", 100000) + "nomatch"
	h.fails(protocol.MethodFSGlob, protocol.FSGlobParams{SessionID: sid, Pattern: pattern}, protocol.CodeInvalidParams)
	var g protocol.FSGlobResult
	os.WriteFile(filepath.Join(h.root, "f.go"), nil, 0o644)
	h.ok(protocol.MethodFSGlob, protocol.FSGlobParams{SessionID: sid, Pattern: "**/**/**/*.go"}, &g)
	if len(g.Matches) != 1 {
		t.Errorf("**/**/**/*.go matched %v, want f.go", g.Matches)
	}
}
