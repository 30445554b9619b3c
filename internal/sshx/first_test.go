package sshx

import (
	"context"
	"io"
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
// input, so the early request goes nowhere), and its output arrives. A
// Public one rides in the exec request that starts rexd: rexd gets it in
// its environment (protocol.FirstEnv), which the command does not
// inherit; one with a secret in its environment never goes so.
func TestFirstCommandRidesWithTheSession(t *testing.T) {
	for _, public := range []bool{true, false} {
		t.Run(map[bool]string{true: "public", false: "secret env"}[public], func(t *testing.T) {
			e := newEnv(t)
			s := e.server(sshtest.Options{})
			count := filepath.Join(s.Home, "count")
			run := func(d *Dialer, wantUpload bool) {
				t.Helper()
				var out strings.Builder
				first := &rexclient.FirstExec{
					Params: protocol.ExecStartParams{Argv: []string{"sh", "-c",
						`echo x >> "$1"; tr "\0" "\n" < /proc/$PPID/environ | grep -c "^$2=" || :; echo "${REXD_FIRST-unset}"; echo hello`,
						"sh", count, protocol.FirstEnv}},
					Opts:   rexclient.ExecOptions{Stdout: &out},
					Public: public,
				}
				if !public {
					first.Params.Env = map[string]string{"TOKEN": "s3cret"}
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
				inEnv := "0"
				if public {
					inEnv = "1"
				}
				exit, err := first.Proc.Wait(ctx)
				if want := inEnv + "\nunset\nhello\n"; err != nil || exit.ExitCode == nil || *exit.ExitCode != 0 || out.String() != want {
					t.Fatalf("first command: exit %+v, err %v, stdout %q, want %q", exit, err, out.String(), want)
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
		})
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

// TestLateConn: a client made before its exec writes into lateConn: what
// take does not hand over goes to the exec's input when it attaches,
// reads wait for it, and a close before it ends reads and closes the exec
// that attaches late.
func TestLateConn(t *testing.T) {
	l := newLateConn()
	l.Write([]byte("first\n"))
	if got := l.take(1 << 10); got != "Zmlyc3QK" {
		t.Errorf("take: %q, want base64 of the first line", got)
	}
	l.Write([]byte("second\n"))
	if got := l.take(4); got != "" {
		t.Errorf("take over the bound: %q, want nothing taken", got)
	}
	read := make(chan string, 1)
	go func() {
		b := make([]byte, 16)
		n, _ := l.Read(b)
		read <- string(b[:n])
	}()
	var in strings.Builder
	if err := l.attach(strings.NewReader("answer"), &in, closerFunc(func() error { return nil })); err != nil {
		t.Fatal(err)
	}
	if got := <-read; got != "answer" {
		t.Errorf("read %q, want the exec's output", got)
	}
	l.Write([]byte("third\n"))
	if in.String() != "second\nthird\n" {
		t.Errorf("the exec's input got %q, want what take kept, then the rest", in.String())
	}

	early := newLateConn()
	early.Close()
	if n, err := early.Read(make([]byte, 4)); n != 0 || err != io.EOF {
		t.Errorf("read after an early close: %d, %v; want EOF", n, err)
	}
	closed := false
	early.attach(strings.NewReader(""), io.Discard, closerFunc(func() error { closed = true; return nil }))
	if !closed {
		t.Error("an exec attached after the close was left open")
	}
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }
