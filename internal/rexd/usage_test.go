package rexd_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// limitOf checks that e is a -32008 error of the named limit.
func limitOf(t *testing.T, e *protocol.Error, name string) {
	t.Helper()
	var d protocol.ResourceLimitData
	if err := json.Unmarshal(e.Data, &d); err != nil || d.Limit != name {
		t.Fatalf("want the %s limit, got %v (data %s)", name, e, e.Data)
	}
}

// TestUserLimitsHoldAcrossRexdProcesses: two real rexd processes of the
// same user share the per-user limits (one per SSH connection, or a bulk
// lane's, are several processes): what the first holds, detached
// processes of a closed session included, counts against the second, and
// comes back when it ends; a rexd that was killed frees what it held.
func TestUserLimitsHoldAcrossRexdProcesses(t *testing.T) {
	cache := t.TempDir()
	env := []string{"XDG_CACHE_HOME=" + cache}
	args := []string{"--limit", "max_processes_per_user=2", "--limit", "max_concurrent_sessions=3"}
	a := startEnv(t, env, args...)
	b := startEnv(t, env, args...)

	sa := a.open()
	fifo := filepath.Join(a.root, "gate")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	var held, detached protocol.ExecStartResult
	a.ok(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sa, Argv: []string{"sleep", "600"}}, &held)
	a.ok(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sa, Argv: []string{"cat", fifo}, Detach: true}, &detached)

	sb := b.open()
	e := b.fails(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sb, Argv: []string{"true"}}, protocol.CodeResourceLimit)
	limitOf(t, e, "max_processes_per_user")
	if !strings.Contains(e.Message, "other rexd") {
		t.Errorf("the refusal does not say where the processes are: %q", e.Message)
	}
	e = b.fails(protocol.MethodPTYOpen, protocol.PTYOpenParams{SessionID: sb, Argv: []string{"true"}}, protocol.CodeResourceLimit)
	limitOf(t, e, "max_processes_per_user")

	// Closing the first session ends its plain process; the detached one
	// still counts, and keeps the session's slot.
	var closed protocol.SessionCloseResult
	a.ok(protocol.MethodSessionClose, protocol.SessionRef{SessionID: sa}, &closed)
	if closed.ProcessesDetached != 1 {
		t.Fatalf("session.close: %+v", closed)
	}
	a.exitOf(held.ProcessID, 30*time.Second)
	var one protocol.ExecStartResult
	b.ok(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sb, Argv: []string{"sleep", "600"}}, &one)
	e = b.fails(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sb, Argv: []string{"true"}}, protocol.CodeResourceLimit)
	limitOf(t, e, "max_processes_per_user")
	// Sessions: b's, a's closed one held by its detached process, and one
	// more make three; a fourth is refused, in either process.
	b.open()
	e = a.fails(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "fourth"}, protocol.CodeResourceLimit)
	limitOf(t, e, "max_concurrent_sessions")

	// The detached process ends: its process and its session come back.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	a.exitOf(detached.ProcessID, 30*time.Second)
	_, _, exit := b.run(sb, protocol.ExecStartParams{Argv: []string{"true"}})
	if exit.ExitCode == nil || *exit.ExitCode != 0 {
		t.Fatalf("after the first rexd's processes ended: %+v", exit)
	}
	sa2 := a.open()
	e = b.fails(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "fourth"}, protocol.CodeResourceLimit)
	limitOf(t, e, "max_concurrent_sessions")
	a.ok(protocol.MethodSessionClose, protocol.SessionRef{SessionID: sa2}, nil)
	b.ok(protocol.MethodExecKill, protocol.ExecKillParams{SessionID: sb, ProcessID: one.ProcessID}, nil)
	b.exitOf(one.ProcessID, 30*time.Second)

	// A rexd that is killed holds nothing: its entry is reclaimed.
	c := startEnv(t, env, args...)
	c.open()
	e = b.fails(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "over"}, protocol.CodeResourceLimit)
	limitOf(t, e, "max_concurrent_sessions")
	c.cmd.Process.Kill()
	<-c.exited
	b.open()

	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id") // one registry per boot
	entries, err := os.ReadDir(filepath.Join(cache, "rexd", "usage", strings.TrimSpace(string(boot))))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, en := range entries {
		names = append(names, en.Name())
	}
	if len(names) != 3 { // the lock and a's and b's entries
		t.Errorf("registry holds %v, want the lock and two live entries", names)
	}
}
