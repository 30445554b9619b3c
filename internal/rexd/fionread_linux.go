package rexd

import "golang.org/x/sys/unix"

// fionread asks how many bytes a pipe holds (FIONREAD, TIOCINQ on Linux).
const fionread = unix.TIOCINQ
