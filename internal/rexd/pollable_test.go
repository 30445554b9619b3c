//go:build linux

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

	// One socket for standard input and output, as an sshd that uses a
	// socketpair hands it over: the flag would reach os.Stdout too.
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	sock, peer := os.NewFile(uintptr(sp[0]), "stdio"), os.NewFile(uintptr(sp[1]), "peer")
	defer sock.Close()
	defer peer.Close()
	if in := PollableStdin(sock, sock); in != sock {
		t.Error("a socket that is standard output too was changed")
	}
	if in := PollableStdin(sock); in == sock || !polled(in) {
		t.Error("a socket of its own was not handed to the poller")
	} else {
		in.Close()
	}

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
