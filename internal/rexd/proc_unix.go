package rexd

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// parseSignal accepts "TERM", "SIGTERM" or "15"; empty means TERM.
func parseSignal(s string) (syscall.Signal, error) {
	if s == "" {
		return syscall.SIGTERM, nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n <= 0 || n > 64 {
			return 0, fmt.Errorf("signal %d is out of range", n)
		}
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	sig := unix.SignalNum(name)
	if sig == 0 {
		return 0, fmt.Errorf("unknown signal %q (use a name such as TERM, KILL, INT, HUP)", s)
	}
	return sig, nil
}

// signalName is the name of sig without the SIG prefix, e.g. "KILL".
func signalName(sig syscall.Signal) string {
	n := unix.SignalName(sig)
	if n == "" {
		return strconv.Itoa(int(sig))
	}
	return strings.TrimPrefix(n, "SIG")
}

// sessionMembers lists processes whose session id is sid, found in /proc.
// PTY programs start their own session; shells with job control move jobs
// into other process groups, so the session is what names them all.
func sessionMembers(sid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name may contain spaces and parentheses; the fields
		// after the last ')' are state, ppid, pgrp, session.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 4 {
			continue
		}
		if s, err := strconv.Atoi(f[3]); err == nil && s == sid && f[0] != "Z" {
			out = append(out, pid)
		}
	}
	return out
}

// loginShell returns the user's shell from the password database, then
// $SHELL, then /bin/sh.
func loginShell() string {
	if u, err := user.Current(); err == nil {
		if f, err := os.Open("/etc/passwd"); err == nil {
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				fields := strings.Split(sc.Text(), ":")
				if len(fields) >= 7 && fields[0] == u.Username && fields[6] != "" {
					if _, err := os.Stat(fields[6]); err == nil {
						return fields[6]
					}
				}
			}
		}
	}
	if sh := os.Getenv("SHELL"); filepath.IsAbs(sh) {
		return sh
	}
	return "/bin/sh"
}

// lookPath finds name in the directories of pathEnv, like exec.LookPath but
// with the PATH the process will have, not rexd's own.
func lookPath(name, pathEnv string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: executable file not found in $PATH", name)
}
