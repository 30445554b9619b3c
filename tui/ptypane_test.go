package tui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/themes"
)

// fakeTerm stands in for a remote PTY in model tests (the end-to-end
// tests drive real ones): the test prints output into the pane, reads
// what the pane typed, and ends the program or drops the connection.
type fakeTerm struct {
	name   string
	params protocol.PTYOpenParams
	out    io.Writer

	mu       sync.Mutex
	input    bytes.Buffer
	resizes  [][2]int
	released bool
	done     chan struct{}
	once     sync.Once
	exit     *protocol.ExitEvent
	err      error
}

func (f *fakeTerm) Write(_ context.Context, b []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.input.Write(b)
	return nil
}

func (f *fakeTerm) Resize(_ context.Context, cols, rows int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resizes = append(f.resizes, [2]int{cols, rows})
	return nil
}

func (f *fakeTerm) Close(context.Context) error {
	hup := "HUP"
	f.end(&protocol.ExitEvent{Signal: &hup}, nil)
	return nil
}

func (f *fakeTerm) Done() <-chan struct{} { return f.done }

func (f *fakeTerm) Wait(context.Context) (*protocol.ExitEvent, error) {
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.exit, f.err
}

// print is the program writing to its terminal.
func (f *fakeTerm) print(s string) { f.out.Write([]byte(s)) }

// end ends the program with exit, or the connection with err.
func (f *fakeTerm) end(exit *protocol.ExitEvent, err error) {
	f.once.Do(func() {
		f.mu.Lock()
		f.exit, f.err = exit, err
		f.mu.Unlock()
		close(f.done)
	})
}

func (f *fakeTerm) exitWith(code int) { f.end(&protocol.ExitEvent{ExitCode: &code}, nil) }

func (f *fakeTerm) typed() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.input.String()
}

func (f *fakeTerm) resized() [][2]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][2]int(nil), f.resizes...)
}

// waitTyped waits until the program has received exactly want.
func (f *fakeTerm) waitTyped(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for f.typed() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s received %q, want %q", f.name, f.typed(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// settled waits until the program behind pane p has received exactly
// want and proves nothing else is on its way: a marker sent through the
// pane after everything else (a pane's input is written in order) must
// arrive right after want. It replaces sleeping to see that nothing comes.
func (f *fakeTerm) settled(t *testing.T, p *ptyPane, want string) {
	t.Helper()
	const mark = "\x00settled\x00"
	p.send([]byte(mark))
	f.waitTyped(t, want+mark)
}

// fakeTerms opens fakeTerms; targets in fail cannot be reached, and
// while hold is open every open waits for it.
type fakeTerms struct {
	mu    sync.Mutex
	terms map[string][]*fakeTerm
	fail  map[string]error
	hold  chan struct{}
	// greet is printed before open returns, as a program's first output
	// can arrive before the client has its terminal.
	greet string
}

func (f *fakeTerms) open(ctx context.Context, t fanout.Target, p protocol.PTYOpenParams, out io.Writer) (remoteTerm, func(), error) {
	if f.hold != nil {
		select {
		case <-f.hold:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	if err := f.fail[t.Name]; err != nil {
		return nil, nil, err
	}
	ft := &fakeTerm{name: t.Name, params: p, out: out, done: make(chan struct{})}
	if f.greet != "" {
		out.Write([]byte(f.greet))
	}
	f.mu.Lock()
	f.terms[t.Name] = append(f.terms[t.Name], ft)
	f.mu.Unlock()
	return ft, func() {
		ft.mu.Lock()
		ft.released = true
		ft.mu.Unlock()
	}, nil
}

// term is the n-th terminal opened on target.
func (f *fakeTerms) term(t *testing.T, target string, n int) *fakeTerm {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.terms[target]) <= n {
		t.Fatalf("%d terminals opened on %s, want at least %d", len(f.terms[target]), target, n+1)
	}
	return f.terms[target][n]
}

// withTerms gives the model fake terminals.
func (e *testEnv) withTerms() *fakeTerms {
	f := &fakeTerms{terms: map[string][]*fakeTerm{}, fail: map[string]error{}}
	e.m.openTerm = f.open
	e.t.Cleanup(func() {
		for _, p := range e.m.panes {
			if tp, ok := p.(*ptyPane); ok {
				tp.shutdown()
			}
		}
	})
	return f
}

// termPanes are the model's terminal panes.
func (e *testEnv) termPanes() []*ptyPane {
	var out []*ptyPane
	for _, p := range e.m.panes {
		if tp, ok := p.(*ptyPane); ok {
			out = append(out, tp)
		}
	}
	return out
}

// waitPhase waits until pane p's terminal is in phase ph, then draws a
// frame.
func (e *testEnv) waitPhase(p *ptyPane, ph termPhase) {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for p.phase() != ph {
		if time.Now().After(deadline) {
			e.t.Fatalf("the terminal on %s is in phase %d, want %d", p.Title(), p.phase(), ph)
		}
		time.Sleep(time.Millisecond)
	}
	e.m.Update(frameMsg{})
}

// attach runs an /attach line and waits until its terminals are open.
func (e *testEnv) attach(line string) []*ptyPane {
	e.t.Helper()
	before := len(e.termPanes())
	e.submit(line)
	panes := e.termPanes()[before:]
	if len(panes) == 0 {
		e.t.Fatalf("%s opened no terminal: %s", line, e.message())
	}
	for _, p := range panes {
		e.waitPhase(p, termLive)
	}
	return panes
}

// prompt is what the fake shells print first.
func prompt(host string) string {
	return "\x1b[1;32moperator@" + host + "\x1b[m:~$ "
}

func TestPTYPaneGolden(t *testing.T) {
	tests := []struct {
		name string
		do   func(e *testEnv, f *fakeTerms)
	}{
		{"attached", func(e *testEnv, f *fakeTerms) {
			e.attach("/attach web1")
			ft := f.term(t, "web1", 0)
			ft.print(prompt("web1") + "ls\r\nREADME  \x1b[34msrc\x1b[m  go.mod\r\n" + prompt("web1"))
			// Cursor addressing, as top draws its header.
			ft.print("\x1b7\x1b[1;60H\x1b[7mload 0.42\x1b[m\x1b8")
		}},
		{"detached", func(e *testEnv, f *fakeTerms) {
			e.attach("/attach web1")
			f.term(t, "web1", 0).print(prompt("web1") + "echo $((6*7))\r\n42\r\n" + prompt("web1"))
			e.press("ctrl+]")
		}},
		{"full-screen-program", func(e *testEnv, f *fakeTerms) {
			e.attach("/attach web1 -- vi notes.txt")
			p := e.termPanes()[0]
			var b strings.Builder
			b.WriteString("\x1b[?1049h\x1b[H\x1b[2Jhello from vi\r\n")
			for range p.h - 4 {
				b.WriteString("\x1b[34m~\x1b[m\r\n")
			}
			fmt.Fprintf(&b, "\x1b[%d;1H-- INSERT --\x1b[%d;60H1,14  All\x1b[1;14H", p.h-2, p.h-2)
			f.term(t, "web1", 0).print(b.String())
		}},
		{"broadcast", func(e *testEnv, f *fakeTerms) {
			e.attach("/attach web")
			for _, h := range []string{"web1", "web2", "web3"} {
				f.term(t, h, 0).print(prompt(h))
			}
			e.press("ctrl+]")
			e.submit("/broadcast")
		}},
		{"exited", func(e *testEnv, f *fakeTerms) {
			e.attach("/attach web1 -- make test")
			ft := f.term(t, "web1", 0)
			ft.print("go test ./...\r\nFAIL\tgithub.com/example/app\t0.2s\r\n")
			ft.exitWith(2)
			e.waitPhase(e.termPanes()[0], termExited)
		}},
		{"connection-lost", func(e *testEnv, f *fakeTerms) {
			e.attach("/attach web1")
			ft := f.term(t, "web1", 0)
			ft.print(prompt("web1") + "tail -f /var/log/syslog\r\nJun  1 12:00:01 web1 CRON[42]: job started\r\n")
			ft.end(nil, errors.New("ssh: connection reset by peer"))
			e.waitPhase(e.termPanes()[0], termLost)
		}},
		{"failed", func(e *testEnv, f *fakeTerms) {
			f.fail["db1"] = errors.New("connect db1: dial tcp 10.0.0.9:2222: connect: connection refused; is the host up and reachable?")
			e.submit("/attach db1")
			e.waitPhase(e.termPanes()[0], termFailed)
		}},
		{"connecting", func(e *testEnv, f *fakeTerms) {
			f.hold = make(chan struct{})
			e.submit("/attach web2")
			e.clock.Advance(1300 * time.Millisecond)
		}},
		{"scrolled-back", func(e *testEnv, f *fakeTerms) {
			e.attach("/attach web1 -- seq 200")
			var b strings.Builder
			for i := 1; i <= 200; i++ {
				fmt.Fprintf(&b, "line %d\r\n", i)
			}
			f.term(t, "web1", 0).print(b.String())
			e.press("ctrl+]", "pgup", "pgup")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, 120, 40, true)
			f := e.withTerms()
			tt.do(e, f)
			e.m.Update(frameMsg{})
			golden.RequireEqual(t, checkScreen(t, e, 120, 40))
		})
	}
}

// TestPTYKeysGoToTheProgram: while a terminal pane has the keys, every
// key reaches the program, console keys included, until the detach key;
// then the command line takes them, the program goes on, and enter on an
// empty line gives the pane the keys again.
func TestPTYKeysGoToTheProgram(t *testing.T) {
	e := newEnv(t, 120, 40, true)
	f := e.withTerms()
	p := e.attach("/attach web1")[0]
	ft := f.term(t, "web1", 0)
	if !p.CapturesKeys() {
		t.Fatal("a new terminal pane does not have the keys")
	}
	e.typeText("ls")
	e.press("enter", "ctrl+c", "ctrl+q", "f1", "tab", "esc", "ctrl+o", "up", "ctrl+l", "alt+b", "shift+tab")
	want := "ls\r\x03\x11\x1bOP\t\x1b\x0f\x1b[A\x0c\x1bb\x1b[Z"
	ft.waitTyped(t, want)
	if e.m.helpOpen || e.m.quitting || e.m.zoom || e.m.input.Value() != "" {
		t.Errorf("console keys acted while the terminal had the keys: help %v, quitting %v, zoom %v, line %q",
			e.m.helpOpen, e.m.quitting, e.m.zoom, e.m.input.Value())
	}

	e.press("ctrl+]")
	if p.CapturesKeys() || p.phase() != termLive {
		t.Fatalf("after ctrl+]: captures keys %v, phase %d; want the command line and a live terminal", p.CapturesKeys(), p.phase())
	}
	e.typeText("hostname")
	if got := e.m.input.Value(); got != "hostname" {
		t.Errorf("after ctrl+] the command line has %q, want %q", got, "hostname")
	}
	e.press("ctrl+u", "enter")
	if !p.CapturesKeys() {
		t.Fatal("enter on an empty line did not give the terminal the keys back")
	}
	e.typeText("x")
	ft.waitTyped(t, want+"x")
	if ft.typed() != want+"x" {
		t.Errorf("detached typing reached the program: %q", ft.typed())
	}
}

func TestPTYModesShapeInput(t *testing.T) {
	e := newEnv(t, 120, 40, false)
	f := e.withTerms()
	e.attach("/attach local")
	ft := f.term(t, "local", 0)
	e.press("up")
	e.m.Update(tea.PasteMsg{Content: "a\nb"})
	ft.waitTyped(t, "\x1b[Aa\rb")
	// The program turns on application cursor keys and bracketed paste.
	ft.print("\x1b[?1h\x1b[?2004h")
	e.press("up")
	e.m.Update(tea.PasteMsg{Content: "a\nb"})
	ft.waitTyped(t, "\x1b[Aa\rb\x1bOA\x1b[200~a\rb\x1b[201~")
}

// TestPTYEmulatorAnswers: the emulator's answers to the program's
// queries (here the cursor position report vim and others ask for)
// reach the program.
func TestPTYEmulatorAnswers(t *testing.T) {
	e := newEnv(t, 120, 40, false)
	f := e.withTerms()
	e.attach("/attach local")
	ft := f.term(t, "local", 0)
	ft.print("abc\x1b[6n")
	deadline := time.Now().Add(5 * time.Second)
	for !regexp.MustCompile(`^\x1b\[1;4R$`).MatchString(ft.typed()) {
		if time.Now().After(deadline) {
			t.Fatalf("the program received %q, want a cursor position report", ft.typed())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPTYEarlyQueries: a program that asks before the console has its
// terminal (vim asks at once) still gets its answer.
func TestPTYEarlyQueries(t *testing.T) {
	e := newEnv(t, 120, 40, false)
	f := e.withTerms()
	f.greet = "\x1b[c" // primary device attributes
	e.attach("/attach local")
	ft := f.term(t, "local", 0)
	deadline := time.Now().Add(5 * time.Second)
	for !regexp.MustCompile(`^\x1b\[\?[0-9;]+c$`).MatchString(ft.typed()) {
		if time.Now().After(deadline) {
			t.Fatalf("the program received %q, want the device attributes", ft.typed())
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPTYBroadcast(t *testing.T) {
	e := newEnv(t, 120, 40, true)
	f := e.withTerms()
	e.attach("/attach web")
	// While the terminal has the keys, ctrl+x is the program's (nano's
	// exit, emacs' prefix): it reaches the program and broadcast stays off.
	e.press("ctrl+x")
	f.term(t, "web1", 0).waitTyped(t, "\x18")
	if e.m.broadcast != nil {
		t.Fatal("ctrl+x while typing in a terminal turned broadcast on")
	}
	// From the command line, it turns broadcast on.
	e.press("ctrl+]", "ctrl+x")
	if e.m.broadcast == nil || e.m.keyPane() == nil {
		t.Fatalf("ctrl+x: broadcast %v, key pane %v; want broadcast on and a pane with the keys", e.m.broadcast, e.m.keyPane())
	}
	e.typeText("echo hi")
	e.press("enter")
	for _, h := range []string{"web2", "web3"} {
		f.term(t, h, 0).waitTyped(t, "echo hi\r")
	}
	f.term(t, "web1", 0).waitTyped(t, "\x18echo hi\r")
	if s := e.screen(); !strings.Contains(s, "⇶ broadcast to 3 terminals") || strings.Count(s, "─ ⇶ broadcast ") != 3 {
		t.Errorf("broadcast is not shown in the status line and on every pane:\n%s", s)
	}

	// An ended terminal drops out of the broadcast.
	f.term(t, "web2", 0).exitWith(0)
	e.waitPhase(e.termPanes()[1], termExited)
	e.typeText("ok")
	f.term(t, "web1", 0).waitTyped(t, "\x18echo hi\rok")
	f.term(t, "web3", 0).waitTyped(t, "echo hi\rok")
	if got := f.term(t, "web2", 0).typed(); got != "echo hi\r" {
		t.Errorf("the ended terminal received %q", got)
	}

	// Off: one terminal again.
	e.press("ctrl+]", "ctrl+x")
	if e.m.broadcast != nil {
		t.Fatal("ctrl+x again did not turn broadcast off")
	}
	e.press("enter")
	e.typeText("z")
	f.term(t, "web1", 0).waitTyped(t, "\x18echo hi\rokz")
	// web3 got nothing more: its pane's next input comes right after "ok".
	f.term(t, "web3", 0).settled(t, e.termPanes()[2], "echo hi\rok")
	if strings.Contains(e.screen(), "broadcast") {
		t.Errorf("broadcast still shown after turning it off:\n%s", e.screen())
	}
}

// TestPTYFocus: /focus gives a terminal the keys by its target's name
// or its number; tab only moves the focus.
func TestPTYFocus(t *testing.T) {
	e := newEnv(t, 120, 40, true)
	f := e.withTerms()
	panes := e.attach("/attach web")
	e.press("ctrl+]", "tab")
	if e.m.focus != 1 || panes[1].CapturesKeys() {
		t.Fatalf("tab: focus %d, web2 captures keys %v; want web2 focused, the command line typing", e.m.focus, panes[1].CapturesKeys())
	}
	e.submit("/focus web3")
	if e.m.focus != 2 || !panes[2].CapturesKeys() {
		t.Fatalf("/focus web3: focus %d, captures %v", e.m.focus, panes[2].CapturesKeys())
	}
	e.typeText("x")
	f.term(t, "web3", 0).waitTyped(t, "x")
	e.press("ctrl+]")
	e.submit("/focus 1")
	if e.m.focus != 0 || !panes[0].CapturesKeys() {
		t.Fatalf("/focus 1: focus %d, captures %v", e.m.focus, panes[0].CapturesKeys())
	}
	e.press("ctrl+]")
	e.submit("/focus 7")
	e.wantError("/focus 7: no pane has that number or target; the panes are 1 to 3")
}

func TestPTYBroadcastNeedsATerminal(t *testing.T) {
	e := newEnv(t, 120, 40, true)
	e.withTerms()
	e.submit("echo hello")
	e.submit("/broadcast")
	e.wantError("broadcast types into every terminal of one /attach")
}

// TestPTYResize: terminals open at their pane's size, and a change of
// pane size (here zoom) resizes the remote terminal once, after the
// debounce.
func TestPTYResize(t *testing.T) {
	e := newEnv(t, 120, 40, true)
	f := e.withTerms()
	panes := e.attach("/attach web")
	for i, h := range []string{"web1", "web2", "web3"} {
		ft := f.term(t, h, 0)
		if got, want := [2]int{ft.params.Cols, ft.params.Rows}, [2]int{panes[i].w - 2, panes[i].h - 2}; got != want {
			t.Errorf("%s opened at %v, its pane body is %v", h, got, want)
		}
	}
	e.press("ctrl+]")
	_, cmd := e.m.Update(keyMsg(t, "ctrl+o"))
	e.deliverResizes(cmd)
	g := e.m.geometry()
	want := [2]int{g.main.w - 2, g.main.h - 2}
	p := panes[0]
	if got := [2]int{p.emu.Width(), p.emu.Height()}; got != want {
		t.Errorf("zoomed emulator is %v, want %v", got, want)
	}
	ft := f.term(t, "web1", 0)
	deadline := time.Now().Add(5 * time.Second)
	for len(ft.resized()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("zoom never resized the remote terminal")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := ft.resized(); len(got) != 1 || got[0] != want {
		t.Errorf("resizes after zoom: %v, want [%v]", got, want)
	}

	// A burst of size changes is one resize, to the last size: every
	// tick but the last finds a newer size.
	var burst []tea.Cmd
	for _, w := range []int{100, 110, 130, 140} {
		_, cmd := e.m.Update(tea.WindowSizeMsg{Width: w, Height: 30})
		burst = append(burst, cmd)
	}
	e.deliverResizes(tea.Batch(burst...))
	g = e.m.geometry()
	want = [2]int{g.main.w - 2, g.main.h - 2}
	if got := ft.resized(); len(got) != 2 || got[1] != want {
		t.Errorf("resizes after a burst: %v, want one more to %v", got, want)
	}
}

// TestPTYShrinkKeepsTheCursorLine: a pane made shorter keeps the lines
// around the cursor in view, moving the top ones into the history.
func TestPTYShrinkKeepsTheCursorLine(t *testing.T) {
	e := newEnv(t, 120, 40, false)
	f := e.withTerms()
	p := e.attach("/attach local")[0]
	var b strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, "row %d\r\n", i)
	}
	b.WriteString("$ ")
	f.term(t, "local", 0).print(b.String())
	p.SetSize(p.w, 12)
	text := p.screenText()
	lines := strings.Split(text, "\n")
	if lines[len(lines)-1] != "$" || lines[len(lines)-2] != "row 30" {
		t.Errorf("after shrinking, the screen ends %q; want row 30 and the prompt:\n%s", lines[max(0, len(lines)-2):], text)
	}
	if c := p.emu.CursorPosition(); c.Y != 9 || c.X != 2 {
		t.Errorf("cursor at %v after shrinking to 10 rows, want (2,9)", c)
	}
}

func TestPTYReconnect(t *testing.T) {
	e := newEnv(t, 120, 40, true)
	f := e.withTerms()
	p := e.attach("/attach web1")[0]
	old := f.term(t, "web1", 0)
	old.print(prompt("web1") + "echo before\r\nbefore\r\n")
	old.end(nil, errors.New("ssh: connection reset by peer"))
	e.waitPhase(p, termLost)
	if p.CapturesKeys() {
		t.Error("a terminal whose connection dropped still has the keys")
	}
	if s := e.screen(); !strings.Contains(s, "connection lost") || !strings.Contains(s, "press enter or /reconnect") {
		t.Errorf("the pane does not say the connection dropped:\n%s", s)
	}
	// Typed into the dead terminal: nothing must reach anything.
	e.press("enter")
	e.waitPhase(p, termLive)
	nw := f.term(t, "web1", 1)
	nw.print(prompt("web1"))
	e.typeText("echo after")
	nw.waitTyped(t, "echo after")
	e.m.Update(frameMsg{})
	if s := e.screen(); !strings.Contains(s, "before") || !strings.Contains(s, "operator@web1:~$") {
		t.Errorf("after reconnecting, the old output or the new prompt is missing:\n%s", s)
	}
	old.mu.Lock()
	released := old.released
	old.mu.Unlock()
	if !released {
		t.Error("the dropped terminal's connection was not released")
	}
	// Output of the old terminal no longer reaches the pane.
	old.print("GHOST")
	if strings.Contains(p.screenText(), "GHOST") {
		t.Error("output of the replaced terminal reached the pane")
	}
}

func TestPTYExitGivesKeysBack(t *testing.T) {
	e := newEnv(t, 120, 40, false)
	f := e.withTerms()
	p := e.attach("/attach local -- sh -c 'exit 7'")[0]
	if got := f.term(t, "local", 0).params; got.Shell || strings.Join(got.Argv, "|") != "sh|-c|exit 7" {
		t.Fatalf("opened with %+v, want the words as argv, no shell", got)
	}
	f.term(t, "local", 0).exitWith(7)
	e.waitPhase(p, termExited)
	if p.CapturesKeys() || e.m.keyPane() != nil {
		t.Fatal("an ended terminal keeps the keys")
	}
	if s := e.screen(); !strings.Contains(s, "exit 7") {
		t.Errorf("the header does not show the exit status:\n%s", s)
	}
	e.typeText("/close")
	e.press("enter")
	if len(e.m.panes) != 0 {
		t.Errorf("/close left %d panes", len(e.m.panes))
	}
}

func TestPTYKillAndClose(t *testing.T) {
	e := newEnv(t, 120, 40, false)
	f := e.withTerms()
	p := e.attach("/attach local")[0]
	e.press("ctrl+]")
	e.submit("/close")
	e.wantError("still open", "/kill")
	e.submit("/close all")
	e.wantMessage("closed 0 panes; 1 terminal is still open")
	e.submit("/kill")
	e.waitPhase(p, termExited)
	if s := e.screen(); !strings.Contains(s, "signal HUP") {
		t.Errorf("the pane does not say how the program ended:\n%s", s)
	}
	e.submit("/close")
	if len(e.m.panes) != 0 {
		t.Fatalf("/close left %d panes", len(e.m.panes))
	}
	select {
	case <-f.term(t, "local", 0).Done():
	default:
		t.Error("the killed terminal is still open")
	}
}

// TestPTYTypingWhileConnecting: keys typed before the terminal is open
// reach it once it is.
func TestPTYTypingWhileConnecting(t *testing.T) {
	e := newEnv(t, 120, 40, false)
	f := e.withTerms()
	f.hold = make(chan struct{})
	e.submit("/attach")
	p := e.termPanes()[0]
	e.typeText("uptime")
	e.press("enter")
	close(f.hold)
	e.waitPhase(p, termLive)
	f.term(t, "local", 0).waitTyped(t, "uptime\r")
}

func TestPTYScrollback(t *testing.T) {
	e := newEnv(t, 120, 40, false)
	f := e.withTerms()
	p := e.attach("/attach local")[0]
	ft := f.term(t, "local", 0)
	var b strings.Builder
	for i := 1; i <= 300; i++ {
		fmt.Fprintf(&b, "line %d\r\n", i)
	}
	ft.print(b.String())
	if !strings.Contains(e.screen(), "line 300") || strings.Contains(e.screen(), "line 200 ") {
		t.Fatalf("live screen:\n%s", e.screen())
	}
	// While typing, only ctrl+] is the console's: shift+pgup goes to the
	// program as a terminal sends it.
	e.press("shift+pgup")
	ft.waitTyped(t, "\x1b[5;2~")
	if p.scroll != 0 {
		t.Fatalf("shift+pgup while typing scrolled the pane %d lines", p.scroll)
	}
	// From the command line, shift+pgup scrolls the focused terminal.
	e.press("ctrl+]", "shift+pgup")
	if p.scroll == 0 {
		t.Fatal("shift+pgup from the command line did not scroll")
	}
	if !strings.Contains(e.screen(), "lines back") {
		t.Errorf("no footer while scrolled back:\n%s", e.screen())
	}
	// A key for the program shows the live screen again.
	e.press("enter")
	e.typeText("q")
	ft.waitTyped(t, "\x1b[5;2~q")
	if p.scroll != 0 {
		t.Errorf("typing left the view %d lines back", p.scroll)
	}
	// Detached, the pane keys scroll.
	e.press("ctrl+]", "ctrl+home")
	if s := e.screen(); !strings.Contains(s, "line 1 ") {
		t.Errorf("ctrl+home does not show the oldest line:\n%s", s)
	}
	e.press("ctrl+end")
	if p.scroll != 0 {
		t.Errorf("ctrl+end left the view %d lines back", p.scroll)
	}
	// A full-screen program's screen has no history to scroll.
	ft.print("\x1b[?1049h")
	e.press("pgup")
	if p.scroll != 0 {
		t.Errorf("pgup scrolled the alternate screen by %d", p.scroll)
	}
}

func TestPTYMouse(t *testing.T) {
	e := newEnv(t, 120, 40, false)
	f := e.withTerms()
	e.attach("/attach local")
	ft := f.term(t, "local", 0)
	g := e.m.geometry()
	r := g.panes[0].r
	click := tea.MouseClickMsg{X: r.x + 1 + 4, Y: r.y + 1 + 2, Button: tea.MouseLeft}
	e.m.Update(click) // not asked for: nothing is sent
	ft.print("\x1b[?1000h\x1b[?1006h")
	e.m.Update(click)
	e.m.Update(tea.MouseReleaseMsg{X: click.X, Y: click.Y, Button: tea.MouseLeft})
	e.m.Update(tea.MouseMotionMsg{X: click.X + 1, Y: click.Y, Button: tea.MouseLeft}) // ?1000 has no motion
	e.m.Update(tea.MouseWheelMsg{X: click.X, Y: click.Y, Button: tea.MouseWheelDown})
	ft.waitTyped(t, "\x1b[<0;5;3M\x1b[<0;5;3m\x1b[<65;5;3M")
	// Outside the pane, a click is the console's.
	e.m.Update(tea.MouseClickMsg{X: 2, Y: 0, Button: tea.MouseLeft})
	ft.settled(t, e.termPanes()[0], "\x1b[<0;5;3M\x1b[<0;5;3m\x1b[<65;5;3M")
}

// TestPTYCursor: the cursor is where the program put it while the pane
// has the keys, and on the command line otherwise.
func TestPTYCursor(t *testing.T) {
	e := newEnv(t, 120, 40, false)
	f := e.withTerms()
	e.attach("/attach local")
	ft := f.term(t, "local", 0)
	ft.print("$ \x1b[5;9H")
	r := e.m.geometry().panes[0].r
	c := e.m.View().Cursor
	if c == nil || c.X != r.x+1+8 || c.Y != r.y+1+4 {
		t.Fatalf("cursor %+v, want (%d,%d)", c, r.x+9, r.y+5)
	}
	ft.print("\x1b[?25l") // hidden by the program
	if c := e.m.View().Cursor; c != nil {
		t.Errorf("the program hid its cursor, but it shows at %+v", c)
	}
	e.press("ctrl+]")
	if c := e.m.View().Cursor; c == nil || c.Y != e.m.geometry().prompt {
		t.Errorf("after ctrl+] the cursor is at %+v, want on the command line", c)
	}
}

func TestAttachErrors(t *testing.T) {
	tests := []struct {
		line string
		want []string
	}{
		{"/attach nosuch", []string{"/attach nosuch"}},
		{"/attach web1 vim", []string{"one TARGETS list", "/attach web1 -- vim"}},
		{"/attach web1 --", []string{"nothing follows --"}},
		{"/reconnect", []string{"not a terminal"}},
		{"/fullscreen", []string{"full screen is for terminal panes"}},
		{"/reconnect all", []string{"every terminal is open"}},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			e := newEnv(t, 120, 40, true)
			e.withTerms()
			e.submit(tt.line)
			e.wantError(tt.want...)
			if len(e.termPanes()) != 0 {
				t.Errorf("%s opened a terminal", tt.line)
			}
		})
	}
}

// FuzzPTYPaneOutput: whatever a remote program writes, the pane draws
// exactly its size and the console survives.
func FuzzPTYPaneOutput(f *testing.F) {
	f.Add([]byte("plain text\r\nnext line"), uint8(30), uint8(8))
	f.Add([]byte("\x1b[?1049h\x1b[2J\x1b[1;1H~\r\n~\x1b[38;2;255;0;0mred\x1b[m"), uint8(20), uint8(5))
	f.Add([]byte("wide 漢字 and 👍🏽 cells\x1b[1;79H漢"), uint8(10), uint8(4))
	f.Add([]byte("\x1b]0;title\x07\x1b[6n\x1b[c\x1b[?1000h\x1b[?2004h\x1b[5 q"), uint8(40), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, w, h uint8) {
		keys := DefaultKeyMap()
		task := &termTask{command: "fuzz"}
		p := newPTYPane(context.Background(), 1, fanout.Target{Name: "h"}, task, &keys, 100, nil)
		defer p.shutdown()
		width, height := int(w%120)+4, int(h%40)+3
		p.SetSize(width, height)
		out := &termOutput{p: p, gen: p.gen}
		out.Write(data)
		st := NewStyles(themes.MustDefault(), 1, false)
		for _, ctx := range []*paneCtx{{st: st, focused: true}, {st: st, broadcast: true}} {
			lines := p.View(ctx)
			if len(lines) != height {
				t.Fatalf("%d lines, want %d", len(lines), height)
			}
			for i, l := range lines {
				if got := ansi.StringWidth(l); got != width {
					t.Fatalf("line %d is %d cells, want %d: %q", i, got, width, l)
				}
			}
		}
	})
}

// TestAttachRuns: what /attach asks rexd to run, and the size it asks
// for.
func TestAttachRuns(t *testing.T) {
	tests := []struct {
		line    string
		argv    []string
		command string
		title   string
	}{
		{"/attach", nil, "", "login shell"},
		{"/attach local -- vim notes.txt", []string{"vim", "notes.txt"}, "", "vim notes.txt"},
		{"/attach -- 'top -d 1 | head'", nil, "top -d 1 | head", "top -d 1 | head"},
		{"/attach local -- htop", []string{"htop"}, "", "htop"},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			e := newEnv(t, 120, 40, false)
			f := e.withTerms()
			p := e.attach(tt.line)[0]
			got := f.term(t, "local", 0).params
			if strings.Join(got.Argv, "|") != strings.Join(tt.argv, "|") || got.Command != tt.command || got.Shell != (tt.command != "") {
				t.Errorf("pty.open with argv %q, shell %v, command %q; want argv %q, command %q", got.Argv, got.Shell, got.Command, tt.argv, tt.command)
			}
			if got.Term != "xterm-256color" || got.Cols != p.w-2 || got.Rows != p.h-2 {
				t.Errorf("pty.open with term %q, %dx%d; want xterm-256color, the pane's %dx%d", got.Term, got.Cols, got.Rows, p.w-2, p.h-2)
			}
			if !strings.Contains(e.screen(), "╭─ local · "+tt.title+" ") {
				t.Errorf("the header does not show %q:\n%s", tt.title, e.screen())
			}
		})
	}
}

// TestPTYTitle: a program that names its window (OSC 0/2) is named in the
// pane's header, the last name winning.
func TestPTYTitle(t *testing.T) {
	e := newEnv(t, 120, 40, false)
	f := e.withTerms()
	e.attach("/attach local")
	f.term(t, "local", 0).print("\x1b]0;vim notes.txt\x07\x1b]2;htop - load\x1b\\")
	if s := e.screen(); !strings.Contains(s, "╭─ local · htop - load ") {
		t.Errorf("the header does not show the program's title:\n%s", s)
	}
}

// TestPTYAttachFocusesALiveTerminal: when the terminals of an /attach
// that failed come first, the keys go to the first live one.
func TestPTYAttachFocusesALiveTerminal(t *testing.T) {
	e := newEnv(t, 120, 40, true)
	f := e.withTerms()
	f.fail["db1"] = errors.New("connect db1: dial tcp 10.0.0.9:2222: connect: connection refused; is the host up and reachable?")
	f.fail["web1"] = errors.New("log in to web1 as root: the server took none of the keys offered")
	// No frame may run before every phase settles (submit and waitPhase
	// each send one): a frame that saw web3 live before web2 would rightly
	// give web3 the keys. Then one frame: the first live terminal in the
	// /attach's order takes them.
	e.typeText("/attach db1,web1,web2,web3")
	e.press("enter")
	panes := e.termPanes()
	want := []termPhase{termFailed, termFailed, termLive, termLive}
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < len(want); {
		if panes[i].phase() == want[i] {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("the terminal on %s is in phase %d, want %d", panes[i].Title(), panes[i].phase(), want[i])
		}
		time.Sleep(time.Millisecond)
	}
	e.m.Update(frameMsg{})
	if e.m.focusedPane() != Pane(panes[2]) || !panes[2].CapturesKeys() {
		t.Fatalf("focus on %s (keys %v), want web2 with the keys", e.m.focusedPane().Title(), panes[2].CapturesKeys())
	}
	e.wantMessage("could not be opened; keys go to web2")
	e.typeText("x")
	f.term(t, "web2", 0).waitTyped(t, "x")
}
