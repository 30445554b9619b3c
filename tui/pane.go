package tui

import (
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/spinner"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/tui/engine"
)

// Pane is one box of the main area: task output panes (outputPane) and
// the terminal panes of /attach (ptyPane), which take every key while
// they have the keys.
type Pane interface {
	// Title names the pane: its target, or what it shows.
	Title() string
	// SetSize gives the pane its outer size, borders included. It is
	// called from Update only (by the layout); the command it may return
	// does the work that follows a resize, such as resizing a remote
	// terminal once the size has held.
	SetSize(width, height int) tea.Cmd
	// Update handles a message routed to the pane: pane keys (scrolling)
	// when it has focus, every key when CapturesKeys says so, mouse events
	// inside it.
	Update(msg tea.Msg) tea.Cmd
	// View draws the pane as exactly height lines of exactly width cells.
	View(c *paneCtx) []string
	// CapturesKeys reports whether the focused pane takes every key
	// instead of the command line (a remote terminal does).
	CapturesKeys() bool
}

// paneCtx is what a pane needs to draw.
type paneCtx struct {
	st      *Styles
	focused bool
	now     time.Time
	states  *engine.Contacts
	// broadcast marks a terminal pane that keystrokes reach while
	// broadcast is on.
	broadcast bool
}

// Line kinds, which pick a line's style.
type lineKind uint8

const (
	lineOut     lineKind = iota // standard output
	lineErr                     // standard error
	lineNote                    // what rex says about the task
	lineHead                    // a group heading of the gathered view
	lineHeadOdd                 // a heading of a group that differs
)

// phase is where a pane's task is on its target.
type phase int

const (
	phaseWaiting phase = iota // connecting, or waiting for a concurrency slot
	phaseRunning
	phaseDone
)

// spinnerFrames animate running panes; the frame follows the clock, so
// no extra messages are needed.
var spinnerFrames = spinner.MiniDot

// outputPane shows one target's output of one task, or (task nil) a block
// of text such as a long /device listing.
type outputPane struct {
	id     int
	target string
	title  string // for a text pane
	task   *task
	keys   *KeyMap
	sb     *scrollback
	w, h   int

	// Scrolling: following the newest line, or showing from top, an
	// absolute line number (lines dropped off the buffer count too).
	follow bool
	top    int64

	// Search.
	query   string
	matches []int64 // absolute line numbers matching query, oldest first
	matchAt int     // index in matches of the current match, -1 for none
	matchV  uint64  // scrollback version the matches were found in

	mu      sync.Mutex // guards the fields below, set by fan-out goroutines
	phase   phase
	started time.Time
	result  *fanout.Result
	// sync is set for the panes of /push and /pull: their progress,
	// drawn above the lines.
	sync *syncState
}

func newOutputPane(id int, target string, t *task, keys *KeyMap, sb *scrollback) *outputPane {
	return &outputPane{id: id, target: target, task: t, keys: keys, sb: sb, follow: true, matchAt: -1}
}

func (p *outputPane) Title() string {
	if p.task == nil {
		return p.title
	}
	return p.target
}

func (p *outputPane) SetSize(w, h int) tea.Cmd { p.w, p.h = w, h; return nil }

func (p *outputPane) CapturesKeys() bool { return false }

// bodyHeight is how many rows the lines get.
func (p *outputPane) bodyHeight() int { return max(0, p.h-2-p.syncHeight()) }

// Update scrolls on pane keys and the mouse wheel.
func (p *outputPane) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case tea.KeyPressMsg:
		page := max(1, p.bodyHeight()-1)
		switch {
		case key.Matches(msg, p.keys.PageUp):
			p.scroll(-page)
		case key.Matches(msg, p.keys.PageDown):
			p.scroll(page)
		case key.Matches(msg, p.keys.LineUp):
			p.scroll(-1)
		case key.Matches(msg, p.keys.LineDown):
			p.scroll(1)
		case key.Matches(msg, p.keys.Top):
			p.scrollTo(0)
		case key.Matches(msg, p.keys.Bottom):
			p.follow = true
		}
	case tea.MouseWheelMsg:
		switch msg.Button {
		case tea.MouseWheelUp:
			p.scroll(-3)
		case tea.MouseWheelDown:
			p.scroll(3)
		}
	}
	return nil
}

// rowCount is how many screen rows line l takes at width w (lines wrap).
func rowCount(l *outLine, w int) int {
	switch {
	case w <= 0 || l.width <= w:
		return 1
	case l.cacheW == w && l.cache != nil:
		return len(l.cache)
	}
	return len(wrapCells(l.text, l.width, w))
}

// followStartLocked is the first line shown when following: as many of
// the newest lines as fill the body.
func (p *outputPane) followStartLocked() int {
	n, bh, w := p.sb.lenLocked(), p.bodyHeight(), p.w-2
	var scratch outLine
	rows, i := 0, n
	for i > 0 {
		r := rowCount(p.sb.lineLocked(i-1, &scratch), w)
		if rows+r > bh && rows > 0 {
			break
		}
		rows += r
		i--
	}
	return i
}

// startLocked is the index of the first line shown.
func (p *outputPane) startLocked() int {
	last := p.followStartLocked()
	if p.follow {
		return last
	}
	return min(max(0, int(p.top-p.sb.dropped)), last)
}

// scroll moves the view by delta lines (negative: older). Reaching the
// newest line turns follow mode back on.
func (p *outputPane) scroll(delta int) {
	p.sb.mu.Lock()
	defer p.sb.mu.Unlock()
	p.scrollToLocked(p.startLocked() + delta)
}

func (p *outputPane) scrollTo(start int) {
	p.sb.mu.Lock()
	defer p.sb.mu.Unlock()
	p.scrollToLocked(start)
}

func (p *outputPane) scrollToLocked(start int) {
	last := p.followStartLocked()
	start = min(max(0, start), last)
	p.follow = start == last
	p.top = p.sb.dropped + int64(start)
}

// Clear empties the pane and follows again.
func (p *outputPane) Clear() {
	p.sb.Clear()
	p.follow = true
	p.matches, p.matchAt = nil, -1
}

// Search sets the query and moves to its newest match; it returns the
// number of matches.
func (p *outputPane) Search(q string) int {
	p.query = q
	p.matches, p.matchAt = nil, -1
	if q == "" {
		p.follow = true
		return 0
	}
	p.findMatches()
	if len(p.matches) > 0 {
		p.showMatch(len(p.matches) - 1)
	}
	return len(p.matches)
}

// SearchNext moves to the next older (or newer) match; SearchStatus
// tells where that is.
func (p *outputPane) SearchNext(older bool) {
	if p.query == "" {
		return
	}
	p.findMatches()
	if len(p.matches) == 0 {
		return
	}
	i := p.matchAt
	switch {
	case i < 0:
		i = len(p.matches) - 1
	case older:
		i = max(0, i-1)
	default:
		i = min(len(p.matches)-1, i+1)
	}
	p.showMatch(i)
}

// SearchStatus describes where the search is, for the command line.
func (p *outputPane) SearchStatus() string {
	if p.query == "" {
		return ""
	}
	if len(p.matches) == 0 {
		return "no match"
	}
	return fmt.Sprintf("match %d of %d", p.matchAt+1, len(p.matches))
}

func (p *outputPane) findMatches() {
	p.sb.mu.Lock()
	defer p.sb.mu.Unlock()
	if p.matches != nil && p.matchV == p.sb.version {
		return
	}
	var cur int64 = -1
	if p.matchAt >= 0 && p.matchAt < len(p.matches) {
		cur = p.matches[p.matchAt]
	}
	p.matches, p.matchAt = p.matches[:0], -1
	var scratch outLine
	fold := p.query == strings.ToLower(p.query)
	for i := range p.sb.lenLocked() {
		l := p.sb.lineLocked(i, &scratch)
		if matchIndex(l.text, p.query, fold) >= 0 {
			abs := p.sb.dropped + int64(i)
			if abs == cur {
				p.matchAt = len(p.matches)
			}
			p.matches = append(p.matches, abs)
		}
	}
	if p.matches == nil {
		p.matches = []int64{}
	}
	p.matchV = p.sb.version
}

func (p *outputPane) showMatch(i int) {
	p.matchAt = i
	p.sb.mu.Lock()
	defer p.sb.mu.Unlock()
	rel := int(p.matches[i] - p.sb.dropped)
	p.scrollToLocked(rel - p.bodyHeight()/2)
}

// matchIndex finds q in s, ignoring case when fold is set (the query is
// all lower case: "smart case", as in less and vim).
func matchIndex(s, q string, fold bool) int {
	if !fold {
		return strings.Index(s, q)
	}
	ls := strings.ToLower(s)
	if len(ls) != len(s) {
		return -1 // case mapping changed byte lengths; positions would lie
	}
	return strings.Index(ls, q)
}

func (p *outputPane) setRunning(now time.Time) {
	p.mu.Lock()
	p.phase, p.started = phaseRunning, now
	p.mu.Unlock()
}

func (p *outputPane) setResult(r *fanout.Result) {
	p.mu.Lock()
	p.phase, p.result = phaseDone, r
	p.mu.Unlock()
}

func (p *outputPane) status() (phase, time.Time, *fanout.Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.phase, p.started, p.result
}

// running reports whether the pane's target is still busy with its task.
func (p *outputPane) running() bool {
	if p.task == nil {
		return false
	}
	ph, _, _ := p.status()
	return ph != phaseDone
}

// headerStatus is the right part of the header, in forms from longest
// to shortest: a spinner and the time so far, or how the command ended.
func (p *outputPane) headerStatus(c *paneCtx) []boxSeg {
	if p.task == nil {
		return nil
	}
	st := c.st
	ph, started, r := p.status()
	if ph == phaseDone {
		if end := p.syncEnd(); end != nil {
			return end(st, r)
		}
	}
	switch ph {
	case phaseWaiting:
		from := p.task.started
		word := "waiting"
		if c.states != nil {
			switch s := string(c.states.Get(p.target).State); s {
			case stateConnecting, stateBootstrapping:
				word = s
			}
		}
		spin := spinnerAt(c.now, from)
		return []boxSeg{
			seg(st.Pane.Running, spin+" "+word+" "+fmtDuration(c.now.Sub(from))),
			seg(st.Pane.Running, spin+" "+word),
			seg(st.Pane.Running, spin),
		}
	case phaseRunning:
		spin := spinnerAt(c.now, started)
		return []boxSeg{
			seg(st.Pane.Running, spin+" "+fmtDuration(c.now.Sub(started))),
			seg(st.Pane.Running, spin),
		}
	}
	return resultSegs(st, r)
}

// resultSegs says how a command ended, longest form first.
func resultSegs(st *Styles, r *fanout.Result) []boxSeg {
	if r == nil {
		return nil
	}
	dur := " · " + fmtDuration(r.Duration)
	bad := func(long, short string) []boxSeg {
		return []boxSeg{seg(st.Pane.ExitFail, long+dur), seg(st.Pane.ExitFail, long), seg(st.Pane.ExitFail, short)}
	}
	switch {
	case r.Unreachable:
		return []boxSeg{seg(st.Pane.ExitFail, "unreachable"), seg(st.Pane.ExitFail, "✗")}
	case r.Err != nil && r.ExitCode == nil:
		if strings.HasSuffix(r.Err.Error(), "cancelled") || strings.Contains(r.Err.Error(), "cancelled;") {
			return bad("cancelled", "✗")
		}
		return bad("failed", "✗")
	case r.TimedOut:
		return bad("timed out", "✗")
	case r.Signal != "":
		return bad("signal "+r.Signal, r.Signal)
	case r.ExitCode != nil && *r.ExitCode == 0 && r.Err == nil:
		return []boxSeg{seg(st.Pane.ExitOK, "exit 0"+dur), seg(st.Pane.ExitOK, "exit 0"), seg(st.Pane.ExitOK, "0")}
	case r.ExitCode != nil:
		code := fmt.Sprintf("%d", *r.ExitCode)
		return bad("exit "+code, code)
	}
	return []boxSeg{seg(st.Pane.ExitFail, commands.ResultLine(r)), seg(st.Pane.ExitFail, "✗")}
}

func spinnerAt(now, from time.Time) string {
	frames := spinnerFrames.Frames
	i := int(now.Sub(from)/spinnerFrames.FPS) % len(frames)
	if i < 0 {
		i = 0
	}
	return frames[i]
}

// View draws the pane: header with target, command and status; the
// visible lines of the scrollback; a footer when scrolled or searching.
func (p *outputPane) View(c *paneCtx) []string {
	w, h := p.w, p.h
	if w < 4 || h < 2 {
		return blankLines(max(w, 0), max(h, 0))
	}
	st := c.st
	border, title := st.Pane.Border, st.Pane.Title
	if c.focused {
		border, title = st.Pane.BorderFocused, st.Pane.TitleFocused
	}
	inner := w - 2
	name := p.Title()
	// The status gives way to the name: pick its longest form that
	// leaves the name (up to 12 cells) room.
	want := min(ansi.StringWidth(name), 12) + 2
	var right boxSeg
	for _, s := range p.headerStatus(c) {
		right = s
		if inner-s.width-3 >= want {
			break
		}
	}
	if inner-right.width-3 < 3 {
		right = boxSeg{}
	}
	cmd := ""
	if p.task != nil {
		cmd = p.task.command
	}
	room := inner - right.width - 3
	nameSeg := seg(title, cut(name, max(1, room-2)))
	left := nameSeg
	if avail := room - nameSeg.width - 3; cmd != "" && avail > 4 {
		c := "· " + cut(cmd, avail-2) + " "
		left = joinSegs(nameSeg, boxSeg{text: st.Pane.Command.Render(c), width: ansi.StringWidth(c)})
	}

	body := make([]string, 0, h-2)
	if p.sync != nil {
		body = append(body, p.syncRows(c, inner)[:min(p.syncHeight(), h-2)]...)
	}
	var foot boxSeg
	p.sb.mu.Lock()
	n := p.sb.lenLocked()
	start := p.startLocked()
	fold := p.query == strings.ToLower(p.query)
	var scratch outLine
	rowsOf := func(l *outLine) []string {
		if p.query != "" && matchIndex(l.text, p.query, fold) >= 0 {
			return renderMatch(st, l, inner, p.query, fold)
		}
		return renderLine(st, l, inner)
	}
	next := start
	for ; next < n && len(body) < h-2; next++ {
		rows := rowsOf(p.sb.lineLocked(next, &scratch))
		body = append(body, rows[:min(len(rows), h-2-len(body))]...)
	}
	if below := n - next; !p.follow && below > 0 {
		foot = seg(st.Muted, fmt.Sprintf("↓ %d more", below))
	}
	p.sb.mu.Unlock()
	if s := p.SearchStatus(); s != "" {
		foot = joinSegs(foot, seg(st.Pane.Match, "/"+p.query+" "+s))
	}
	return drawBox(border, w, h, left, right, foot, body)
}

// lineStyle picks the style of a line kind.
func lineStyle(st *Styles, k lineKind) lipgloss.Style {
	switch k {
	case lineErr:
		return st.Pane.Stderr
	case lineNote:
		return st.Pane.Info
	case lineHead:
		return st.Pane.Heading
	case lineHeadOdd:
		return st.Pane.HeadingOdd
	}
	return st.Pane.Stdout
}

// renderLine draws a line as rows of exactly w cells, wrapping it, from
// its cache when it was drawn at that width with these styles before.
func renderLine(st *Styles, l *outLine, w int) []string {
	if l.cacheW == w && l.cacheGen == st.gen && l.cache != nil {
		return l.cache
	}
	style := st.lines[l.kind]
	var rows []string
	for _, r := range wrapCells(l.text, l.width, w) {
		if r.text == "" {
			rows = append(rows, spaces(w))
			continue
		}
		rows = append(rows, style.wrap(r.text)+spaces(w-r.width))
	}
	l.cache, l.cacheW, l.cacheGen = rows, w, st.gen
	return rows
}

// renderMatch draws a line with every occurrence of q highlighted (a
// match cut by the wrap is highlighted in neither row).
func renderMatch(st *Styles, l *outLine, w int, q string, fold bool) []string {
	base := st.lines[l.kind]
	match := sgrOf(st.Pane.Match)
	var rows []string
	for _, r := range wrapCells(l.text, l.width, w) {
		var b strings.Builder
		rest := r.text
		for rest != "" {
			i := matchIndex(rest, q, fold)
			if i < 0 {
				b.WriteString(base.wrap(rest))
				break
			}
			if i > 0 {
				b.WriteString(base.wrap(rest[:i]))
			}
			b.WriteString(match.wrap(rest[i : i+len(q)]))
			rest = rest[i+len(q):]
		}
		rows = append(rows, b.String()+spaces(w-r.width))
	}
	return rows
}

// cellRow is a piece of a wrapped line and its width in cells.
type cellRow struct {
	text  string
	width int
}

// wrapCells breaks text (tw cells wide) into rows of at most w cells,
// after a space when one is in the row's second half (so words stay
// whole), else at the edge; a wide character never straddles two rows.
func wrapCells(text string, tw, w int) []cellRow {
	if tw <= w || w <= 0 {
		return []cellRow{{text, tw}}
	}
	var rows []cellRow
	for text != "" {
		// i is the byte length that fits in w cells, cw its width.
		cw, i := 0, 0
		for i < len(text) {
			size, rw := 1, 1
			if text[i] >= 0x80 {
				var r rune
				r, size = utf8.DecodeRuneInString(text[i:])
				rw = ansi.StringWidth(string(r))
			}
			if cw+rw > w && cw > 0 {
				break
			}
			cw += rw
			i += size
		}
		if i < len(text) && text[i] != ' ' {
			if sp := strings.LastIndexByte(text[:i], ' '); sp >= 0 && sp+1 > i/2 {
				cw -= textWidth(text[sp+1 : i])
				i = sp + 1
			}
		}
		rows = append(rows, cellRow{text[:i], cw})
		text = text[i:]
	}
	return rows
}
