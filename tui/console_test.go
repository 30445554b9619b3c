package tui

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/rexconsole/rex/devices"
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
	con, ran := startConsole(t)

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

// startConsole starts a console on a local rexd, as the rex server does,
// in this process; hooks, when given, change it before it runs.
func startConsole(t *testing.T, hooks ...func(*Console)) (*Console, chan error) {
	t.Helper()
	rexd := filepath.Join(t.TempDir(), "rexd")
	build := exec.Command("go", "build", "-o", rexd, "github.com/rexconsole/rex/cmd/rexd")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build rexd: %v\n%s", err, out)
	}
	dir := t.TempDir()
	return runConsole(t, dir, fanout.LocalConnector(rexd, append(fanout.OperatorLimits(), "--root", dir)...), nil, hooks...)
}

// noTargets connects a console whose test reaches no target.
func noTargets(context.Context, fanout.Target) (*fanout.Conn, error) {
	return nil, errors.New("no targets in this test")
}

// runConsole runs a console on a fresh configuration in dir that reaches
// its targets through conn; secrets, when not nil, asks its questions.
// hooks change the console before it runs.
func runConsole(t *testing.T, dir string, conn fanout.Connector, secrets *SecretAsker, hooks ...func(*Console)) (*Console, chan error) {
	t.Helper()
	if secrets == nil {
		secrets = NewSecretAsker()
	}
	cfg := filepath.Join(dir, "config", "rex")
	store := devices.NewStore(filepath.Join(cfg, "devices.json"))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	opts := Options{
		Store: store, Resolver: resolverOf(store), ConfigDir: cfg,
		StateDir:  filepath.Join(dir, "state", "rex"),
		CacheDir:  filepath.Join(dir, "cache", "rex"),
		Connector: conn,
		States:    &ConnStates{}, Prompts: &Prompts{}, Secrets: secrets,
	}
	con, err := NewConsole(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hooks {
		h(con)
	}
	ran := make(chan error, 1)
	go func() { ran <- con.Run() }()
	return con, ran
}

// An idle server gives memory back once its last client has been gone for
// trimAfter, and not before: a trim due while a client is attached, or
// scheduled by a detach that a later attach and detach superseded, is
// ignored. The test holds the ticks and delivers them itself.
func TestTrimWaitsForTheLastDetach(t *testing.T) {
	ticks := make(chan func(time.Time) tea.Msg, 4)
	trims := make(chan bool, 4)
	con, _ := startConsole(t, func(c *Console) {
		c.afterLeft = func(_ time.Duration, fn func(time.Time) tea.Msg) tea.Cmd {
			ticks <- fn
			return nil
		}
		c.trim = func(do bool) { trims <- do }
	})
	tick := func() func(time.Time) tea.Msg {
		t.Helper()
		select {
		case fn := <-ticks:
			return fn
		case <-time.After(time.Minute):
			t.Fatal("no trim was scheduled after the last client left")
			return nil
		}
	}
	trimmed := func() bool {
		t.Helper()
		select {
		case do := <-trims:
			return do
		case <-time.After(time.Minute):
			t.Fatal("the console never answered its trim")
			return false
		}
	}
	leave := func(c *testClient) {
		t.Helper()
		io.WriteString(c.keys, "\x11")
		c.waitFor(t, "Leave the console?")
		io.WriteString(c.keys, "d")
		c.detached(t)
	}

	a := attachClient(t, con, 100, 30)
	a.waitFor(t, "local ❯")
	leave(a)
	first := tick()
	// b comes and goes before the first trim is due.
	b := attachClient(t, con, 100, 30)
	b.waitFor(t, "local ❯")
	con.prog.Send(first(time.Now()))
	if trimmed() {
		t.Error("the console trimmed while a client was attached")
	}
	leave(b)
	second := tick()
	con.prog.Send(first(time.Now()))
	if trimmed() {
		t.Error("the console trimmed at the first detach's time though a client had attached and left since")
	}
	con.prog.Send(second(time.Now()))
	if !trimmed() {
		t.Error("the console did not trim trimAfter after its last client left")
	}
}

// nothingMsg is a message the console has no use for.
type nothingMsg struct{}

// TestConsoleSizeIsItsClients: the console is laid out for its active
// client, whatever else says a size. The headless engine program sends
// itself a 0×0 size (it has no terminal) from a goroutine of its own as
// it starts; under load that came after a client had attached, and the
// client was drawn an empty screen until its next key.
func TestConsoleSizeIsItsClients(t *testing.T) {
	con, _ := runConsole(t, t.TempDir(), fanout.ConnectorFunc(noTargets), nil)
	c := attachClient(t, con, 100, 30)
	c.waitFor(t, "❯")

	con.prog.Send(tea.WindowSizeMsg{}) // as the engine's own start sends it
	// The engine handles one message at a time: once a second is taken,
	// the first has been handled.
	con.prog.Send(nothingMsg{})
	con.mu.Lock()
	w, h := con.rt.m.width, con.rt.m.height
	con.mu.Unlock()
	if w != 100 || h != 30 {
		t.Fatalf("after the engine's own size the console is laid out for %d×%d, want its client's 100×30", w, h)
	}
}
