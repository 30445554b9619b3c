//go:build !linux

package main

import "errors"

// lowerPriority is Linux's only (there nice is per thread and a lane's
// sshd can be found); elsewhere a lane runs at the usual priority.
func lowerPriority(n int, ssh bool) error {
	return errors.New("not supported on this platform")
}
