package tui

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/tui/engine"
)

// testClock is a settable clock; views depend on time only through it.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *testClock {
	return &testClock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fakeFleet stands in for fanout.Run in model tests (the end-to-end tests
// run the real thing). It understands a few commands:
//
//	echo WORDS   prints WORDS (web3 prints "different" instead)
//	hostname     prints the target's name
//	seq N        prints 1..N
//	fail         prints "boom" on stderr and exits 3
//	sleep        runs until cancelled
//
// Targets in unreachable fail to connect.
type fakeFleet struct {
	unreachable map[string]bool
	odd         map[string]bool
	mu          sync.Mutex
	runs        []string // "targets: command" per run
}

func (f *fakeFleet) run(ctx context.Context, targets []fanout.Target, t fanout.Task, opts fanout.Options) *fanout.Summary {
	cmd := t.Command
	if cmd == "" {
		cmd = strings.Join(t.Argv, " ")
	}
	names := make([]string, len(targets))
	for i, tg := range targets {
		names[i] = tg.Name
	}
	f.mu.Lock()
	f.runs = append(f.runs, strings.Join(names, ",")+": "+cmd)
	f.mu.Unlock()
	results := make([]*fanout.Result, len(targets))
	var wg sync.WaitGroup
	for i, tg := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = f.one(ctx, tg.Name, cmd, opts.OnEvent)
			opts.OnEvent(fanout.Event{Target: tg.Name, Kind: fanout.EventResult, Result: results[i]})
		}()
	}
	wg.Wait()
	return fanout.Summarize(results, 2*time.Second)
}

func (f *fakeFleet) one(ctx context.Context, target, cmd string, emit func(fanout.Event)) *fanout.Result {
	code := func(n int) *int { return &n }
	if f.unreachable[target] {
		return &fanout.Result{Target: target, Unreachable: true,
			Err: fmt.Errorf("connect %s: dial tcp 10.0.0.9:2222: connect: connection refused; is the host up and reachable?", target)}
	}
	emit(fanout.Event{Target: target, Kind: fanout.EventStart})
	out := func(s string) { emit(fanout.Event{Target: target, Kind: fanout.EventStdout, Data: []byte(s)}) }
	r := &fanout.Result{Target: target, ExitCode: code(0), Duration: 1500 * time.Millisecond}
	word, rest, _ := strings.Cut(cmd, " ")
	switch word {
	case "echo":
		if f.odd[target] {
			rest = "different"
		}
		out(rest + "\n")
	case "hostname":
		out(target + "\n")
	case "seq":
		n, _ := strconv.Atoi(rest)
		var b strings.Builder
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, "%d\n", i)
		}
		out(b.String())
	case "fail":
		emit(fanout.Event{Target: target, Kind: fanout.EventStderr, Data: []byte("boom\n")})
		r.ExitCode = code(3)
	case "sleep":
		out("sleeping\n")
		<-ctx.Done()
		r.ExitCode = nil
		r.Err = errors.New(target + ": cancelled")
	default:
		emit(fanout.Event{Target: target, Kind: fanout.EventStderr, Data: []byte("sh: " + word + ": not found\n")})
		r.ExitCode = code(127)
	}
	return r
}

// testEnv is a console model over a temporary registry and directories.
type testEnv struct {
	t     *testing.T
	m     *Model
	fleet *fakeFleet
	clock *testClock
	store *devices.Store
	dir   string
}

// newEnv builds a model of size w×h. With fleet set, the registry has
// web1..web3 (group web) and db1, db1 is unreachable and web3's output
// differs.
func newEnv(t *testing.T, w, h int, fleet bool) *testEnv {
	t.Helper()
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "config", "rex")
	store := devices.NewStore(filepath.Join(cfgDir, "devices.json"))
	e := &testEnv{t: t, clock: newClock(), store: store, dir: dir,
		fleet: &fakeFleet{unreachable: map[string]bool{}, odd: map[string]bool{}}}
	if fleet {
		err := store.Update(context.Background(), func(r *devices.Registry) error {
			for _, d := range []struct{ name, host string }{
				{"web1", "root@10.0.0.1"}, {"web2", "root@10.0.0.2"}, {"web3", "root@10.0.0.3"}, {"db1", "admin@10.0.0.9:2222"},
			} {
				dev, err := devices.NewDevice(d.name, d.host, 0, "", "")
				if err != nil {
					return err
				}
				if _, err := r.Add(dev, false); err != nil {
					return err
				}
			}
			if err := r.CreateGroup("web"); err != nil {
				return err
			}
			_, _, err := r.AddToGroup("web", "web1", "web2", "web3")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		e.fleet.unreachable["db1"] = true
		e.fleet.odd["web3"] = true
	}
	opts := Options{
		Store:     store,
		Resolver:  resolverOf(store),
		ConfigDir: cfgDir,
		StateDir:  filepath.Join(dir, "state", "rex"),
		DeviceVerb: func(ctx context.Context, o commands.IO, args []string) error {
			return commands.Device(ctx, store, o, args)
		},
	}
	e.m = newModel(context.Background(), opts, e.fleet.run, e.clock.Now)
	e.m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	t.Cleanup(func() {
		for _, tk := range e.m.tasks.List() {
			tk.Stop()
		}
	})
	return e
}

// keyMsg builds the key press that Bubble Tea reports as name.
func keyMsg(t *testing.T, name string) tea.KeyPressMsg {
	t.Helper()
	special := map[string]rune{
		"enter": tea.KeyEnter, "tab": tea.KeyTab, "esc": tea.KeyEscape, "up": tea.KeyUp,
		"down": tea.KeyDown, "left": tea.KeyLeft, "right": tea.KeyRight, "pgup": tea.KeyPgUp,
		"pgdown": tea.KeyPgDown, "home": tea.KeyHome, "end": tea.KeyEnd, "f1": tea.KeyF1,
		"backspace": tea.KeyBackspace, "delete": tea.KeyDelete, "space": tea.KeySpace,
	}
	var k tea.Key
	parts := strings.Split(name, "+")
	base := parts[len(parts)-1]
	for _, mod := range parts[:len(parts)-1] {
		switch mod {
		case "ctrl":
			k.Mod |= tea.ModCtrl
		case "alt":
			k.Mod |= tea.ModAlt
		case "shift":
			k.Mod |= tea.ModShift
		}
	}
	if r, ok := special[base]; ok {
		k.Code = r
	} else {
		k.Code = []rune(base)[0]
		if k.Mod == 0 {
			k.Text = base
		}
	}
	msg := tea.KeyPressMsg(k)
	if msg.String() != name {
		t.Fatalf("key %q reports itself as %q", name, msg.String())
	}
	return msg
}

func (e *testEnv) press(names ...string) {
	e.t.Helper()
	for _, n := range names {
		e.m.Update(keyMsg(e.t, n))
	}
}

// typeText types s into the command line, key by key.
func (e *testEnv) typeText(s string) {
	for _, r := range s {
		e.m.Update(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
}

// submit types line, presses enter and waits for what it started.
func (e *testEnv) submit(line string) {
	e.t.Helper()
	e.typeText(line)
	e.press("enter")
	e.settle()
}

// settle waits for finished tasks and device verbs and runs a frame.
func (e *testEnv) settle() {
	e.t.Helper()
	deadline := time.After(10 * time.Second)
	for _, tk := range e.m.tasks.List() {
		if tk.Command == "sleep" && !tk.Cancelled() && !tk.Done() {
			// It runs until cancelled: wait until it has started and
			// said so (fakeFleet prints "sleeping"), or failed to.
			for _, r := range tk.Runs {
				for ph, _, _ := r.Status(); ph == engine.Waiting || ph == engine.Running && r.Buf.Len() == 0; ph, _, _ = r.Status() {
					select {
					case <-deadline:
						e.t.Fatalf("task %q did not start", tk.Command)
					case <-time.After(time.Millisecond):
					}
				}
			}
			continue
		}
		select {
		case <-tk.Exited():
		case <-deadline:
			e.t.Fatalf("task %q did not finish", tk.Command)
		}
	}
	e.m.Update(frameMsg{})
}

// runDevice runs a /device line to completion: the verb runs in a
// command, as Bubble Tea would run it.
func (e *testEnv) runDevice(line string) {
	e.t.Helper()
	e.typeText(line)
	_, cmd := e.m.Update(keyMsg(e.t, "enter"))
	e.runCmd(cmd)
}

// runCmd runs a command and feeds back what it returns, batches
// included, skipping the frame tick and resize ticks (they come back
// within a fraction of a second; a verb may take longer on a busy
// machine, and is waited for).
func (e *testEnv) runCmd(cmd tea.Cmd) {
	e.t.Helper()
	if cmd == nil {
		return
	}
	done := make(chan tea.Msg, 1)
	go func() { done <- cmd() }()
	var msg tea.Msg
	select {
	case msg = <-done:
	case <-time.After(30 * time.Second):
		e.t.Fatal("a command the console returned never finished")
	}
	switch msg := msg.(type) {
	case tea.BatchMsg:
		for _, c := range msg {
			e.runCmd(c)
		}
	case nil, frameMsg, resizeDueMsg:
	default:
		_, next := e.m.Update(msg)
		e.runCmd(next)
	}
}

// deliverResizes runs cmd as Bubble Tea would, waiting for its ticks, and
// feeds the resize ticks it yields back through Update, running what that
// returns, until none is left; other messages are dropped.
func (e *testEnv) deliverResizes(cmd tea.Cmd) {
	e.t.Helper()
	for cmd != nil {
		var due []tea.Msg
		var mu sync.Mutex
		var wg sync.WaitGroup
		var run func(tea.Cmd)
		run = func(c tea.Cmd) {
			defer wg.Done()
			switch msg := c().(type) {
			case tea.BatchMsg:
				for _, cc := range msg {
					if cc != nil {
						wg.Add(1)
						go run(cc)
					}
				}
			case resizeDueMsg:
				mu.Lock()
				due = append(due, msg)
				mu.Unlock()
			}
		}
		wg.Add(1)
		go run(cmd)
		wg.Wait()
		var next []tea.Cmd
		for _, msg := range due {
			_, c := e.m.Update(msg)
			next = append(next, c)
		}
		cmd = tea.Batch(next...)
	}
}

// setState makes target's connection state st, reported as the pool and
// the dialer report it; a failure gives err as its cause.
func (e *testEnv) setState(target string, st engine.State, err error) {
	c := e.m.states
	switch st {
	case engine.Connecting:
		c.Report(engine.FromPool, target, fanout.StateConnecting, nil)
	case engine.Bootstrapping:
		c.Report(engine.FromPool, target, fanout.StateConnecting, nil)
		c.Report(engine.FromSSH, target, "bootstrapping", nil)
	case engine.Ready:
		c.Report(engine.FromPool, target, fanout.StateConnecting, nil)
		c.Report(engine.FromPool, target, fanout.StateReady, nil)
	default:
		c.Report(engine.FromPool, target, fanout.StateError, err)
	}
}

// screen is the view without styling.
func (e *testEnv) screen() string {
	return ansi.Strip(e.m.View().Content)
}

// message is the message area's text.
func (e *testEnv) message() string {
	return ansi.Strip(strings.Join(e.m.msg.lines, "\n"))
}

func (e *testEnv) wantMessage(parts ...string) {
	e.t.Helper()
	msg := e.message()
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			e.t.Errorf("message %q does not contain %q", msg, p)
		}
	}
}

func (e *testEnv) wantError(parts ...string) {
	e.t.Helper()
	if e.m.msg.kind != msgError {
		e.t.Errorf("message %q is not an error", e.message())
	}
	e.wantMessage(parts...)
}

// paneText is the text of the i-th pane: its lines joined, each ended by
// a newline; a target's pane without its command and status lines (its
// hosts' output only).
func (e *testEnv) paneText(i int) string {
	e.t.Helper()
	p, ok := e.m.panes[i].(*outputPane)
	if !ok {
		e.t.Fatalf("pane %d is a %T", i, e.m.panes[i])
	}
	rd := p.read()
	defer rd.Done()
	var b strings.Builder
	for j := range rd.Len() {
		if l := rd.Line(j); l.Kind != engine.Command && l.Kind != engine.StatusOK && l.Kind != engine.StatusFail && l.Kind != engine.Marker {
			b.WriteString(l.Text + "\n")
		}
	}
	return b.String()
}

// paneLines is every line of the i-th pane, as drawn (no wrapping).
func (e *testEnv) paneLines(i int) []string {
	e.t.Helper()
	p := e.m.panes[i].(*outputPane)
	rd := p.read()
	defer rd.Done()
	var out []string
	for j := range rd.Len() {
		out = append(out, rd.Line(j).Text)
	}
	return out
}

// resolverOf is what rex gives the console: commands.Resolver over store,
// telling the console's notice what it folded.
func resolverOf(store *devices.Store) func(func(string)) func(string) ([]fanout.Target, error) {
	return func(notice func(string)) func(string) ([]fanout.Target, error) {
		return commands.Resolver(store, notice)
	}
}
