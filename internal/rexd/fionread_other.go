//go:build unix && !linux

package rexd

import "io"

// fionread asks how many bytes a pipe holds: FIONREAD, _IOR('f', 127,
// int) on macOS and the BSDs, which x/sys/unix does not name for all.
const fionread = 0x4004667f

// growPipe: only Linux can resize a pipe.
func growPipe(io.Reader, int) bool { return false }
