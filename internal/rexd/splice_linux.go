package rexd

import (
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// A splicer moves a command's output to the client without copying it
// through rexd (splice(2)): from the command's pipe into a pipe of rexd's
// own, which says how many bytes one event carries, then from there to the
// connection behind the event's line. A command streaming bulk output
// otherwise costs rexd a copy in and a copy out of every byte (a third of
// its CPU for a 256 MiB `cat`).
type splicer struct {
	src  syscall.RawConn
	r, w int // rexd's own pipe: the bytes of one event
	size int // its capacity: the most one event carries
	held int // bytes in it not sent yet
	junk []byte
	// copy is set once the connection refused a splice (EINVAL: a
	// terminal, say): its bytes are copied from then on.
	copy bool
}

// newSplicer returns a splicer for src, or nil when src is not a pipe the
// runtime polls (the command's pipes are) or the kernel refuses.
func newSplicer(src io.Reader) *splicer {
	f, ok := src.(*os.File)
	if !ok {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	polled := false
	if rc.Control(func(fd uintptr) {
		var st unix.Stat_t
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		polled = err == nil && fl&unix.O_NONBLOCK != 0 && unix.Fstat(int(fd), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO
	}) != nil || !polled {
		return nil
	}
	var p [2]int
	if unix.Pipe2(p[:], unix.O_CLOEXEC) != nil {
		return nil
	}
	size, err := unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, maxEvent)
	if err != nil {
		size, err = unix.FcntlInt(uintptr(p[1]), unix.F_GETPIPE_SZ, 0)
	}
	if err != nil || size < readSize {
		// A user past the kernel's pipe memory gets pipes of one page:
		// events that small would cost more than the copies saved.
		unix.Close(p[0])
		unix.Close(p[1])
		return nil
	}
	return &splicer{src: rc, r: p[0], w: p[1], size: min(size, maxEvent)}
}

// fill waits for output and moves what the command has written, up to the
// splicer's size, into rexd's pipe. At the end it returns 0 and io.EOF.
func (sp *splicer) fill() (int, error) {
	var n int64
	var serr error
	err := sp.src.Read(func(fd uintptr) bool {
		for {
			// int64(…): splice's count is an int on 32-bit Linux.
			m, err := unix.Splice(int(fd), nil, sp.w, nil, sp.size, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			n, serr = int64(m), err
			if serr != unix.EINTR {
				return serr != unix.EAGAIN // EAGAIN: nothing written yet, wait
			}
		}
	})
	switch {
	case err != nil:
		return 0, err // the pipe was closed under the pump
	case serr != nil:
		return 0, serr
	case n == 0:
		return 0, io.EOF
	}
	sp.held = int(n)
	return int(n), nil
}

// send moves n of the held bytes to w: spliced when w is a file or socket,
// copied otherwise.
func (sp *splicer) send(w io.Writer, n int) error {
	n = min(n, sp.held)
	sc, ok := w.(syscall.Conn)
	if !ok || sp.copy {
		return sp.copyTo(w, n)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return sp.copyTo(w, n)
	}
	var serr error
	moved := false
	err = rc.Write(func(fd uintptr) bool {
		for n > 0 {
			// No SPLICE_F_NONBLOCK: rexd's pipe holds the bytes, and a
			// connection in blocking mode (rexd's stdout usually is) must
			// block here as a write would; one in non-blocking mode says
			// EAGAIN and the runtime waits for room.
			m, err := unix.Splice(sp.r, nil, int(fd), nil, n, unix.SPLICE_F_MOVE)
			switch {
			case err == unix.EINTR:
				continue
			case err == unix.EAGAIN:
				return false
			case err == unix.EINVAL && !moved:
				sp.copy = true
				return true
			case err != nil:
				serr = err
				return true
			}
			n -= int(m)
			sp.held -= int(m)
			moved = true
		}
		return true
	})
	switch {
	case err != nil:
		return err
	case serr != nil:
		return serr
	case sp.copy:
		return sp.copyTo(w, n)
	}
	return nil
}

// copyTo writes n held bytes to w through a buffer.
func (sp *splicer) copyTo(w io.Writer, n int) error {
	for n > 0 {
		b, err := sp.take(n)
		if err != nil {
			return err
		}
		n -= len(b)
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// drop discards what is held (the bytes past the output cap, or those a
// client that left did not take).
func (sp *splicer) drop() error {
	for sp.held > 0 {
		if _, err := sp.take(sp.held); err != nil {
			return err
		}
	}
	return nil
}

// take reads up to n held bytes into the splicer's buffer.
func (sp *splicer) take(n int) ([]byte, error) {
	if sp.junk == nil {
		sp.junk = make([]byte, readSize)
	}
	for {
		m, err := unix.Read(sp.r, sp.junk[:min(n, len(sp.junk))])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			return nil, io.ErrUnexpectedEOF
		}
		sp.held -= m
		return sp.junk[:m], nil
	}
}

func (sp *splicer) close() {
	unix.Close(sp.r)
	unix.Close(sp.w)
}
