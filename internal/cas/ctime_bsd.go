//go:build darwin || freebsd || netbsd || dragonfly

package cas

import "syscall"

// ctime is the inode change time of st in nanoseconds since the epoch.
func ctime(st *syscall.Stat_t) int64 { return st.Ctimespec.Nano() }
