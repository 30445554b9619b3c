package rexd_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexd"
)

// TestKilledRexdLeavesNoProcess: a rexd killed outright (SIGKILL, the
// OOM killer) leaves none of its commands running: its guard stops
// their process groups, a shell and the job it waits for alike. A
// detached process is left, as rexd leaves it when it ends on purpose.
// Before, everything it had started ran on for good, reparented to init.
func TestKilledRexdLeavesNoProcess(t *testing.T) {
	h := start(t)
	sid := h.open()
	pids := func(name string, detach bool) []int {
		file := filepath.Join(h.root, name)
		var res protocol.ExecStartResult
		h.ok(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Detach: detach,
			Argv: []string{"sh", "-c", `sleep 300 & echo $$ $! > "$1.tmp"; mv "$1.tmp" "$1"; wait`, "sh", file}}, &res)
		deadline := time.Now().Add(10 * time.Second)
		for {
			b, err := os.ReadFile(file)
			if err == nil {
				var out []int
				for _, f := range strings.Fields(string(b)) {
					n, _ := strconv.Atoi(f)
					out = append(out, n)
				}
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not start", name)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	attached := pids("attached", false)
	detached := pids("detached", true)
	t.Cleanup(func() {
		for _, p := range append(attached, detached...) {
			syscall.Kill(p, syscall.SIGKILL)
		}
	})

	// The guard starts once a process has run a moment (guardDelay).
	deadline := time.Now().Add(10 * time.Second)
	for !hasGuard(h.cmd.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatal("rexd started no guard")
		}
		time.Sleep(10 * time.Millisecond)
	}
	syscall.Kill(h.cmd.Process.Pid, syscall.SIGKILL)
	<-h.exited
	deadline = time.Now().Add(10 * time.Second)
	for _, p := range attached {
		for syscall.Kill(p, 0) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("process %d runs on after its rexd was killed", p)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, p := range detached {
		if syscall.Kill(p, 0) != nil {
			t.Errorf("detached process %d was stopped", p)
		}
	}
}

// hasGuard reports whether the process parent has a child running as
// its guard.
func hasGuard(parent int) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(stat), ')')
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(parent) {
			continue
		}
		// Named so that killall rexd leaves it.
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(cmdline), rexd.GuardFlag) && strings.TrimSpace(string(comm)) == "rexd-guard" {
			return true
		}
	}
	return false
}
