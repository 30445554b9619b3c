package cas

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestIngestFileNeverBlocksOnAFIFO: a file that turned into a FIFO between
// the walk and the read is opened without blocking (O_NONBLOCK) and
// refused after fstat, instead of hanging until someone writes to it.
func TestIngestFileNeverBlocksOnAFIFO(t *testing.T) {
	s := newStore(t)
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	done := make(chan error, 1)
	go func() {
		_, _, err := s.ingestFile(context.Background(), r, "pipe", BlobsAll)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a FIFO was ingested as a file")
		}
	case <-time.After(10 * time.Second):
		// Blocked in open: a writer releases it, and the test fails.
		if w, err := os.OpenFile(filepath.Join(dir, "pipe"), os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		<-done
		t.Fatal("ingesting a FIFO blocked until something wrote to it")
	}
}
