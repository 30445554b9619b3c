package tui

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/rexconsole/rex/internal/commands"
)

// maxTerminals bounds the panes one /attach opens: past that, a group is
// better served by /run.
const maxTerminals = 64

// parseAttach reads /attach's arguments: an optional TARGETS list and
// --sudo, then optionally -- and the command.
func parseAttach(args []string) (spec string, cmd []string, sudo bool, err error) {
	var before []string
	for i, a := range args {
		if a == "--sudo" {
			sudo = true
			continue
		}
		if a == "--" {
			cmd = args[i+1:]
			if len(cmd) == 0 {
				return "", nil, false, errors.New("/attach: nothing follows --; give a command, or leave -- out for the login shell")
			}
			break
		}
		before = append(before, a)
	}
	if len(before) > 1 {
		return "", nil, false, fmt.Errorf("/attach takes one TARGETS list, then -- and a command: /attach %s -- %s", before[0], strings.Join(before[1:], " "))
	}
	if len(before) == 1 {
		spec = before[0]
	}
	return spec, cmd, sudo, nil
}

// cmdAttach is /attach [TARGETS] [-- CMD]: a terminal pane per target
// running CMD or the login shell, the first of them taking the keys.
func (m *Model) cmdAttach(args []string) tea.Cmd {
	spec, cmd, sudo, err := parseAttach(args)
	if err != nil {
		m.fail(err)
		return nil
	}
	if spec == "" {
		spec = m.target
	}
	if m.openTerm == nil {
		m.fail(errors.New("/attach needs connections to targets, which this console was started without"))
		return nil
	}
	targets, err := m.resolve(spec)
	if err != nil {
		m.fail(fmt.Errorf("/attach %s: %w", spec, err))
		return nil
	}
	if sudo {
		targets = commands.WithSudo(targets)
	}
	switch {
	case len(targets) == 0:
		m.fail(fmt.Errorf("/attach: %s names no targets; add devices to it first", spec))
		return nil
	case len(targets) > maxTerminals:
		m.fail(fmt.Errorf("/attach: %s names %d targets and one /attach opens at most %d terminals; use /run for commands on all of them", spec, len(targets), maxTerminals))
		return nil
	}
	m.nextID++
	t := &termTask{id: m.nextID, cmd: cmd, command: "login shell"}
	if len(cmd) > 0 {
		t.command = strings.Join(cmd, " ")
	}
	first := len(m.panes)
	for _, tg := range targets {
		m.nextID++
		p := newPTYPane(m.ctx, m.nextID, tg, t, &m.keys, m.cfg.TermScrollback, m.signal.mark)
		t.panes = append(t.panes, p)
		m.panes = append(m.panes, p)
	}
	m.zoom, m.gather = false, nil
	m.setFocus(first, true)
	m.attaching = t
	// Size the panes before their terminals open, so that programs start
	// at the size they are drawn at.
	resize := m.relayout()
	now := m.now()
	for _, p := range t.panes {
		p.start(m.openTerm, now)
	}
	return tea.Batch(resize, m.ensureTick())
}

// settleAttach watches the newest /attach until one of its terminals is
// live: when the one with the keys could not be opened, the first live
// terminal of the same /attach takes the keys (else the first still
// opening), so that typing goes where a program runs.
func (m *Model) settleAttach() {
	t := m.attaching
	if t == nil {
		return
	}
	fp, ok := m.focusedPane().(*ptyPane)
	if !ok || fp.task != t {
		m.attaching = nil // the operator went elsewhere
		return
	}
	switch fp.phase() {
	case termLive:
		m.attaching = nil
		return
	case termOpening:
		return
	}
	for _, want := range []termPhase{termLive, termOpening} {
		for i, p := range m.panes {
			if tp, ok := p.(*ptyPane); ok && tp.task == t && tp.phase() == want {
				m.setFocus(i, true)
				if want == termLive {
					m.attaching = nil
				}
				m.info("the terminal on %s could not be opened; keys go to %s", fp.Title(), tp.Title())
				return
			}
		}
	}
	m.attaching = nil
}

// setFocus moves the focus to pane i, which takes the keys when attach is
// set and it is a live terminal; the pane that had them gives them up.
func (m *Model) setFocus(i int, attach bool) {
	for j, p := range m.panes {
		if tp, ok := p.(*ptyPane); ok && tp.attached && (j != i || !attach) {
			tp.setAttached(false)
		}
	}
	if i < 0 || i >= len(m.panes) {
		return
	}
	m.focus = i
	if tp, ok := m.panes[i].(*ptyPane); ok && attach {
		if m.search != nil {
			m.endSearch(false)
		}
		ph := tp.phase()
		tp.setAttached(ph == termLive || ph == termOpening)
	}
}

// keyPane is the terminal pane that has the keys, if any: a pane whose
// terminal has ended has them no more (the next frame takes them back, in
// Update, for View calls this too and must change nothing).
func (m *Model) keyPane() *ptyPane {
	tp, ok := m.focusedPane().(*ptyPane)
	if !ok || !tp.attached {
		return nil
	}
	if ph := tp.phase(); ph != termLive && ph != termOpening {
		return nil
	}
	return tp
}

// typing is the key pane when its terminal is live: the operator types
// into a program there, and a question that opens meanwhile waits (see
// onKey). A pane still opening does not keep the keys from a question:
// its own dial may be what asks (a new host key, a sudo password).
func (m *Model) typing() *ptyPane {
	if p := m.keyPane(); p != nil && p.phase() == termLive {
		return p
	}
	return nil
}

// terminalKey is a key pressed while p has the keys: every key goes to
// its program (and the panes broadcast reaches) but the one that gives the
// keys back.
func (m *Model) terminalKey(p *ptyPane, msg tea.KeyPressMsg) {
	if key.Matches(msg, m.keys.Detach) {
		m.detach()
		return
	}
	m.typeKey(p, msg)
}

// pasteInto pastes text into p and the panes broadcast reaches.
func (m *Model) pasteInto(p *ptyPane, text string) {
	for _, tp := range m.keyTargets(p) {
		tp.sendPaste(text)
	}
}

// focusedTerm is the focused pane when it is a terminal.
func (m *Model) focusedTerm() *ptyPane {
	tp, _ := m.focusedPane().(*ptyPane)
	return tp
}

// typeKey sends a key to the pane with the keys, and to every live
// terminal of its task while broadcasting. Every key goes, shift+pgup and
// ctrl+x included: only the detach key (taken before this) is the
// console's while a terminal has the keys.
func (m *Model) typeKey(p *ptyPane, msg tea.KeyPressMsg) {
	for _, tp := range m.keyTargets(p) {
		tp.sendKey(msg.Key())
	}
}

// keyTargets are the panes a keystroke into p reaches: with broadcast on,
// every pane of its task whose terminal is live or opening (one opening,
// p itself after a drop say, keeps the keys until it opens), so no host
// misses what the others ran.
func (m *Model) keyTargets(p *ptyPane) []*ptyPane {
	if m.broadcast == nil || m.broadcast != p.task {
		return []*ptyPane{p}
	}
	var out []*ptyPane
	for _, tp := range p.task.panes {
		if ph := tp.phase(); ph == termLive || ph == termOpening || tp == p {
			out = append(out, tp)
		}
	}
	return out
}

// detach gives the keys back to the command line; the program goes on.
func (m *Model) detach() {
	m.setFocus(m.focus, false)
}

// enterPane is the EnterPane key on an empty command line: the focused
// terminal takes the keys, or, when its program has ended, starts again.
func (m *Model) enterPane(p *ptyPane) tea.Cmd {
	switch p.phase() {
	case termLive, termOpening:
		m.setFocus(m.focus, true)
		return nil
	}
	return m.reconnect([]*ptyPane{p})
}

// reconnect opens a new terminal in each pane, on a new connection when
// the old one dropped (the pool dials again for a dead connection).
func (m *Model) reconnect(panes []*ptyPane) tea.Cmd {
	now := m.now()
	for _, p := range panes {
		p.start(m.openTerm, now)
	}
	if p := m.focusedTerm(); p != nil {
		m.setFocus(m.focus, true)
	}
	return m.ensureTick()
}

func (m *Model) cmdReconnect(args []string) tea.Cmd {
	all, err := allArg("reconnect", args)
	if err != nil {
		m.fail(err)
		return nil
	}
	if m.openTerm == nil {
		m.fail(errors.New("/reconnect needs connections to targets, which this console was started without"))
		return nil
	}
	if !all {
		p := m.focusedTerm()
		if p == nil {
			m.fail(errors.New("the focused pane is not a terminal; focus one opened by /attach (tab), or /reconnect all"))
			return nil
		}
		return m.reconnect([]*ptyPane{p})
	}
	var ended []*ptyPane
	for _, p := range m.panes {
		if tp, ok := p.(*ptyPane); ok {
			if ph := tp.phase(); ph != termLive && ph != termOpening {
				ended = append(ended, tp)
			}
		}
	}
	if len(ended) == 0 {
		m.fail(errors.New("every terminal is open; /reconnect all reopens the ones that ended or lost their connection"))
		return nil
	}
	m.info("reopening %s", plural(len(ended), "terminal", "terminals"))
	return m.reconnect(ended)
}

// toggleBroadcast turns broadcast on for the focused terminal's task (and
// gives that pane the keys), or off.
func (m *Model) toggleBroadcast() error {
	if m.broadcast != nil {
		m.broadcast = nil
		return nil
	}
	p := m.focusedTerm()
	if p == nil {
		return errors.New("broadcast types into every terminal of one /attach; focus one of its panes first (tab), or open some with /attach GROUP")
	}
	m.broadcast = p.task
	m.setFocus(m.focus, true)
	return nil
}

func (m *Model) cmdBroadcast(args []string) tea.Cmd {
	if len(args) > 0 {
		m.fail(errors.New("/broadcast takes no arguments; it turns broadcast to the focused terminal's panes on or off"))
		return nil
	}
	if err := m.toggleBroadcast(); err != nil {
		m.fail(err)
		return nil
	}
	if m.broadcast == nil {
		m.info("broadcast off: keys go to one terminal again")
	}
	return nil
}

// broadcastTo reports whether keys typed into p reach other panes too.
func (m *Model) broadcastTo(p Pane) bool {
	tp, ok := p.(*ptyPane)
	return ok && m.broadcast != nil && tp.task == m.broadcast
}

// forgetTerm drops a closed terminal pane from its task and broadcast.
func (m *Model) forgetTerm(p *ptyPane) {
	p.shutdown()
	t := p.task
	for j, tp := range t.panes {
		if tp == p {
			t.panes = append(t.panes[:j:j], t.panes[j+1:]...)
			break
		}
	}
	if len(t.panes) == 0 && m.broadcast == t {
		m.broadcast = nil
	}
}

// terminalMouse routes a mouse event over the pane with the keys to its
// program when the program asked for the mouse; it reports whether it
// took the event.
func (m *Model) terminalMouse(kind mouseKind, ev tea.Mouse) bool {
	p := m.keyPane()
	if p == nil || !m.cfg.mouse() || m.helpOpen || m.dialogs.Len() > 0 {
		return false
	}
	for _, pl := range m.geo.panes {
		if pl.pane != Pane(p) {
			continue
		}
		inner := rect{pl.r.x + 1, pl.r.y + 1, pl.r.w - 2, pl.r.h - 2}
		if !inner.contains(ev.X, ev.Y) {
			return false
		}
		x, y := ev.X-inner.x, ev.Y-inner.y
		if p.mouse(kind, ev, x, y) {
			return true
		}
		if kind == mouseWheel && p.altScreen() {
			// A full-screen program that reads no mouse gets arrow keys
			// for the wheel, as xterm's alternate scroll mode sends.
			code := tea.KeyUp
			if ev.Button == tea.MouseWheelDown {
				code = tea.KeyDown
			}
			for range 3 {
				p.sendKey(tea.Key{Code: code})
			}
			return true
		}
		return false
	}
	return false
}

// paneCursor is where the program's cursor goes on the screen when a
// terminal pane has the keys.
func (m *Model) paneCursor(g geometry) (*tea.Cursor, bool) {
	p := m.keyPane()
	if p == nil {
		return nil, false
	}
	for _, pl := range g.panes {
		if pl.pane != Pane(p) {
			continue
		}
		c, _ := p.cursor(pl.r.x+1, pl.r.y+1)
		return c, true
	}
	return nil, true
}

// attachedHelp is the status line while a terminal has the keys.
func (m *Model) attachedHelp(p *ptyPane) string {
	k := &m.keys
	s := fmt.Sprintf(" every key goes to %s but %s, which gives the keys back to the command line", p.Title(), bindingHelp(k.Detach))
	if m.broadcast == p.task {
		s = fmt.Sprintf(" ⇶ BROADCAST: keys go to %s · %s back to the command line", plural(len(m.keyTargets(p)), "terminal", "terminals"), bindingHelp(k.Detach))
	}
	return s
}

// termHelp is the status line while a terminal pane has the focus but
// not the keys: how to type in it, or to reopen it.
func (m *Model) termHelp(p *ptyPane) string {
	k := &m.keys
	switch p.phase() {
	case termLive, termOpening:
		return fmt.Sprintf(" %s types in %s · %s broadcast · %s full screen · pgup history · %s help", bindingHelp(k.EnterPane), p.Title(), bindingHelp(k.Broadcast), bindingHelp(k.FullScreen), bindingHelp(k.Help))
	}
	return fmt.Sprintf(" %s reopens the terminal on %s · /close closes it · %s help", bindingHelp(k.EnterPane), p.Title(), bindingHelp(k.Help))
}

// cmdFocus is /focus N|NAME: the focus moves to pane N, or to the pane of
// target NAME (its terminal first); a terminal pane takes the keys.
func (m *Model) cmdFocus(args []string) tea.Cmd {
	if len(args) != 1 {
		m.fail(errors.New("/focus takes one pane: its number (1 is the first) or its target's name"))
		return nil
	}
	i := -1
	if n, err := strconv.Atoi(args[0]); err == nil {
		if n >= 1 && n <= len(m.panes) {
			i = n - 1
		}
	} else {
		for j, p := range m.panes {
			if p.Title() != args[0] {
				continue
			}
			if _, ok := p.(*ptyPane); ok {
				i = j
				break
			}
			if i < 0 {
				i = j
			}
		}
	}
	switch {
	case len(m.panes) == 0:
		m.fail(errors.New("/focus: there is no pane yet; /attach opens a terminal"))
		return nil
	case i < 0:
		m.fail(fmt.Errorf("/focus %s: no pane has that number or target; the panes are 1 to %d", args[0], len(m.panes)))
		return nil
	}
	m.gather, m.gatherOn = nil, false
	m.setFocus(i, true)
	return nil
}
