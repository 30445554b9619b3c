package tui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	uv "github.com/charmbracelet/ultraviolet"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/vt"

	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/tui/engine"
)

// termName is the terminal type remote programs are told: what the
// emulator understands.
const termName = "xterm-256color"

// resizeDebounce is how long a pane's size must hold before the remote
// terminal is resized: dragging a window edge sends one resize, not fifty.
const resizeDebounce = 120 * time.Millisecond

// maxEarlyInput bounds what is kept of keys typed before a terminal is
// open.
const maxEarlyInput = 64 << 10

// historySlack is the room a terminal's history may grow past its limit
// before it is cut back.
func historySlack(limit int) int { return max(limit/4, 64) }

// closeWait bounds how long closing a terminal waits for rexd.
const closeWait = 5 * time.Second

// remoteTerm is an open remote terminal as a pane drives it: a
// *rexclient.PTY, or a scripted stand-in in model tests.
type remoteTerm interface {
	commands.Terminal
	// Close ends the terminal's programs.
	Close(ctx context.Context) error
	// Wait returns how the program ended, or an error when its
	// connection was lost first.
	Wait(ctx context.Context) (*protocol.ExitEvent, error)
}

// openTermFunc opens a terminal on t running what p says, its output
// going to out; release gives back what it held (the pool's use of the
// connection) once the terminal has ended.
type openTermFunc func(ctx context.Context, t fanout.Target, p protocol.PTYOpenParams, out io.Writer) (term remoteTerm, release func(), err error)

// termTask is one /attach: a terminal pane per target, all running the
// same program. Broadcast sends keys to every pane of one termTask.
type termTask struct {
	id      int
	command string   // for headers: the command, or "login shell"
	cmd     []string // what runs; empty for the login shell
	panes   []*ptyPane
}

// live lists the task's panes whose program runs.
func (t *termTask) live() []*ptyPane {
	var out []*ptyPane
	for _, p := range t.panes {
		if p.phase() == termLive {
			out = append(out, p)
		}
	}
	return out
}

// termPhase is where a terminal pane's remote program is.
type termPhase int

const (
	termOpening termPhase = iota // connecting and opening the PTY
	termLive                     // the program runs
	termExited                   // the program ended
	termLost                     // the connection dropped
	termFailed                   // the terminal could not be opened
)

// ptyPane is a remote terminal: a PTY on a target whose output is
// interpreted by a terminal emulator (github.com/charmbracelet/x/vt) and
// drawn from its screen, so full-screen programs draw as they would in a
// terminal of their own. While it has the keys (attached) every key goes
// to the program, encoded as an xterm would send it.
//
// Output is written into the emulator by the connection's goroutine,
// under mu; the UI reads the emulator under mu on the frame tick. Memory
// is bounded by the screen and the scrollback limit.
type ptyPane struct {
	id        int
	target    fanout.Target
	task      *termTask
	keys      *KeyMap
	onChange  func()
	ctx       context.Context // ends when the pane is closed
	cancel    context.CancelFunc
	w, h      int
	attached  bool // it has the keys (UI goroutine only)
	histLimit int  // lines of history kept

	// replyTo takes what the emulator answers the program's queries
	// (cursor position, device attributes); answers made while the
	// terminal is still opening wait in replyEarly. replyMu guards both,
	// taken after mu when both are held: the reply goroutine takes only
	// replyMu, for it must never wait for mu, which the emulator holds
	// while it writes an answer into the pipe the goroutine reads.
	replyMu    sync.Mutex
	replyTo    *commands.InputSender
	replyEarly []byte

	mu           sync.Mutex
	emu          *vt.Emulator
	modes        termModes
	alt          bool // the alternate screen is shown
	cursorHidden bool
	cursorShape  tea.CursorShape
	cursorBlink  bool
	cursorStyled bool   // the program chose a cursor shape
	title        string // what the program called its window (OSC 0/2)
	scroll       int    // lines scrolled back into the history; 0 is live
	version      uint64 // bumped by every change to what is drawn
	tee          io.Writer
	fullscreen   bool

	state  termPhase
	since  time.Time
	exit   *protocol.ExitEvent
	err    error
	term   remoteTerm
	sender *commands.InputSender
	gen    int           // which terminal of the pane (reconnects count)
	done   chan struct{} // closed when the current terminal's goroutine ends
	sent   [2]int        // the size the remote terminal was last given
	early  []byte        // keys typed while the terminal was opening
	// resizeSeq numbers the emulator's resizes; a debounce tick acts
	// only if no resize came after it.
	resizeSeq int

	// The body as last drawn, to skip redrawing an unchanged screen.
	drawnV    uint64
	drawnKey  [4]int // width, height, scroll, style generation
	drawnRows []string
}

// newPTYPane makes a pane for t whose emulator keeps scrollback lines.
func newPTYPane(ctx context.Context, id int, t fanout.Target, task *termTask, keys *KeyMap, scrollback int, onChange func()) *ptyPane {
	if onChange == nil {
		onChange = func() {}
	}
	p := &ptyPane{id: id, target: t, task: task, keys: keys, onChange: onChange,
		emu: vt.NewEmulator(protocol.DefaultCols, protocol.DefaultRows), done: make(chan struct{})}
	close(p.done) // no terminal yet
	p.ctx, p.cancel = context.WithCancel(ctx)
	p.histLimit = max(scrollback, 1)
	p.emu.SetScrollbackSize(p.histLimit + historySlack(p.histLimit))
	// The callbacks run inside emu.Write, under mu.
	p.emu.SetCallbacks(vt.Callbacks{
		EnableMode:  func(m ansi.Mode) { p.modes.setMode(m, true) },
		DisableMode: func(m ansi.Mode) { p.modes.setMode(m, false) },
		AltScreen: func(on bool) {
			p.alt = on
			if on {
				p.scroll = 0
			}
		},
		CursorVisibility: func(visible bool) { p.cursorHidden = !visible },
		CursorStyle: func(style vt.CursorStyle, steady bool) {
			p.cursorShape, p.cursorBlink, p.cursorStyled = tea.CursorShape(style), !steady, true
		},
		Title: func(s string) { p.title = engine.Sanitize([]byte(s)) },
	})
	go p.forwardReplies()
	return p
}

// forwardReplies sends the emulator's answers to the program. The
// emulator writes them into a pipe while it parses output, so something
// must always read it.
func (p *ptyPane) forwardReplies() {
	buf := make([]byte, 512)
	for {
		n, err := p.emu.Read(buf)
		if n > 0 {
			p.replyMu.Lock()
			if p.replyTo != nil {
				p.replyTo.Send(append([]byte(nil), buf[:n]...))
			} else if len(p.replyEarly)+n <= maxEarlyInput {
				p.replyEarly = append(p.replyEarly, buf[:n]...)
			}
			p.replyMu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// setReplyTo sends the emulator's answers to s from now on, and those
// made while there was none. The caller holds mu.
func (p *ptyPane) setReplyTo(s *commands.InputSender) {
	p.replyMu.Lock()
	defer p.replyMu.Unlock()
	p.replyTo = s
	if s != nil {
		s.Send(p.replyEarly)
		p.replyEarly = nil
	}
}

func (p *ptyPane) Title() string { return p.target.Name }

// CapturesKeys reports whether the pane has the keys.
func (p *ptyPane) CapturesKeys() bool { return p.attached }

func (p *ptyPane) phase() termPhase {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// resizeDueMsg says a terminal pane's size has held for resizeDebounce
// since its resize number seq: time to resize its remote terminal.
type resizeDueMsg struct {
	pane *ptyPane
	seq  int
}

// SetSize sizes the pane and, when its body changed size, the emulator at
// once; the remote terminal follows when the returned tick comes back
// (resizeDue) with the size unchanged since.
func (p *ptyPane) SetSize(w, h int) tea.Cmd {
	p.w, p.h = w, h
	cols, rows := max(1, w-2), max(1, h-2)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fullscreen || (p.emu.Width() == cols && p.emu.Height() == rows) {
		return nil
	}
	p.resizeLocked(cols, rows)
	p.resizeSeq++
	msg := resizeDueMsg{pane: p, seq: p.resizeSeq}
	return tea.Tick(resizeDebounce, func(time.Time) tea.Msg { return msg })
}

// resizeDue is the debounce tick of a resize: when no resize followed it,
// the command it returns gives the remote terminal the emulator's size.
func (p *ptyPane) resizeDue(seq int) tea.Cmd {
	p.mu.Lock()
	current := seq == p.resizeSeq
	p.mu.Unlock()
	if !current {
		return nil
	}
	return func() tea.Msg {
		p.flushResize()
		return nil
	}
}

// resizeLocked resizes the emulator. A shrinking main screen first
// scrolls its top lines into the history so that the cursor's line stays
// in view, as terminals do.
func (p *ptyPane) resizeLocked(cols, rows int) {
	cur := p.emu.CursorPosition()
	if !p.alt && cur.Y >= rows {
		k := cur.Y - rows + 1
		seq := "\x1b[" + strconv.Itoa(p.emu.Height()) + "H" + strings.Repeat("\n", k) +
			"\x1b[" + strconv.Itoa(cur.Y-k+1) + ";" + strconv.Itoa(cur.X+1) + "H"
		p.emu.WriteString(seq)
	}
	p.emu.Resize(cols, rows)
	p.scroll = min(p.scroll, p.emu.ScrollbackLen())
	p.version++
}

// flushResize gives the remote terminal the emulator's size, if it has
// not got it yet.
func (p *ptyPane) flushResize() {
	p.mu.Lock()
	t := p.term
	cols, rows := p.emu.Width(), p.emu.Height()
	if t == nil || p.state != termLive || p.fullscreen || p.sent == [2]int{cols, rows} {
		p.mu.Unlock()
		return
	}
	p.sent = [2]int{cols, rows}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(p.ctx, closeWait)
	defer cancel()
	t.Resize(ctx, cols, rows)
}

// start opens a new terminal in the pane (the first, or a reconnect) in
// the background; its output goes into the emulator.
func (p *ptyPane) start(open openTermFunc, now time.Time) {
	p.mu.Lock()
	if old := p.term; old != nil && p.state == termLive {
		go closeTerm(old)
	}
	if p.gen > 0 {
		// A new program starts below what the old one left, in a sane
		// terminal: main screen, default modes and colours.
		p.emu.WriteString("\x1b[?1049l\x1b[m\x1b[?1l\x1b>\x1b[?2004l\x1b[?9l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1004l\x1b[?25h\x1b[0 q\r\n")
		p.scroll = 0
	}
	p.gen++
	gen := p.gen
	p.state, p.since, p.exit, p.err = termOpening, now, nil, nil
	p.term, p.sender, p.early = nil, nil, nil
	p.replyMu.Lock()
	p.replyTo, p.replyEarly = nil, nil
	p.replyMu.Unlock()
	cols, rows := p.emu.Width(), p.emu.Height()
	done := make(chan struct{})
	p.done = done
	p.version++
	p.mu.Unlock()

	ctx := p.ctx
	params := commands.PTYParams(p.task.cmd, cols, rows, termName)
	go func() {
		defer close(done)
		defer p.onChange()
		t, release, err := open(ctx, p.target, params, &termOutput{p: p, gen: gen})
		if err == nil && ctx.Err() != nil {
			closeTerm(t)
			release()
			err = ctx.Err()
		}
		p.mu.Lock()
		if gen != p.gen {
			p.mu.Unlock()
			if err == nil {
				closeTerm(t)
				release()
			}
			return
		}
		if err != nil {
			p.state, p.err = termFailed, err
			p.version++
			p.mu.Unlock()
			return
		}
		p.state, p.term = termLive, t
		p.sender = commands.NewInputSender(t)
		p.sender.Send(p.early)
		p.early = nil
		p.sent = [2]int{cols, rows}
		p.version++
		p.setReplyTo(p.sender)
		p.mu.Unlock()
		p.onChange()
		p.flushResize() // the pane may have changed size meanwhile

		select {
		case <-t.Done():
		case <-ctx.Done():
			closeTerm(t)
		}
		var exit *protocol.ExitEvent
		werr := errors.New("the terminal did not end when closed")
		select {
		case <-t.Done():
			exit, werr = t.Wait(context.Background())
		case <-time.After(closeWait):
		}
		release()
		p.mu.Lock()
		if gen == p.gen {
			p.state, p.exit, p.err = termExited, exit, nil
			if werr != nil {
				p.state, p.err = termLost, werr
			}
			p.version++
		}
		p.mu.Unlock()
	}()
}

// closeTerm ends a terminal's program, waiting a bounded time for rexd.
func closeTerm(t remoteTerm) {
	ctx, cancel := context.WithTimeout(context.Background(), closeWait)
	defer cancel()
	t.Close(ctx)
}

// kill ends the program; it reports whether one was running.
func (p *ptyPane) kill() bool {
	p.mu.Lock()
	t := p.term
	live := p.state == termLive
	p.mu.Unlock()
	if live {
		go closeTerm(t)
	}
	return live
}

// shutdown ends the pane for good: its terminal is closed and the
// emulator's reply goroutine ends. It returns a channel closed when the
// terminal has ended.
func (p *ptyPane) shutdown() <-chan struct{} {
	p.cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	// Closing the pipe directly, not through emu.Close, keeps the reply
	// goroutine's unlocked reads of the emulator free of races.
	if pw, ok := p.emu.InputPipe().(*io.PipeWriter); ok {
		pw.CloseWithError(io.EOF)
	}
	return p.done
}

// termOutput writes one terminal's output into its pane's emulator, and
// to the real terminal while the pane is full screen. Output of a
// terminal the pane has replaced is dropped.
type termOutput struct {
	p   *ptyPane
	gen int
}

func (o *termOutput) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		piece := b[:min(len(b), outputPiece)]
		if len(piece) < len(b) {
			if i := bytes.LastIndexByte(piece, '\n'); i >= 0 {
				piece = piece[:i+1]
			}
		}
		if !o.write(piece) {
			break
		}
		b = b[len(piece):]
	}
	o.p.onChange()
	return n, nil
}

// outputPiece bounds what is parsed under the pane's lock at once, so
// that a frame never waits long for a big chunk of output: pieces end
// after a newline when they can, where nothing is split.
const outputPiece = 4 << 10

// write parses one piece of output into the emulator; it reports false
// when the terminal has been replaced.
func (o *termOutput) write(b []byte) bool {
	p := o.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if o.gen != p.gen {
		return false
	}
	sb := p.emu.Scrollback()
	before := sb.Len()
	p.emu.Write(b)
	pushed := sb.Len() - before
	if sb.Len() > p.histLimit {
		// Once full, the emulator's history drops its oldest line by
		// moving all the others, for every new line; given some room
		// above the limit and cut back here in one step (a reslice), it
		// rarely has to.
		sb.SetMaxLines(p.histLimit)
		sb.SetMaxLines(p.histLimit + historySlack(p.histLimit))
	}
	if p.scroll > 0 {
		// Stay on the same lines while new ones arrive below.
		p.scroll = min(p.scroll+max(pushed, 0), sb.Len())
	}
	p.version++
	if p.tee != nil {
		// Under mu, so that leaving full screen never races a write to
		// the real terminal.
		p.tee.Write(b)
	}
	return true
}

// send queues bytes for the program and shows the live screen again.
func (p *ptyPane) send(b []byte) {
	if len(b) == 0 {
		return
	}
	p.mu.Lock()
	s := p.sender
	if p.scroll != 0 {
		p.scroll = 0
		p.version++
	}
	if s == nil && p.state == termOpening && len(p.early)+len(b) <= maxEarlyInput {
		// Typed while connecting: sent once the terminal is open.
		p.early = append(p.early, b...)
	}
	p.mu.Unlock()
	if s != nil {
		s.Send(b)
	}
}

// sendKey types k into the program.
func (p *ptyPane) sendKey(k tea.Key) {
	p.mu.Lock()
	m := p.modes
	p.mu.Unlock()
	p.send(encodeKey(k, m))
}

// sendPaste pastes text into the program.
func (p *ptyPane) sendPaste(s string) {
	p.mu.Lock()
	bracketed := p.modes.bracketed
	p.mu.Unlock()
	p.send(encodePaste(s, bracketed))
}

// setAttached gives the pane the keys or takes them away, telling the
// program when it asked to know about focus.
func (p *ptyPane) setAttached(on bool) {
	if p.attached == on {
		return
	}
	p.attached = on
	p.mu.Lock()
	focus := p.modes.focusEvents && p.state == termLive
	p.version++
	p.mu.Unlock()
	if focus {
		if on {
			p.send([]byte(ansi.Focus))
		} else {
			p.send([]byte(ansi.Blur))
		}
	}
}

// mouse forwards a mouse event at x, y of the terminal (from 0) when the
// program asked for mouse reports; it reports whether it did.
func (p *ptyPane) mouse(kind mouseKind, ev tea.Mouse, x, y int) bool {
	p.mu.Lock()
	m := p.modes
	p.mu.Unlock()
	b := encodeMouse(kind, ev, x, y, m)
	if b == nil {
		return m.mouse != mouseOff
	}
	p.send(b)
	return true
}

// wantsMouse reports the mouse tracking the program asked for.
func (p *ptyPane) wantsMouse() mouseTracking {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.modes.mouse
}

// altScreen reports whether a full-screen program shows its own screen
// (which has no history to scroll).
func (p *ptyPane) altScreen() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.alt
}

// scrollBy moves the view delta lines into the history (positive: older).
func (p *ptyPane) scrollBy(delta int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.alt {
		return
	}
	p.scroll = min(max(0, p.scroll+delta), p.emu.ScrollbackLen())
	p.version++
}

// Update scrolls the history on the pane keys and the mouse wheel; keys
// for the program are sent by the model, which knows about broadcast.
func (p *ptyPane) Update(msg tea.Msg) tea.Cmd {
	page := max(1, p.h-3)
	switch msg := msg.(type) {
	case tea.KeyPressMsg:
		k := p.keys
		switch {
		case key.Matches(msg, k.PageUp, k.TermScrollUp):
			p.scrollBy(page)
		case key.Matches(msg, k.PageDown, k.TermScrollDown):
			p.scrollBy(-page)
		case key.Matches(msg, k.LineUp):
			p.scrollBy(1)
		case key.Matches(msg, k.LineDown):
			p.scrollBy(-1)
		case key.Matches(msg, k.Top):
			p.scrollBy(1 << 30)
		case key.Matches(msg, k.Bottom):
			p.scrollBy(-(1 << 30))
		}
	case tea.MouseWheelMsg:
		switch msg.Button {
		case tea.MouseWheelUp:
			p.scrollBy(3)
		case tea.MouseWheelDown:
			p.scrollBy(-3)
		}
	}
	return nil
}

// Clear empties the history.
func (p *ptyPane) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.emu.ClearScrollback()
	p.scroll = 0
	p.version++
}

// cursor is the program's cursor in the body, when it shows: nil when
// hidden, or when the view is scrolled back.
func (p *ptyPane) cursor(x0, y0 int) (c *tea.Cursor, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cursorHidden || p.scroll > 0 || p.state != termLive {
		return nil, false
	}
	pos := p.emu.CursorPosition()
	if pos.X >= p.w-2 || pos.Y >= p.h-2 {
		return nil, false
	}
	c = tea.NewCursor(x0+pos.X, y0+pos.Y)
	if p.cursorStyled {
		c.Shape, c.Blink = p.cursorShape, p.cursorBlink
	}
	return c, true
}

// status says how the pane's terminal is doing, for the header: its
// phase, how the program ended and the error that ended it.
func (p *ptyPane) status() (termPhase, time.Time, *protocol.ExitEvent, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state, p.since, p.exit, p.err
}

// exitText says how a program ended: "exit 0", "signal HUP".
func exitText(e *protocol.ExitEvent) (string, bool) {
	switch {
	case e == nil:
		return "ended", false
	case e.ExitCode != nil:
		return fmt.Sprintf("exit %d", *e.ExitCode), *e.ExitCode == 0
	case e.Signal != nil:
		return "signal " + engine.SignalName(*e.Signal), false
	}
	return "ended", false
}

// headerStatus is the right of the header, longest form first.
func (p *ptyPane) headerStatus(c *paneCtx) []boxSeg {
	st := c.st
	ph, since, exit, _ := p.status()
	switch ph {
	case termOpening:
		word := "connecting"
		if c.states != nil && c.states.Get(p.target.Name).State == engine.Bootstrapping {
			word = stateBootstrapping
		}
		spin := spinnerAt(c.now, since)
		return []boxSeg{seg(st.Pane.Running, spin+" "+word+" "+fmtDuration(c.now.Sub(since))), seg(st.Pane.Running, spin+" "+word), seg(st.Pane.Running, spin)}
	case termLive:
		if p.attached {
			d := bindingHelp(p.keys.Detach)
			return []boxSeg{seg(st.Pane.TitleFocused, "typing here · "+d+" leaves"), seg(st.Pane.TitleFocused, "typing here"), seg(st.Pane.TitleFocused, "⌨")}
		}
		return []boxSeg{seg(st.Pane.ExitOK, "live"), seg(st.Pane.ExitOK, "●")}
	case termExited:
		text, ok := exitText(exit)
		style := st.Pane.ExitFail
		if ok {
			style = st.Pane.ExitOK
		}
		return []boxSeg{seg(style, text), seg(style, strings.TrimPrefix(text, "exit "))}
	case termLost:
		return []boxSeg{seg(st.Pane.ExitFail, "connection lost"), seg(st.Pane.ExitFail, "lost"), seg(st.Pane.ExitFail, "✗")}
	}
	return []boxSeg{seg(st.Pane.ExitFail, "failed"), seg(st.Pane.ExitFail, "✗")}
}

// notice is what the pane says below the screen while it has no live
// terminal, and the style to say it in.
func (p *ptyPane) notice() (string, styleKind) {
	ph, _, exit, err := p.status()
	again := "press " + bindingHelp(p.keys.EnterPane) + " or /reconnect"
	switch ph {
	case termOpening:
		return "opening a terminal on " + p.target.Name + "…", styleMuted
	case termExited:
		text, _ := exitText(exit)
		return fmt.Sprintf("%s ended (%s): %s to start it again, /close to close the pane.", p.task.command, text, again), styleMuted
	case termLost: // an error may quote what a host said: cleaned
		return fmt.Sprintf("The connection to %s was lost (%s): %s for a new terminal on a new connection.", p.target.Name, engine.Sanitize([]byte(errorText(err))), again), styleError
	case termFailed:
		return fmt.Sprintf("%s %s to try again.", sentence(engine.Sanitize([]byte(errorText(err)))), capitalize(again)), styleError
	}
	return "", styleMuted
}

// sentence ends s with a full stop unless it ends a sentence already.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasSuffix(s, ".") || strings.HasSuffix(s, "?") || strings.HasSuffix(s, "!") {
		return s
	}
	return s + "."
}

// capitalize upper-cases the first letter of s.
func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// styleKind picks a notice's style.
type styleKind int

const (
	styleMuted styleKind = iota
	styleError
)

// View draws the pane: the header with target, program and state; the
// emulator's screen (or history); a notice once the program is gone.
func (p *ptyPane) View(c *paneCtx) []string {
	w, h := p.w, p.h
	if w < 4 || h < 3 {
		return blankLines(max(w, 0), max(h, 0))
	}
	st := c.st
	border, titleStyle := st.Pane.Border, st.Pane.Title
	if c.focused {
		border, titleStyle = st.Pane.BorderFocused, st.Pane.TitleFocused
	}
	if c.broadcast {
		border = st.Pane.Broadcast
	}
	inner, bodyH := w-2, h-2

	// The status gives way to the name: its longest form that leaves the
	// name (up to 12 cells) room, with the broadcast mark when it fits.
	name := p.Title()
	want := min(ansi.StringWidth(name), 12) + 2
	status := p.headerStatus(c)
	var forms []boxSeg
	if c.broadcast {
		for _, s := range status {
			mark := st.Pane.Broadcast.Render(" ⇶ broadcast")
			forms = append(forms, boxSeg{text: mark + s.text, width: ansi.StringWidth(" ⇶ broadcast") + s.width})
		}
	}
	forms = append(forms, status...)
	var right boxSeg
	for _, s := range forms {
		right = s
		if inner-s.width-3 >= want {
			break
		}
	}
	if inner-right.width-3 < 3 {
		right = boxSeg{}
	}
	p.mu.Lock()
	what := p.title
	p.mu.Unlock()
	if what == "" {
		what = p.task.command
	}
	room := inner - right.width - 3
	nameSeg := seg(titleStyle, cut(name, max(1, room-2)))
	left := nameSeg
	if avail := room - nameSeg.width - 3; avail > 4 {
		s := "· " + cut(what, avail-2) + " "
		left = joinSegs(nameSeg, boxSeg{text: st.Pane.Command.Render(s), width: ansi.StringWidth(s)})
	}

	body, foot := p.body(st, inner, bodyH)
	if text, kind := p.notice(); text != "" {
		style := st.Muted
		if kind == styleError {
			style = st.Error
		}
		var rows []string
		for _, l := range wrapText(text, inner) {
			rows = append(rows, style.Render(fit(l, inner)))
		}
		rows = rows[:min(len(rows), bodyH)]
		body = placeNotice(body, rows, inner)
	}
	return drawBox(border, w, h, left, right, foot, body)
}

// placeNotice puts notice rows at the bottom of body, moving the screen's
// content up so that its last line stays in view above them.
func placeNotice(body, notice []string, w int) []string {
	last := -1
	blank := spaces(w)
	for i, l := range body {
		if l != blank {
			last = i
		}
	}
	room := len(body) - len(notice)
	shift := max(0, last+1-room)
	out := make([]string, 0, len(body))
	out = append(out, body[shift:shift+room]...)
	return append(out, notice...)
}

// body renders the visible rows (the live screen, or the history when
// scrolled back) as exactly h rows of w cells, and the footer that says
// how far back the view is.
func (p *ptyPane) body(st *Styles, w, h int) ([]string, boxSeg) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var foot boxSeg
	if p.scroll > 0 {
		foot = seg(st.Muted, fmt.Sprintf("↑ %d lines back · %s returns", p.scroll, bindingHelp(p.keys.TermScrollDown)))
	}
	keyOf := [4]int{w, h, p.scroll, st.gen}
	if p.drawnRows != nil && p.drawnV == p.version && p.drawnKey == keyOf {
		return p.drawnRows, foot
	}
	rows := make([]string, 0, h)
	sbLen := p.emu.ScrollbackLen()
	scr := p.emu.Height()
	first := sbLen - p.scroll // index of the first row shown, history first
	var b strings.Builder
	for i := 0; i < h; i++ {
		idx := first + i
		b.Reset()
		switch {
		case idx < sbLen:
			line := p.emu.Scrollback().Line(idx)
			renderCells(&b, func(x int) *uv.Cell {
				if x < len(line) {
					return &line[x]
				}
				return nil
			}, w)
		case idx-sbLen < scr:
			y := idx - sbLen
			renderCells(&b, func(x int) *uv.Cell { return p.emu.CellAt(x, y) }, w)
		default:
			b.WriteString(spaces(w))
		}
		rows = append(rows, b.String())
	}
	p.drawnRows, p.drawnV, p.drawnKey = rows, p.version, keyOf
	return rows, foot
}

// renderCells writes one row of cells as exactly w cells of text with
// the escape sequences of their styles; cells past the row are blank.
func renderCells(b *strings.Builder, cell func(x int) *uv.Cell, w int) {
	var pen uv.Style
	col := 0
	for x := 0; col < w; x++ {
		c := cell(x)
		if c == nil {
			break
		}
		if c.Width == 0 {
			continue // the second half of a wide character
		}
		if col+c.Width > w {
			break
		}
		if !c.Style.Equal(&pen) {
			b.WriteString(uv.StyleDiff(&pen, &c.Style))
			pen = c.Style
		}
		switch content := c.Content; {
		case content == "":
			b.WriteString(spaces(c.Width))
		case len(content) == 1 && content[0] < utf8.RuneSelf:
			b.WriteString(content)
		default:
			// The console lays text out by ansi.StringWidth; a cluster
			// it measures otherwise than the emulator did (a lone
			// emoji modifier, say) is drawn so that columns still add up.
			// A cluster that would join the one before it (a lone
			// combining mark or modifier) is measured as joined.
			cw := ansi.StringWidth(content)
			if ansi.StringWidth("x"+content) != 1+cw {
				cw = -1
			}
			switch {
			case cw == c.Width:
				b.WriteString(content)
			case cw > 0 && cw < c.Width:
				b.WriteString(content + spaces(c.Width-cw))
			default:
				b.WriteString("\ufffd" + spaces(c.Width-1))
			}
		}
		col += c.Width
	}
	if !pen.IsZero() {
		b.WriteString(ansi.ResetStyle)
	}
	if col < w {
		b.WriteString(spaces(w - col))
	}
}

// screenText is the live screen as plain text, one line per row with
// trailing blanks removed, for tests and the gathered view of terminals.
func (p *ptyPane) screenText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var lines []string
	for y := range p.emu.Height() {
		var b strings.Builder
		renderCells(&b, func(x int) *uv.Cell { return p.emu.CellAt(x, y) }, p.emu.Width())
		lines = append(lines, strings.TrimRight(ansi.Strip(b.String()), " "))
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n")
}
