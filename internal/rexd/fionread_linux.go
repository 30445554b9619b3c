package rexd

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// fionread asks how many bytes a pipe holds (FIONREAD, TIOCINQ on Linux).
const fionread = unix.TIOCINQ

// growPipe asks for a pipe of size bytes (F_SETPIPE_SZ). It may be refused
// (the user's pipe memory is at its limit) or r may be no pipe; then the
// pipe stays as it is.
func growPipe(r io.Reader, size int) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var got int
	if rc.Control(func(fd uintptr) { got, err = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, size) }) != nil || err != nil {
		return false
	}
	return got >= size
}
