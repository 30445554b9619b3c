package tui

import (
	"bytes"
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/server"
)

// screenLog is what a client's terminal was sent, without escapes.
type screenLog struct {
	mu  sync.Mutex
	raw bytes.Buffer
}

func (s *screenLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.raw.Write(p)
}

func (s *screenLog) has(sub string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Contains(ansi.Strip(s.raw.String()), sub)
}

// testClient is a client attached in-process, as internal/server's
// connection attaches one.
type testClient struct {
	keys   *io.PipeWriter
	screen *screenLog
	done   chan server.Detach
}

func attachClient(t *testing.T, con *Console, w, h int) *testClient {
	t.Helper()
	r, keys := io.Pipe()
	c := &testClient{keys: keys, screen: &screenLog{}, done: make(chan server.Detach, 1)}
	term := &server.Terminal{In: r, Out: c.screen, Cols: w, Rows: h, Env: []string{"TERM=xterm-256color"}}
	go func() {
		d := con.Attach(context.Background(), term)
		r.Close()
		c.done <- d
	}()
	t.Cleanup(func() { keys.Close() })
	return c
}

func (c *testClient) waitFor(t *testing.T, what string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !c.screen.has(what) {
		if time.Now().After(deadline) {
			t.Fatalf("the client never showed %q", what)
		}
		time.Sleep(10 * time.Millisecond) // the client's program draws on its own goroutine
	}
}

func (c *testClient) detached(t *testing.T) server.Detach {
	t.Helper()
	select {
	case d := <-c.done:
		return d
	case <-time.After(time.Minute):
		t.Fatal("the client was never detached")
		return server.Detach{}
	}
}

// TestConsoleClients runs the console as the rex server does, in this
// process (so that -race sees its locking): two clients of different
// sizes attach, both see a command's output, one detaches with ctrl+q →
// d while the console and the other run on, and a stop ends the console
// and tells the client left.
func TestConsoleClients(t *testing.T) {
	rexd := filepath.Join(t.TempDir(), "rexd")
	build := exec.Command("go", "build", "-o", rexd, "github.com/rexconsole/rex/cmd/rexd")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build rexd: %v\n%s", err, out)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config", "rex")
	store := devices.NewStore(filepath.Join(cfg, "devices.json"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := Options{
		Store: store, Resolve: commands.Resolver(store), ConfigDir: cfg,
		StateDir:  filepath.Join(dir, "state", "rex"),
		CacheDir:  filepath.Join(dir, "cache", "rex"),
		Connector: fanout.LocalConnector(rexd, append(fanout.OperatorLimits(), "--root", dir)...),
		States:    &ConnStates{}, Prompts: &Prompts{}, Secrets: NewSecretAsker(),
	}
	con, err := NewConsole(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- con.Run() }()

	a := attachClient(t, con, 120, 40)
	a.waitFor(t, "local ❯")
	b := attachClient(t, con, 90, 30)
	b.waitFor(t, "local ❯")
	io.WriteString(a.keys, "echo both-$((6*7))\r")
	a.waitFor(t, "both-42")
	b.waitFor(t, "both-42")
	if st := con.Status(); st.Clients != 2 || st.Target != "local" {
		t.Fatalf("status with two clients: %+v", st)
	}

	// a leaves: ctrl+q asks, d detaches.
	io.WriteString(a.keys, "\x11")
	a.waitFor(t, "Leave the console?")
	io.WriteString(a.keys, "d")
	if d := a.detached(t); d.Quit || d.Reason != "detached from the console" {
		t.Fatalf("a's detachment: %+v", d)
	}
	deadline := time.Now().Add(time.Minute)
	for con.Status().Clients != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("a is still counted: %+v", con.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// b carries on, laid out for itself now.
	io.WriteString(b.keys, "echo still-$((7*7))\r")
	b.waitFor(t, "still-49")

	// Stop with nothing running: the console ends and b is told.
	if _, ok := con.Stop(false); !ok {
		t.Fatalf("stop refused with nothing running: %+v", con.Status())
	}
	if d := b.detached(t); !d.Quit {
		t.Fatalf("b after the stop: %+v, want told the console quit", d)
	}
	select {
	case err := <-ran:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the console did not end after Stop")
	}
	if d := con.Attach(context.Background(), &server.Terminal{In: strings.NewReader(""), Out: io.Discard, Cols: 80, Rows: 24}); !d.Gone {
		t.Fatalf("attaching to a console that ended: %+v, want Gone", d)
	}
}
