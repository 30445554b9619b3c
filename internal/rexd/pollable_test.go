package rexd

import (
	"os"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// polled reports whether f is served by the runtime's poller: only then
// does a read deadline take.
func polled(f *os.File) bool { return f.SetReadDeadline(time.Now().Add(time.Hour)) == nil }

func TestPollableStdin(t *testing.T) {
	// A blocking pipe, as exec and sshd hand rexd its stdio, and as
	// os.Stdin and os.Stdout then see it.
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w := os.NewFile(uintptr(p[0]), "stdin"), os.NewFile(uintptr(p[1]), "stdout")
	defer r.Close()
	defer w.Close()
	if polled(r) || polled(w) {
		t.Fatal("a blocking pipe is polled")
	}

	in := PollableStdin(r)
	if in == r || !polled(in) {
		t.Fatal("a pipe was not handed to the poller")
	}
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := in.Read(b); err != nil || b[0] != 'x' {
		t.Fatalf("read %q, %v", b, err)
	}
	in.Close()

	// A terminal's open file outlives rexd in the shell that started it.
	ptm, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptm.Close()
	defer tty.Close()
	if in := PollableStdin(tty); in != tty {
		t.Error("a terminal was changed")
	}
	flags, err := unix.FcntlInt(tty.Fd(), unix.F_GETFL, 0)
	if err != nil || flags&unix.O_NONBLOCK != 0 {
		t.Errorf("the terminal's flags are %#o (%v): O_NONBLOCK was set", flags, err)
	}
}
