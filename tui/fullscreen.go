package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	tea "charm.land/bubbletea/v2"
	uv "github.com/charmbracelet/ultraviolet"
	"golang.org/x/term"

	"github.com/rexconsole/rex/internal/commands"
)

// A terminal pane goes full screen the way `rex attach` works: Bubble Tea
// releases the real terminal (as for tea.ExecProcess), the pane's screen
// is painted on it, and commands.HandOver forwards keystrokes and window
// sizes until the detach key. Output keeps flowing into the pane's
// emulator too, so the pane is intact when the console comes back.

// fullscreenDoneMsg says the real terminal is the console's again.
type fullscreenDoneMsg struct {
	pane *ptyPane
	err  error
}

// fullscreenCmd is a tea.ExecCommand that hands the real terminal to a
// pane's remote program.
type fullscreenCmd struct {
	ctx     context.Context
	pane    *ptyPane
	detach  []byte
	in      io.Reader
	out     io.Writer
	errSink io.Writer
}

func (c *fullscreenCmd) SetStdin(r io.Reader)  { c.in = r }
func (c *fullscreenCmd) SetStdout(w io.Writer) { c.out = w }
func (c *fullscreenCmd) SetStderr(w io.Writer) { c.errSink = w }

// Run paints the pane's screen on the real terminal and hands it over.
func (c *fullscreenCmd) Run() error {
	in, ok := c.in.(*os.File)
	out, ok2 := c.out.(*os.File)
	if !ok || !ok2 || !term.IsTerminal(int(in.Fd())) {
		return errors.New("full screen needs the console on a terminal")
	}
	cols, rows, err := term.GetSize(int(out.Fd()))
	if err != nil {
		return fmt.Errorf("full screen: read the terminal's size: %w", err)
	}
	rt, err := c.pane.enterFullscreen(out, cols, rows)
	if err != nil {
		return err
	}
	defer c.pane.leaveFullscreen(out)
	err = commands.HandOver(c.ctx, rt, in, out, c.detach)
	if errors.Is(err, commands.ErrDetached) {
		return nil
	}
	return err
}

// fullscreenTerm is the pane's terminal as HandOver drives it: a resize
// resizes the pane's emulator too, so that it keeps following the program.
type fullscreenTerm struct {
	p *ptyPane
	t remoteTerm
}

func (f fullscreenTerm) Write(ctx context.Context, b []byte) error { return f.t.Write(ctx, b) }
func (f fullscreenTerm) Done() <-chan struct{}                     { return f.t.Done() }

func (f fullscreenTerm) Resize(ctx context.Context, cols, rows int) error {
	f.p.mu.Lock()
	if f.p.emu.Width() != cols || f.p.emu.Height() != rows {
		f.p.resizeLocked(cols, rows)
	}
	f.p.sent = [2]int{cols, rows}
	f.p.mu.Unlock()
	return f.t.Resize(ctx, cols, rows)
}

// enterFullscreen sizes the emulator like the real terminal, paints its
// screen there with the modes the program set, and copies the program's
// output to out from now on.
func (p *ptyPane) enterFullscreen(out io.Writer, cols, rows int) (commands.Terminal, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != termLive {
		return nil, fmt.Errorf("the terminal on %s is not running; press %s or /reconnect first", p.target.Name, bindingHelp(p.keys.EnterPane))
	}
	p.fullscreen = true
	if p.emu.Width() != cols || p.emu.Height() != rows {
		p.resizeLocked(cols, rows)
	}
	p.scroll = 0
	var b strings.Builder
	if p.alt {
		b.WriteString("\x1b[?1049h")
	}
	b.WriteString("\x1b[m\x1b[H\x1b[2J")
	for y := range p.emu.Height() {
		b.WriteString("\x1b[" + strconv.Itoa(y+1) + "H")
		renderCells(&b, func(x int) *uv.Cell { return p.emu.CellAt(x, y) }, p.emu.Width())
	}
	m := p.modes
	set := func(on bool, seq string) {
		if on {
			b.WriteString(seq)
		}
	}
	set(m.appCursor, "\x1b[?1h")
	set(m.appKeypad, "\x1b=")
	set(m.bracketed, "\x1b[?2004h")
	set(m.focusEvents, "\x1b[?1004h")
	set(m.mouse == mouseX10, "\x1b[?9h")
	set(m.mouse == mouseNormal, "\x1b[?1000h")
	set(m.mouse == mouseButton, "\x1b[?1002h")
	set(m.mouse == mouseAny, "\x1b[?1003h")
	set(m.mouseSGR, "\x1b[?1006h")
	if p.cursorStyled {
		shape := 2*int(p.cursorShape) + 1
		if !p.cursorBlink {
			shape++
		}
		b.WriteString("\x1b[" + strconv.Itoa(shape) + " q")
	}
	cur := p.emu.CursorPosition()
	b.WriteString("\x1b[" + strconv.Itoa(cur.Y+1) + ";" + strconv.Itoa(cur.X+1) + "H")
	if p.cursorHidden {
		b.WriteString("\x1b[?25l")
	} else {
		b.WriteString("\x1b[?25h")
	}
	io.WriteString(out, b.String())
	p.tee = out
	return fullscreenTerm{p: p, t: p.term}, nil
}

// leaveFullscreen stops copying output to out and resets the modes the
// program may have set there, before Bubble Tea takes the terminal back.
// The pane's size is restored by the next frame's layout.
func (p *ptyPane) leaveFullscreen(out io.Writer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tee = nil
	p.fullscreen = false
	p.version++
	reset := "\x1b[m\x1b[?1l\x1b>\x1b[?2004l\x1b[?1004l\x1b[?9l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[0 q\x1b[?25h"
	if p.alt {
		reset += "\x1b[?1049l"
	}
	io.WriteString(out, reset)
}

// fullscreen hands the real terminal to the focused terminal pane.
func (m *Model) fullscreen() tea.Cmd {
	p := m.focusedTerm()
	if p == nil {
		m.fail(errors.New("full screen is for terminal panes; focus one opened by /attach (tab)"))
		return nil
	}
	if ph := p.phase(); ph != termLive {
		m.fail(fmt.Errorf("the terminal on %s is not running; press %s or /reconnect first", p.target.Name, bindingHelp(m.keys.EnterPane)))
		return nil
	}
	if m.host != nil {
		// The terminal to hand over is the client's, across the server's
		// socket: not done yet.
		m.fail(fmt.Errorf("full screen hands rex's own terminal to the pane, which a console in the rex server does not have; %s zooms the pane, or run rex --no-server", bindingHelp(m.keys.Zoom)))
		return nil
	}
	detach := keyBytes(m.keys.Detach.Keys()[0])
	if len(detach) == 0 {
		detach = []byte{commands.DetachKey}
	}
	m.setFocus(m.focus, false)
	c := &fullscreenCmd{ctx: m.ctx, pane: p, detach: detach}
	return tea.Exec(c, func(err error) tea.Msg { return fullscreenDoneMsg{pane: p, err: err} })
}

// fullscreenDone is the console back on the terminal.
func (m *Model) fullscreenDone(msg fullscreenDoneMsg) tea.Cmd {
	if msg.err != nil {
		m.fail(msg.err)
	}
	// The pane gets its size back (relayout, after this), and its remote
	// terminal at once, undebounced.
	p := msg.pane
	return tea.Batch(func() tea.Msg { p.flushResize(); return nil }, m.ensureTick())
}

func (m *Model) cmdFullscreen(args []string) tea.Cmd {
	if len(args) > 0 {
		m.fail(errors.New("/fullscreen takes no arguments; it hands the whole terminal to the focused terminal pane"))
		return nil
	}
	return m.fullscreen()
}
