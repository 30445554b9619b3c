//go:build unix && !linux

package rexd

// nameGuard leaves the guard's name alone: no PR_SET_NAME here.
func nameGuard() {}
