package cas

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// syncfsThreshold is the batch size from which one syncfs(2) of the store's
// file system replaces an fsync per file: a thousand fsyncs each wait for a
// journal commit, one syncfs waits for one.
const syncfsThreshold = 8

// syncFS makes everything written to the file system holding dir durable.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}

const haveSyncFS = true

// exchange swaps the names a and b, both entries of the directory dir, in
// one step (renameat2 RENAME_EXCHANGE): there is no moment when either
// name is missing. ok is false when the file system cannot do it, and the
// caller falls back to two renames.
func exchange(dir *os.File, a, b string) (ok bool, err error) {
	fd := int(dir.Fd())
	err = unix.Renameat2(fd, a, fd, b, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.ENOTSUP) {
		return false, nil
	}
	return err == nil, err
}

// freeSpace is what an unprivileged user may still write on the file
// system holding the open directory f, in bytes.
func freeSpace(f *os.File) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
