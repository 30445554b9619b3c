package tui

import (
	"fmt"
	"strings"
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

// spinnerFrames animate running panes; the frame follows the clock, so
// no extra messages are needed.
var spinnerFrames = spinner.MiniDot

// outputPane shows output lines from one of three sources: a target's
// transcript (one host's history of the commands run on the current
// target), one task's run on one target (/run elsewhere, /push, /pull,
// /tool, a task reopened from /tasks), or a block of text (a long
// /device listing, a gathered view). The lines live in the engine; the
// pane holds only how they are looked at.
type outputPane struct {
	title string             // a text pane's
	tr    *engine.Transcript // a target's pane
	run   *engine.Run        // a task's pane
	buf   *engine.Buffer     // a text pane
	keys  *KeyMap
	w, h  int

	// Scrolling: following the newest line, or showing from top, an
	// absolute line number (lines dropped off the buffer count too).
	follow bool
	top    int64

	// Search.
	query   string
	matches []int64 // absolute line numbers matching query, oldest first
	matchAt int     // index in matches of the current match, -1 for none
	matchV  uint64  // the lines' version the matches were found in
}

func newTranscriptPane(tr *engine.Transcript, keys *KeyMap) *outputPane {
	return &outputPane{tr: tr, keys: keys, follow: true, matchAt: -1}
}

func newRunPane(r *engine.Run, keys *KeyMap) *outputPane {
	return &outputPane{run: r, keys: keys, follow: true, matchAt: -1}
}

func newTextPane(title string, b *engine.Buffer, keys *KeyMap) *outputPane {
	return &outputPane{title: title, buf: b, keys: keys, follow: true, matchAt: -1}
}

// lineReader is locked access to a pane's lines.
type lineReader interface {
	Len() int
	Line(i int) *engine.Line
	Dropped() int64
	Version() uint64
	Done()
}

// read locks the pane's lines; call Done on the reader.
func (p *outputPane) read() lineReader {
	switch {
	case p.tr != nil:
		return p.tr.Read()
	case p.run != nil:
		return p.run.Buf.Read()
	}
	return p.buf.Read()
}

// current is the run the header describes: a task pane's run, or the
// newest command of a target's pane; nil for text.
func (p *outputPane) current() *engine.Run {
	switch {
	case p.run != nil:
		return p.run
	case p.tr != nil:
		return p.tr.Latest()
	}
	return nil
}

// task is the task the pane's keys act on (ctrl+c, the gathered view):
// the newest one still running in a target's pane, else its newest.
func (p *outputPane) task() *engine.Task {
	if p.tr != nil {
		runs := p.tr.Runs()
		for i := len(runs) - 1; i >= 0; i-- {
			if runs[i].Running() {
				return runs[i].Task
			}
		}
	}
	if r := p.current(); r != nil {
		return r.Task
	}
	return nil
}

func (p *outputPane) Title() string {
	switch {
	case p.tr != nil:
		return p.tr.Host
	case p.run != nil:
		return p.run.Target
	}
	return p.title
}

func (p *outputPane) SetSize(w, h int) tea.Cmd { p.w, p.h = w, h; return nil }

func (p *outputPane) CapturesKeys() bool { return false }

// sync is the sync state of a /push or /pull pane.
func (p *outputPane) sync() (engine.SyncState, bool) {
	if p.run == nil {
		return engine.SyncState{}, false
	}
	return p.run.Sync()
}

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
func rowCount(l *engine.Line, w int) int {
	switch {
	case w <= 0 || l.Width <= w:
		return 1
	case l.Drawn != nil && l.Drawn.Width == w:
		return len(l.Drawn.Rows)
	}
	return len(wrapCells(l.Text, l.Width, w))
}

// followStart is the first line shown when following: as many of the
// newest lines as fill the body.
func (p *outputPane) followStart(rd lineReader) int {
	n, bh, w := rd.Len(), p.bodyHeight(), p.w-2
	rows, i := 0, n
	for i > 0 {
		r := rowCount(rd.Line(i-1), w)
		if rows+r > bh && rows > 0 {
			break
		}
		rows += r
		i--
	}
	return i
}

// start is the index of the first line shown.
func (p *outputPane) start(rd lineReader) int {
	last := p.followStart(rd)
	if p.follow {
		return last
	}
	return min(max(0, int(p.top-rd.Dropped())), last)
}

// scroll moves the view by delta lines (negative: older). Reaching the
// newest line turns follow mode back on.
func (p *outputPane) scroll(delta int) {
	rd := p.read()
	defer rd.Done()
	p.scrollIn(rd, p.start(rd)+delta)
}

func (p *outputPane) scrollTo(start int) {
	rd := p.read()
	defer rd.Done()
	p.scrollIn(rd, start)
}

func (p *outputPane) scrollIn(rd lineReader, start int) {
	last := p.followStart(rd)
	start = min(max(0, start), last)
	p.follow = start == last
	p.top = rd.Dropped() + int64(start)
}

// Clear empties the pane and follows again: a target's pane forgets its
// commands that ended (running ones start afresh), a task's pane its
// lines.
func (p *outputPane) Clear() {
	switch {
	case p.tr != nil:
		p.tr.Clear()
	case p.run != nil:
		p.run.Buf.Clear()
	default:
		p.buf.Clear()
	}
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
	rd := p.read()
	defer rd.Done()
	if p.matches != nil && p.matchV == rd.Version() {
		return
	}
	var cur int64 = -1
	if p.matchAt >= 0 && p.matchAt < len(p.matches) {
		cur = p.matches[p.matchAt]
	}
	p.matches, p.matchAt = p.matches[:0], -1
	fold := p.query == strings.ToLower(p.query)
	for i := range rd.Len() {
		l := rd.Line(i)
		if l.Kind != engine.Marker && matchIndex(l.Text, p.query, fold) >= 0 {
			abs := rd.Dropped() + int64(i)
			if abs == cur {
				p.matchAt = len(p.matches)
			}
			p.matches = append(p.matches, abs)
		}
	}
	if p.matches == nil {
		p.matches = []int64{}
	}
	p.matchV = rd.Version()
}

func (p *outputPane) showMatch(i int) {
	p.matchAt = i
	rd := p.read()
	defer rd.Done()
	rel := int(p.matches[i] - rd.Dropped())
	p.scrollIn(rd, rel-p.bodyHeight()/2)
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

// running reports whether any command shown in the pane still runs.
func (p *outputPane) running() bool {
	switch {
	case p.run != nil:
		return p.run.Running()
	case p.tr != nil:
		for _, r := range p.tr.Runs() {
			if r.Running() {
				return true
			}
		}
	}
	return false
}

// headerStatus is the right part of the header, in forms from longest
// to shortest: a spinner and the time so far, or how the command ended.
func (p *outputPane) headerStatus(c *paneCtx) []boxSeg {
	r := p.current()
	if r == nil {
		return nil
	}
	st := c.st
	ph, started, res := r.Status()
	if ph == engine.Done {
		if end := p.syncEnd(); end != nil {
			return end(st, res)
		}
	}
	switch ph {
	case engine.Waiting:
		from := r.Task.Started
		word := "waiting"
		if c.states != nil {
			switch s := c.states.Get(r.Target).State; s {
			case engine.Connecting, engine.Bootstrapping:
				word = string(s)
			}
		}
		spin := spinnerAt(c.now, from)
		return []boxSeg{
			seg(st.Pane.Running, spin+" "+word+" "+fmtDuration(c.now.Sub(from))),
			seg(st.Pane.Running, spin+" "+word),
			seg(st.Pane.Running, spin),
		}
	case engine.Running:
		spin := spinnerAt(c.now, started)
		if c.states != nil && c.states.Get(r.Target).State == engine.Reconnecting {
			// The connection dropped; the command runs on there.
			return []boxSeg{
				seg(st.Pane.Running, spin+" reconnecting… "+fmtDuration(c.now.Sub(started))),
				seg(st.Pane.Running, spin+" reconnecting…"),
				seg(st.Pane.Running, spin),
			}
		}
		return []boxSeg{
			seg(st.Pane.Running, spin+" "+fmtDuration(c.now.Sub(started))),
			seg(st.Pane.Running, spin),
		}
	}
	return resultSegs(st, res)
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
		if engine.IsCancelled(r.Err) {
			return bad("cancelled", "✗")
		}
		return bad("failed", "✗")
	case r.TimedOut:
		return bad("timed out", "✗")
	case r.Signal != "":
		sig := engine.SignalName(r.Signal)
		return bad("signal "+sig, sig)
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
// visible lines; a footer when scrolled or searching.
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
	if r := p.current(); r != nil {
		cmd = r.Task.Command
	}
	room := inner - right.width - 3
	nameSeg := seg(title, cut(name, max(1, room-2)))
	left := nameSeg
	if avail := room - nameSeg.width - 3; cmd != "" && avail > 4 {
		c := "· " + cut(cmd, avail-2) + " "
		left = joinSegs(nameSeg, boxSeg{text: st.Pane.Command.Render(c), width: ansi.StringWidth(c)})
	}

	body := make([]string, 0, h-2)
	if _, ok := p.sync(); ok {
		body = append(body, p.syncRows(c, inner)[:min(p.syncHeight(), h-2)]...)
	}
	var foot boxSeg
	rd := p.read()
	n := rd.Len()
	start := p.start(rd)
	fold := p.query == strings.ToLower(p.query)
	rowsOf := func(l *engine.Line) []string {
		if p.query != "" && l.Kind != engine.Marker && matchIndex(l.Text, p.query, fold) >= 0 {
			return renderMatch(st, l, inner, p.query, fold)
		}
		return renderLine(st, l, inner)
	}
	next := start
	for ; next < n && len(body) < h-2; next++ {
		rows := rowsOf(rd.Line(next))
		body = append(body, rows[:min(len(rows), h-2-len(body))]...)
	}
	if below := n - next; !p.follow && below > 0 {
		foot = seg(st.Muted, fmt.Sprintf("↓ %d more", below))
	}
	rd.Done()
	if s := p.SearchStatus(); s != "" {
		foot = joinSegs(foot, seg(st.Pane.Match, "/"+p.query+" "+s))
	}
	return drawBox(border, w, h, left, right, foot, body)
}

// lineStyle picks the style of a line kind.
func lineStyle(st *Styles, k engine.Kind) lipgloss.Style {
	switch k {
	case engine.Err:
		return st.Pane.Stderr
	case engine.Note:
		return st.Pane.Info
	case engine.Head:
		return st.Pane.Heading
	case engine.HeadOdd:
		return st.Pane.HeadingOdd
	case engine.Command:
		return st.Pane.CommandLine
	case engine.StatusOK:
		return st.Pane.ExitOK
	case engine.StatusFail:
		return st.Pane.ExitFail
	case engine.Marker:
		return st.Pane.Info
	}
	return st.Pane.Stdout
}

// renderLine draws a line as rows of exactly w cells, wrapping it, from
// its cache when it was drawn at that width with these styles before.
// The program's own colours (the line's spans) are drawn over the line's
// style, as the theme and NO_COLOR allow.
func renderLine(st *Styles, l *engine.Line, w int) []string {
	if d := l.Drawn; d != nil && d.Width == w && d.Gen == st.gen {
		return l.Drawn.Rows
	}
	style := st.lines[l.Kind]
	var rows []string
	off := 0
	for _, r := range wrapCells(l.Text, l.Width, w) {
		if r.text == "" {
			rows = append(rows, spaces(w))
			continue
		}
		if l.Spans == nil {
			rows = append(rows, style.wrap(r.text)+spaces(w-r.width))
		} else {
			rows = append(rows, renderSpans(st, style, r.text, off, l.Spans)+spaces(w-r.width))
		}
		off += len(r.text)
	}
	l.Drawn = &engine.Drawn{Rows: rows, Width: w, Gen: st.gen}
	return rows
}

// renderSpans draws text (at byte offset off of its line) in base, with
// the parts that spans cover in the program's colours.
func renderSpans(st *Styles, base sgr, text string, off int, spans []engine.Span) string {
	var b strings.Builder
	pos, end := off, off+len(text)
	for i := range spans {
		sp := &spans[i]
		if sp.End <= pos {
			continue
		}
		if sp.Start >= end {
			break
		}
		if sp.Start > pos {
			b.WriteString(base.wrap(text[pos-off : sp.Start-off]))
			pos = sp.Start
		}
		e := min(sp.End, end)
		b.WriteString(base.pre + st.programStyle(sp.Style) + text[pos-off:e-off] + ansi.ResetStyle)
		pos = e
	}
	if pos < end {
		b.WriteString(base.wrap(text[pos-off:]))
	}
	return b.String()
}

// renderMatch draws a line with every occurrence of q highlighted (a
// match cut by the wrap is highlighted in neither row).
func renderMatch(st *Styles, l *engine.Line, w int, q string, fold bool) []string {
	base := st.lines[l.Kind]
	match := sgrOf(st.Pane.Match)
	var rows []string
	for _, r := range wrapCells(l.Text, l.Width, w) {
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
				cw -= engine.TextWidth(text[sp+1 : i])
				i = sp + 1
			}
		}
		rows = append(rows, cellRow{text[:i], cw})
		text = text[i:]
	}
	return rows
}
