package rexd

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// nameGuard gives the guard process a name (comm) of its own,
// "rexd-guard": `killall rexd` and `pkill -x rexd` then stop rexd and
// leave its guard to clean up. comm is the main thread's, so the guard
// stays on it.
func nameGuard() {
	runtime.LockOSThread()
	if p, err := unix.BytePtrFromString("rexd-guard"); err == nil {
		unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(p)), 0, 0, 0)
	}
}
