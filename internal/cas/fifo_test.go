package cas

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestIngestOfAFIFONeverBlocks: a FIFO named as the directory to ingest
// is refused at once; opening it as a directory waited for a writer, so a
// cas.ingest of one held rexd's worker until something wrote to it (found
// by review, rev-rexd2 #8).
func TestIngestOfAFIFONeverBlocks(t *testing.T) {
	s := newStore(t)
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	done := make(chan error, 1)
	go func() {
		_, _, err := s.IngestIn(context.Background(), root, "pipe", IngestOptions{})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a FIFO was ingested as a directory")
		}
	case <-time.After(30 * time.Second): // a bound for a hang, not a speed goal
		// Let the blocked open go, so the test ends.
		if f, err := os.OpenFile(filepath.Join(dir, "pipe"), os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("IngestIn of a FIFO did not return within 30 s: it waits for a writer")
	}
}
