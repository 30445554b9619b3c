//go:build linux

package rexd

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestGrowPipe: a pipe grows to what a fast command's output needs; what
// is no pipe is left alone.
func TestGrowPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if !growPipe(r, maxEvent) {
		t.Skip("this system cannot grow a pipe (user pipe memory at its limit?)")
	}
	size, err := unix.FcntlInt(r.Fd(), unix.F_GETPIPE_SZ, 0)
	if err != nil || size < maxEvent {
		t.Fatalf("pipe size %d (%v), want at least %d", size, err, maxEvent)
	}
	f, err := os.CreateTemp(t.TempDir(), "file")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if growPipe(f, maxEvent) || growPipe(strings.NewReader("x"), maxEvent) || growPipe(bytes.NewReader(nil), maxEvent) {
		t.Error("growPipe claims to have grown something that is no pipe")
	}
}
