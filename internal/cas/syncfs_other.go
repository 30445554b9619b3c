//go:build !linux

package cas

import (
	"os"

	"golang.org/x/sys/unix"
)

const syncfsThreshold = 0

func syncFS(string) error { return nil }

const haveSyncFS = false

// exchange has no atomic form here: the caller renames twice, and the
// destination is missing between the two renames.
func exchange(*os.File, string, string) (bool, error) { return false, nil }

func freeSpace(f *os.File) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
