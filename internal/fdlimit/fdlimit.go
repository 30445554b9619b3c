// Package fdlimit raises the process's limit on open files, as OpenSSH's
// tools and most servers do at start: a fan-out holds one socket per
// running target, and the soft limit many systems set (1024) is far below
// the hard one.
package fdlimit

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Raise sets the soft RLIMIT_NOFILE to the hard limit (when the hard limit
// is unlimited, to the kernel's fs.nr_open) and returns the soft limit now
// in force. Go's runtime already raises it to one below a finite hard limit
// at start and gives child processes the limit the program was started
// with; Raise leaves that as it is, so the commands rex runs on `local` do
// not see a raised limit unless the hard one is unlimited. An error leaves
// the limit as it was.
func Raise() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	want := lim.Max
	if want == rlimInfinity {
		want = nrOpen()
	}
	if lim.Cur+1 >= want {
		return lim.Cur, nil
	}
	next := syscall.Rlimit{Cur: want, Max: lim.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &next); err != nil {
		return lim.Cur, err
	}
	return want, nil
}

// Soft is the soft RLIMIT_NOFILE in force, 0 when it cannot be read.
func Soft() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return lim.Cur
}

// rlimInfinity is RLIM_INFINITY on Linux.
const rlimInfinity = ^uint64(0)

// nrOpen is the most a process may set RLIMIT_NOFILE to on Linux.
func nrOpen() uint64 {
	b, err := os.ReadFile("/proc/sys/fs/nr_open")
	if err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			return n
		}
	}
	return 1 << 20
}

// Exhausted reports whether err says the process (EMFILE) or the system
// (ENFILE) has no file descriptor left.
func Exhausted(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// Explain is the sentence for an error Exhausted matches: what ran out and
// what to do, in place of advice meant for the file that happened to be
// opened at that moment (known_hosts, say).
func Explain(doing string, err error) string {
	if errors.Is(err, syscall.ENFILE) {
		return fmt.Sprintf("%s: the system has run out of open files (fs.file-max); close programs or lower --concurrency", doing)
	}
	return fmt.Sprintf("%s: rex has run out of open files (limit %d); lower --concurrency or raise the hard limit (ulimit -Hn, systemd LimitNOFILE)", doing, Soft())
}
