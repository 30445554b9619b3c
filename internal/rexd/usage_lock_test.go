package rexd

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReserveDoesNotHangOnAHeldRegistryLock: another rexd of the user
// that holds the registry's lock and does not let go (stopped with
// SIGSTOP, or on a hung file system) does not stop this rexd's sessions
// and process ends: reserve waits a bounded time, then counts this
// process only and says so on warn; release does not wait at all.
func TestReserveDoesNotHangOnAHeldRegistryLock(t *testing.T) {
	root := filepath.Join(t.TempDir(), "rexd")
	var warned []error
	var wmu sync.Mutex
	u := &usage{roots: []string{root}, warn: func(err error) { wmu.Lock(); warned = append(warned, err); wmu.Unlock() }}
	if e := u.reserve(1, 0, 16, 0); e != nil {
		t.Fatal(e)
	}
	defer func() { u.mu.Lock(); u.close(); u.mu.Unlock() }()
	// The other rexd: it holds the registry lock.
	f, err := os.OpenFile(filepath.Join(u.path, usageLockName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if e := u.reserve(1, 0, 16, 0); e != nil {
			t.Errorf("reserve with the registry held elsewhere: %v", e)
		}
		u.release(1, 0)
	}()
	select {
	case <-done:
	case <-time.After(10 * usageLockWait): // generous: a loaded machine
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		<-done
		t.Fatal("reserve and release waited on the registry's lock with no end")
	}
	wmu.Lock()
	defer wmu.Unlock()
	if len(warned) == 0 || !strings.Contains(warned[0].Error(), "counting this rexd's sessions and processes only") {
		t.Errorf("warned %v, want one sentence that the count is this rexd's only", warned)
	}
	if s, _ := u.held(); s != 1 {
		t.Errorf("holds %d sessions, want 1", s)
	}
	// The registry is not under the home's cache dir alone: it is this
	// boot's.
	if filepath.Base(u.path) != bootID() || filepath.Base(filepath.Dir(u.path)) != "usage" {
		t.Errorf("registry at %s, want usage/<boot id>", u.path)
	}
}
