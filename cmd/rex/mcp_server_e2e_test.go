package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/server"
)

// TestMCPFollowsTheConsole: with a rex server running, rex mcp (no
// --target) sends each call to the console's current target, asked over
// the server's socket (server.target) at every call: /target typed in the
// console steers the agent. With no server it is local; a server that
// does not answer fails the call rather than pick a target.
func TestMCPFollowsTheConsole(t *testing.T) {
	f := newSSHFleet(t, 2, false)
	// This test process asks the same server as the fleet's rex.
	for _, kv := range f.env {
		if v, ok := strings.CutPrefix(kv, "XDG_RUNTIME_DIR="); ok {
			t.Setenv("XDG_RUNTIME_DIR", v)
		}
	}
	cs, _, _ := mcpSession(t, f, "2025-11-25")
	target := func() string {
		t.Helper()
		_, text := mcpCall(t, cs, "bash", map[string]any{"command": "echo routed"}, nil)
		first, _, _ := strings.Cut(text, "\n")
		return first
	}
	if got := target(); !strings.HasPrefix(got, "target local") {
		t.Fatalf("with no rex server: %q, want local", got)
	}

	// The server, as rex starts it (no terminal: the console runs headless).
	srv := f.cmd("server", "run")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	t.Cleanup(func() {
		srv.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			srv.Process.Kill()
			t.Error("the rex server did not end on SIGTERM")
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var c *server.Client
	for {
		var err error
		c, err = server.Dial(ctx, "test")
		if err == nil {
			break
		}
		var none *server.ErrNoServer
		if !errors.As(err, &none) || ctx.Err() != nil {
			t.Fatalf("reach the rex server: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // it is starting
	}
	defer c.Close()

	// A client types /target in the console.
	a, err := server.Dial(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	keys, in := io.Pipe()
	defer in.Close()
	go a.Attach(ctx, server.Window{In: keys, Out: io.Discard, Size: func() (int, int) { return 120, 40 }})
	steer := func(name string) {
		t.Helper()
		io.WriteString(in, "/target "+name+"\r")
		for {
			got, err := c.Target(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got == name {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("the console's target is %q, want %s", got, name)
			}
			time.Sleep(20 * time.Millisecond) // the console takes the keys
		}
	}
	steer("h2")
	if got := target(); got != "target h2" && !strings.HasPrefix(got, "target h2:") {
		t.Fatalf("console on h2: %q", got)
	}
	steer("good")
	if got := target(); !strings.HasPrefix(got, "target good") {
		t.Fatalf("console on good: %q", got)
	}

	// A server that does not answer: the call fails, it does not go to
	// local. (SIGSTOP keeps its socket but nobody answers.)
	srv.Process.Signal(syscall.SIGSTOP)
	for !stopped(srv.Process.Pid) {
		if ctx.Err() != nil {
			t.Fatal("the rex server never stopped on SIGSTOP")
		}
		time.Sleep(10 * time.Millisecond) // the kernel stops every thread
	}
	r, text := mcpCall(t, cs, "bash", map[string]any{"command": "echo routed"}, nil)
	srv.Process.Signal(syscall.SIGCONT)
	if !r.IsError || !strings.Contains(text, "rex server") || strings.Contains(text, "routed") {
		t.Fatalf("with a server that does not answer: error %v, %q", r.IsError, text)
	}
}

// stopped reports whether every thread of pid is stopped (state T).
func stopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false
		}
		f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+1:])
		if len(f) == 0 || f[0] != "T" {
			return false
		}
	}
	return true
}
