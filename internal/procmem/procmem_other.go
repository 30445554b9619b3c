//go:build !linux

package procmem

// ReleaseExecutable does nothing here: it reads Linux's /proc to tell the
// file's pages from the process's own copies.
func ReleaseExecutable() (Released, error) { return Released{}, nil }
