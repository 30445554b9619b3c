package tui_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/sshtest"
)

// running reports whether a process whose command line holds marker
// runs (the sshd hosts of the tests are processes of this machine).
func running(t *testing.T, marker string) bool {
	out, err := exec.Command("pgrep", "-f", marker).Output()
	if err != nil && len(out) == 0 {
		return false
	}
	return strings.TrimSpace(string(out)) != ""
}

// alive reports whether process pid runs (a zombie does not).
func alive(pid string) bool {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	f := strings.Fields(string(stat[i+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// TestConsoleClosedWindowE2E: closing the terminal window under a
// console of its own (rex --no-server) with a task running (tmux kills its
// pane: SIGHUP) cannot ask, and leaves nothing running: the console stops
// the task on the host, as a quit does, and exits. (Attached to the rex
// server, a closed window detaches instead: server_e2e_test.go.)
func TestConsoleClosedWindowE2E(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("the console's end-to-end tests drive tmux; install tmux")
	}
	if _, err := exec.LookPath("pgrep"); err != nil {
		t.Fatal("this test looks for the remote process with pgrep; install procps")
	}
	bin := buildConsole(t)
	key := sshtest.NewKey(t, "ed25519")
	host := sshtest.Fleet(t, 1, sshtest.Options{Authorized: []*sshtest.Key{key}})[0]
	c := startConsoleWith(t, bin, "", 120, 40, "--no-server")
	c.run(fmt.Sprintf("/device add h1 %s@%s --key %s", host.User, host.Addr, key.Path), "added device h1")
	c.run("/target h1", "target h1")

	var rnd [6]byte
	rand.Read(rnd[:])
	marker := "rex-hup-" + hex.EncodeToString(rnd[:])
	// The shell outlives sleep's start (echo follows), so its command
	// line, which holds the marker, runs as long as the task does.
	c.run("sleep 300; echo "+marker, "1 running")
	deadline := time.Now().Add(30 * time.Second)
	for !running(t, marker) {
		if time.Now().After(deadline) {
			t.Fatalf("the task's process never showed on the host:\n%s", c.screen())
		}
		time.Sleep(50 * time.Millisecond)
	}
	shell := strings.TrimSpace(c.tmux(nil, "display-message", "-p", "-t", "rex", "#{pane_pid}"))
	out, err := exec.Command("pgrep", "-P", shell).Output()
	rex := strings.TrimSpace(string(out))
	if err != nil || rex == "" || strings.Contains(rex, "\n") {
		t.Fatalf("cannot tell the console's pid under the shell %s: %q, %v", shell, out, err)
	}

	// The window closes.
	c.tmux(nil, "kill-server")
	deadline = time.Now().Add(30 * time.Second)
	for running(t, marker) || alive(rex) {
		if time.Now().After(deadline) {
			out, _ := exec.Command("pgrep", "-a", "-f", marker).Output()
			t.Fatalf("after the window closed, still running: %s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
