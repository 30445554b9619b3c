package cas

import (
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
