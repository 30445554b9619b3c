package rexd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/usock"
)

// The per-user limits (max_concurrent_sessions, max_processes_per_user)
// hold across every rexd the user runs on the host: one per SSH
// connection, a bulk lane's, a lingering one keeping resumable sessions.
// Each rexd keeps an entry in a private registry directory with what it
// holds, and keeps an exclusive flock on it while it lives; counting is
// summing the entries that are still locked. A rexd that died (SIGKILL
// included) lost its lock with its last descriptor, so its entry is
// reclaimed by the next count. The registry's own lock file makes a check
// and the update that follows it one step across processes.

// usageLockName is the registry's lock file; entries are "rexd-PID-RANDOM".
const (
	usageLockName = "lock"
	usagePrefix   = "rexd-"
	usageRecord   = 42 // "%20d %20d\n": sessions, processes
)

// DefaultUsageDirs are the cache directories the bootstrap looks at, in
// its order: $XDG_CACHE_HOME/rexd, ~/.cache/rexd, ${TMPDIR:-/tmp}/rexd-UID.
func DefaultUsageDirs() []string {
	var dirs []string
	if d := os.Getenv("XDG_CACHE_HOME"); filepath.IsAbs(d) {
		dirs = append(dirs, filepath.Join(d, "rexd"))
	}
	if home, err := os.UserHomeDir(); err == nil && filepath.IsAbs(home) {
		dirs = append(dirs, filepath.Join(home, ".cache", "rexd"))
	}
	tmp := os.Getenv("TMPDIR")
	if !filepath.IsAbs(tmp) {
		tmp = "/tmp"
	}
	return append(dirs, filepath.Join(tmp, "rexd-"+strconv.Itoa(os.Getuid())))
}

// usage counts this process's sessions and processes, and with a
// registry, the user's other rexd processes' too.
type usage struct {
	roots []string // candidate cache directories; none: this process only
	path  string   // the registry directory in use

	mu       sync.Mutex
	opened   bool
	dir      *usock.Dir
	lock     *os.File // the registry's lock file
	self     *os.File // this process's entry, LOCK_EX held until exit
	selfName string
	sessions int64 // held by this process
	procs    int64
	dropped  chan struct{} // closed (and replaced) when procs drops
	warn     func(error)   // told once why the registry cannot be used
}

// open makes this process's entry. It runs once, under u.mu; a registry
// that cannot be used leaves the counting to this process (said on warn).
func (u *usage) openLocked() {
	if u.opened {
		return
	}
	u.opened = true
	var errs []error
	for _, root := range u.roots {
		err := u.register(root)
		if err == nil {
			return
		}
		u.close()
		errs = append(errs, err)
	}
	if len(errs) > 0 && u.warn != nil {
		u.warn(fmt.Errorf("the per-user limits count this rexd's sessions and processes only: %w", errors.Join(errs...)))
	}
}

// register opens the registry under the cache directory root, which must
// pass the checks itself (so nothing is made through a symlink), and adds
// this process's entry.
func (u *usage) register(root string) error {
	top, err := usock.OpenPrivate(root)
	if err != nil {
		return err
	}
	top.Close()
	// One registry per boot of this machine: a home shared over NFS
	// (where flock is seen by every client) or kept across a reboot
	// never counts another machine's rexd processes as this host's.
	base := filepath.Join(root, "usage")
	if d, err := usock.OpenPrivate(base); err != nil {
		return err
	} else {
		d.Close()
	}
	u.path = filepath.Join(base, bootID())
	dir, err := usock.OpenPrivate(u.path)
	if err != nil {
		return err
	}
	u.dir = dir
	lfd, err := unix.Openat(int(dir.Fd()), usageLockName, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", filepath.Join(u.path, usageLockName), err)
	}
	u.lock = os.NewFile(uintptr(lfd), usageLockName)
	if err := u.flock(); err != nil {
		return err
	}
	defer u.funlock()
	var rnd [6]byte
	rand.Read(rnd[:])
	name := usagePrefix + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(rnd[:])
	// Made and locked under the registry's lock: no count sees it unlocked.
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", filepath.Join(u.path, name), err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		dir.Remove(name)
		return fmt.Errorf("lock %s: %w", filepath.Join(u.path, name), err)
	}
	u.self, u.selfName = os.NewFile(uintptr(fd), name), name
	return u.writeLocked()
}

// usageLockWait bounds the wait for the registry's lock: a rexd of the
// user that holds it and never lets go (stopped, or on a hung file
// system) must not stop this one's sessions and processes.
const usageLockWait = 2 * time.Second

// flock takes the registry's lock, trying without blocking until
// usageLockWait has passed.
func (u *usage) flock() error {
	deadline := time.Now().Add(usageLockWait)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		err := unix.Flock(int(u.lock.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("lock %s: %w", filepath.Join(u.path, usageLockName), err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lock %s: another rexd of this user has held it for over %v; counting this rexd's sessions and processes only", filepath.Join(u.path, usageLockName), usageLockWait)
		}
		time.Sleep(pause) // another process holds it: there is nothing to wait on but time
	}
}

// bootID names this boot of the machine (Linux's random boot id), or
// "unknown" where there is none.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	id := strings.TrimSpace(string(b))
	if err != nil || id == "" || strings.ContainsAny(id, "/.") {
		return "unknown"
	}
	return id
}

func (u *usage) funlock() { unix.Flock(int(u.lock.Fd()), unix.LOCK_UN) }

// writeLocked records what this process holds in its entry.
func (u *usage) writeLocked() error {
	rec := fmt.Sprintf("%20d %20d\n", u.sessions, u.procs)
	if _, err := u.self.WriteAt([]byte(rec), 0); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(u.path, u.selfName), err)
	}
	return nil
}

// othersLocked sums the live entries of the user's other rexd processes
// and removes those of processes that are gone.
func (u *usage) othersLocked() (sessions, procs int64, err error) {
	dfd, err := unix.Openat(int(u.dir.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, fmt.Errorf("read %s: %w", u.path, err)
	}
	f := os.NewFile(uintptr(dfd), u.path)
	if err != nil {
		return 0, 0, fmt.Errorf("read %s: %w", u.path, err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return 0, 0, fmt.Errorf("read %s: %w", u.path, err)
	}
	for _, name := range names {
		if !strings.HasPrefix(name, usagePrefix) || name == u.selfName {
			continue
		}
		fd, err := unix.Openat(int(u.dir.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // gone meanwhile, or not a file we can use
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			unix.Close(fd)
			continue
		}
		if err := unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB); err == nil {
			// Nobody holds it: its rexd is gone.
			u.dir.Remove(name)
			unix.Close(fd)
			continue
		} else if !errors.Is(err, unix.EWOULDBLOCK) {
			unix.Close(fd)
			continue
		}
		buf := make([]byte, usageRecord)
		n, _ := unix.Pread(fd, buf, 0)
		unix.Close(fd)
		var s, p int64
		if _, err := fmt.Sscanf(string(buf[:n]), "%d %d", &s, &p); err == nil && s >= 0 && p >= 0 {
			sessions += s
			procs += p
		}
	}
	return sessions, procs, nil
}

// reserve takes ds sessions and dp processes if the user stays within
// maxSessions and maxProcs (0: no limit), else says which limit stops it.
func (u *usage) reserve(ds, dp, maxSessions, maxProcs int64) *protocol.Error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.openLocked()
	var others, op int64
	if u.self != nil {
		if err := u.flock(); err == nil {
			defer u.funlock()
			others, op, err = u.othersLocked()
			if err != nil && u.warn != nil {
				u.warn(err)
			}
		} else if u.warn != nil {
			u.warn(err)
		}
	}
	if ds > 0 && maxSessions > 0 && others+u.sessions+ds > maxSessions {
		return protocol.Errorf(protocol.CodeResourceLimit,
			protocol.ResourceLimitData{Limit: "max_concurrent_sessions", Value: maxSessions},
			"too many sessions: the limit is %d for this user on this host (%d open here, %d in the user's other rexd processes); close one first",
			maxSessions, u.sessions, others)
	}
	if dp > 0 && maxProcs > 0 && op+u.procs+dp > maxProcs {
		return protocol.Errorf(protocol.CodeResourceLimit,
			protocol.ResourceLimitData{Limit: "max_processes_per_user", Value: maxProcs},
			"too many processes: the limit is %d for this user on this host (%d running here, %d in the user's other rexd processes, detached ones included); wait for one to end or kill it",
			maxProcs, u.procs, op)
	}
	u.sessions += ds
	u.procs += dp
	if u.self != nil {
		if err := u.writeLocked(); err != nil && u.warn != nil {
			u.warn(err)
		}
	}
	return nil
}

// release gives back ds sessions and dp processes.
func (u *usage) release(ds, dp int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.sessions -= ds
	u.procs -= dp
	if dp > 0 && u.dropped != nil {
		close(u.dropped)
		u.dropped = nil
	}
	if u.self == nil {
		return
	}
	// Giving back needs no check: the entry is this process's own, so it
	// is written even when the registry's lock is held elsewhere (at
	// worst a count that reads it during the write misreads it once).
	if unix.Flock(int(u.lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
		defer u.funlock()
	}
	u.writeLocked()
}

// waitProcesses returns once this process's processes have ended, or
// when ctx ends.
func (u *usage) waitProcesses(ctx context.Context) {
	for {
		u.mu.Lock()
		n := u.procs
		if u.dropped == nil {
			u.dropped = make(chan struct{})
		}
		ch := u.dropped
		u.mu.Unlock()
		if n <= 0 {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// held is what this process holds now.
func (u *usage) held() (sessions, procs int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sessions, u.procs
}

// close removes this process's entry (at exit; a killed rexd's entry is
// reclaimed by the next count instead).
func (u *usage) close() {
	if u.self != nil && u.dir != nil {
		u.dir.Remove(u.selfName)
	}
	for _, f := range []*os.File{u.self, u.lock} {
		if f != nil {
			f.Close()
		}
	}
	if u.dir != nil {
		u.dir.Close()
	}
	u.self, u.lock, u.dir = nil, nil, nil
}
