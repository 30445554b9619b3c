package sshx

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
	"github.com/rexconsole/rex/internal/sshtest"
)

// TestFirstCommandRidesWithTheSession: a connection's first command goes
// out with session.open (Target.First). It runs exactly once whether rexd
// was cached or had to be uploaded first (the script of the miss reads no
// input, so the early request goes nowhere), and its output arrives.
func TestFirstCommandRidesWithTheSession(t *testing.T) {
	e := newEnv(t)
	s := e.server(sshtest.Options{})
	count := filepath.Join(s.Home, "count")
	run := func(d *Dialer, wantUpload bool) {
		t.Helper()
		var out strings.Builder
		first := &rexclient.FirstExec{
			Params: protocol.ExecStartParams{Argv: []string{"sh", "-c", `echo x >> "$1"; echo hello`, "sh", count}},
			Opts:   rexclient.ExecOptions{Stdout: &out},
		}
		tg := e.target("h1", s)
		tg.First = first
		c := connect(t, d, tg)
		if c.Info.Uploaded != wantUpload {
			t.Fatalf("bootstrap %+v, want uploaded=%v", c.Info, wantUpload)
		}
		if !first.Sent || first.Err != nil || first.Proc == nil {
			t.Fatalf("first command: sent %v, err %v, proc %v", first.Sent, first.Err, first.Proc)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		exit, err := first.Proc.Wait(ctx)
		if err != nil || exit.ExitCode == nil || *exit.ExitCode != 0 || out.String() != "hello\n" {
			t.Fatalf("first command: exit %+v, err %v, stdout %q", exit, err, out.String())
		}
		if !c.Client.Idle() {
			t.Errorf("the connection is not idle after its only command ended")
		}
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}
	run(NewDialer(e.opts()), true)  // a miss: probe, upload, start the fresh copy
	run(NewDialer(e.opts()), false) // a hit, hashed on the target
	if got := readFile(t, count); got != "x\nx\n" {
		t.Errorf("the commands ran %d times in all, want 2 (once per connection)", strings.Count(got, "x"))
	}
}

// TestStampsLastAcrossProcesses: with a StampsFile, a new Dialer (a new
// rex process) runs a cached rexd another one verified without hashing it
// again, until the file changes; the stamps file is the operator's alone.
func TestStampsLastAcrossProcesses(t *testing.T) {
	e := newEnv(t)
	s := e.server(sshtest.Options{})
	o := e.opts()
	o.StampsFile = filepath.Join(t.TempDir(), "cache", "rexd-stamps.json")
	if c := connect(t, NewDialer(o), e.target("h1", s)); !c.Info.Uploaded {
		t.Fatalf("first: %+v, want an upload", c.Info)
	}
	c := connect(t, NewDialer(o), e.target("h1", s))
	if !c.Info.Cached || c.Info.Hashed {
		t.Errorf("a new dialer: %+v; want the cached rexd run without hashing (its stamp was kept)", c.Info)
	}
	if fi, err := os.Stat(o.StampsFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("stamps file: %v, %v; want mode 0600", fi, err)
	}
	now := time.Now().Add(time.Minute)
	if err := os.Chtimes(c.Info.RemotePath, now, now); err != nil {
		t.Fatal(err)
	}
	if c := connect(t, NewDialer(o), e.target("h1", s)); !c.Info.Cached || !c.Info.Hashed {
		t.Errorf("after a change: %+v; want it hashed again", c.Info)
	}
	other := o
	other.StampsFile = ""
	if c := connect(t, NewDialer(other), e.target("h1", s)); !c.Info.Hashed {
		t.Errorf("without a stamps file: %+v; want it hashed", c.Info)
	}
}
