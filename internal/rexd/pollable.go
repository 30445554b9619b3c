package rexd

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// A descriptor in blocking mode is read by a thread parked in read(2):
// the runtime's monitor then takes its P back after 10 ms and polls every
// 20 µs for a while after each syscall, so a terminal typed into a few
// times a second keeps rexd waking. In non-blocking mode the network
// poller serves it: a waiting reader parks its goroutine and nothing
// polls. Measured (KeystrokeDuringPush, 100 keys a second into `cat`):
// rexd's CPU per keystroke 0.94-1.27 ms before, 0.56-0.69 ms with the
// terminal's master and stdin polled; idle echo p99 9-12 ms before,
// 4.4-7.8 ms after.

// pollable returns a file for a new descriptor of f's open file, set
// non-blocking so that the runtime's poller serves it, and closes f. It
// is for files rexd alone reads and writes: O_NONBLOCK belongs to the
// open file, which every descriptor of it shares.
func pollable(f *os.File) (*os.File, error) {
	fd, err := dupNonblock(f)
	if err != nil {
		return nil, err
	}
	name := f.Name()
	f.Close()
	return os.NewFile(uintptr(fd), name), nil
}

func dupNonblock(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	cerr := rc.Control(func(old uintptr) {
		if fd, err = unix.FcntlInt(old, unix.F_DUPFD_CLOEXEC, 0); err != nil {
			return
		}
		if err = unix.SetNonblock(fd, true); err != nil {
			unix.Close(fd)
			fd = -1
		}
	})
	if cerr != nil {
		return -1, cerr
	}
	if err != nil {
		return -1, fmt.Errorf("make %s non-blocking: %w", f.Name(), err)
	}
	return fd, nil
}

// PollableStdin returns the standard input rexd serves on, served by the
// runtime's poller when it is a pipe or a socket (as sshd and rex give
// it); the original descriptor stays open. It is left as it is when it is
// a terminal, whose open file outlives rexd in the shell that started it,
// and when one of others (standard output and error) is the same file:
// an sshd that hands over one socket for both (a socketpair instead of
// pipes) shares the non-blocking flag, and os.Stdout, not polled, would
// then fail a write to a full socket with EAGAIN instead of waiting.
//
// Standard output stays blocking on purpose: a stream that fills sshd's
// pipe then waits in write(2), where non-blocking it would take an EAGAIN,
// a park and a poller wake-up per pipeful. Measured with bench/ab.sh 1
// (one host's 256 MiB cat, medians, each pair in one run): stdin and
// stdout polled 1.78 s against 1.60 s before; stdin alone 1.40 s against
// 1.47 s.
func PollableStdin(f *os.File, others ...*os.File) *os.File {
	st, ok := fstat(f)
	if !ok || (st.Mode&unix.S_IFMT != unix.S_IFIFO && st.Mode&unix.S_IFMT != unix.S_IFSOCK) {
		return f
	}
	for _, o := range others {
		if ost, ok := fstat(o); ok && ost.Dev == st.Dev && ost.Ino == st.Ino {
			return f
		}
	}
	fd, err := dupNonblock(f)
	if err != nil {
		return f
	}
	return os.NewFile(uintptr(fd), f.Name())
}

func fstat(f *os.File) (unix.Stat_t, bool) {
	var st unix.Stat_t
	if f == nil {
		return st, false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return st, false
	}
	if rc.Control(func(fd uintptr) { err = unix.Fstat(int(fd), &st) }) != nil || err != nil {
		return st, false
	}
	return st, true
}
