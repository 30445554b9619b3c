package tui

import (
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/rexconsole/rex/tui/engine"
)

// Smallest screen the console draws on.
const (
	minWidth  = 40
	minHeight = 8
)

// placed is a visible pane and its box.
type placed struct {
	idx  int // in m.panes; -1 for a gathered view
	pane Pane
	r    rect
}

// geometry is where everything goes on the screen.
type geometry struct {
	sidebar rect
	main    rect
	msgY    int
	msgH    int
	prompt  int
	status  int
	panes   []placed
	first   int // index of the first visible pane
	shown   int // how many panes are visible
}

// sidebarWidth is the sidebar's width for a screen width; narrow screens
// have none.
func sidebarWidth(w int) int {
	switch {
	case w >= 100:
		return min(30, max(24, w/5))
	case w >= 70:
		return 20
	}
	return 0
}

// geometry lays the screen out: where everything goes for the model's
// current size, panes and focus. It changes nothing; relayout applies it.
func (m *Model) geometry() geometry {
	w, h := m.width, m.height
	var g geometry
	g.msgH = min(len(m.messageLines(w)), m.messageRoom())
	g.status = h - 1
	g.prompt = h - 2
	g.msgY = g.prompt - g.msgH
	sb := sidebarWidth(w)
	g.sidebar = rect{0, 0, sb, g.msgY}
	g.main = rect{sb, 0, w - sb, g.msgY}
	switch {
	case m.gather != nil && m.gather.pane != nil:
		g.panes = []placed{{idx: -1, pane: m.gather.pane, r: g.main}}
	case len(m.panes) == 0:
	case m.zoom:
		g.panes = []placed{{idx: m.focus, pane: m.panes[m.focus], r: g.main}}
		g.first, g.shown = m.focus, 1
	default:
		per := perPage(m.layout, len(m.panes), g.main)
		g.first = m.focus / per * per
		g.shown = min(per, len(m.panes)-g.first)
		for i, r := range arrange(m.layout, g.shown, g.main) {
			g.panes = append(g.panes, placed{idx: g.first + i, pane: m.panes[g.first+i], r: r})
		}
	}
	return g
}

// relayout computes the layout and gives every visible pane, and the
// command line, its size. It runs at the end of every Update, so View
// only draws what Update laid out; a terminal pane whose size changed
// returns the command that resizes its remote terminal once the size has
// held for resizeDebounce.
func (m *Model) relayout() tea.Cmd {
	if m.width <= 0 || m.height <= 0 || m.st == nil {
		return nil
	}
	g := m.geometry()
	m.geo = g
	var cmds []tea.Cmd
	for _, p := range g.panes {
		cmds = append(cmds, p.pane.SetSize(p.r.w, p.r.h))
	}
	_, pw := m.promptView()
	m.input.SetWidth(max(1, m.width-pw))
	m.input.scrollIntoView()
	if m.helpOpen {
		m.helpTop = min(m.helpTop, max(0, len(m.helpLines(m.width-4))-(g.main.h-2)))
	}
	for _, d := range m.dialogs.All() {
		d.SetSize(min(m.width-2, 110), g.main.h)
	}
	return tea.Batch(cmds...)
}

// View draws the whole screen.
func (m *Model) View() tea.View {
	var v tea.View
	if m.quitting {
		return v
	}
	content, cursor := m.render()
	v.SetContent(content)
	v.AltScreen = true
	if m.cfg.mouse() {
		v.MouseMode = tea.MouseModeCellMotion
		if p := m.keyPane(); p != nil && p.wantsMouse() == mouseAny {
			v.MouseMode = tea.MouseModeAllMotion
		}
	}
	// A theme with its own background (light, high-contrast) also sets
	// the default foreground, so unstyled cells read on it; others keep
	// the terminal's colours.
	if bg := m.st.Theme.Colors.Background; bg != nil {
		v.BackgroundColor = bg
		v.ForegroundColor = m.st.Theme.Colors.Text
	}
	v.Cursor = cursor
	v.WindowTitle = "rex · " + m.target
	return v
}

// render builds the screen's lines and places the cursor.
func (m *Model) render() (string, *tea.Cursor) {
	w, h := m.width, m.height
	if w <= 0 || h <= 0 {
		return "", nil
	}
	if w < minWidth || h < minHeight {
		lines := wrapText(fmt.Sprintf("rex needs at least %d×%d cells; this terminal is %d×%d", minWidth, minHeight, w, h), w)
		return m.st.Warning.Render(strings.Join(lines[:min(len(lines), h)], "\n")), nil
	}
	g := m.geo
	lines := make([]string, 0, h)
	if m.helpOpen {
		// The help takes the sidebar's room too: it reads better wide.
		lines = append(lines, m.helpView(w, g.main.h)...)
	} else {
		side := m.sidebarView(g.sidebar.w, g.sidebar.h)
		main := m.mainView(g)
		for y := 0; y < g.main.h; y++ {
			line := main[y]
			if g.sidebar.w > 0 {
				line = side[y] + line
			}
			lines = append(lines, line)
		}
	}
	lines = m.overlayDialogs(lines, w, g.main.h)
	msg := m.messageLines(w)
	if len(msg) > g.msgH {
		msg = msg[len(msg)-g.msgH:]
	}
	lines = append(lines, msg...)
	prompt, pw := m.promptView()
	fw := max(1, w-pw)
	text, cx := m.input.View(func(s string) string { return m.st.Input.Render(s) })
	if m.input.Value() == "" && m.search == nil {
		text, cx = m.st.Placeholder.Render(fit("a shell command to run on "+m.target+", or /help", fw)), 0
	}
	if m.secret != nil {
		_, dots := m.secretView()
		text, cx = m.st.Input.Render(fit(dots, fw)), min(fw, ansi.StringWidth(dots))
	}
	lines = append(lines, prompt+text)
	lines = append(lines, m.statusView(g, w))

	var cursor *tea.Cursor
	covered := m.helpOpen || m.dialogs.Len() > 0
	if c, ok := m.paneCursor(g); ok && !covered {
		cursor = c // the program's, where it put it
	} else if !covered {
		cursor = tea.NewCursor(pw+cx, g.prompt)
		cursor.Color = m.st.Theme.Colors.Focus
	}
	return strings.Join(lines, "\n"), cursor
}

// mainView draws the panes, or a welcome, as g.main.h lines of g.main.w
// cells.
func (m *Model) mainView(g geometry) []string {
	if len(g.panes) == 0 {
		return m.welcomeView(g.main.w, g.main.h)
	}
	now := m.now()
	views := make([][]string, len(g.panes))
	for i, p := range g.panes {
		c := &paneCtx{st: m.st, focused: p.idx == m.focus || p.idx < 0, now: now, states: m.states, broadcast: m.broadcastTo(p.pane)}
		views[i] = p.pane.View(c)
	}
	out := make([]string, g.main.h)
	for y := range out {
		var b strings.Builder
		for i, p := range g.panes {
			if y >= p.r.y && y < p.r.y+p.r.h {
				if row := y - p.r.y; row < len(views[i]) {
					b.WriteString(views[i][row])
				}
			}
		}
		out[y] = b.String()
	}
	return out
}

// welcomeView is the main area before any command ran.
func (m *Model) welcomeView(w, h int) []string {
	st := m.st
	text := []struct {
		s    string
		bold bool
	}{
		{"rex", true},
		{"", false},
		{"Type a shell command and press enter: it runs on", false},
		{"the target in the prompt (" + m.target + "), one pane per machine.", false},
		{"", false},
		{"/target NAME       run on a device, a group, or local", false},
		{"/run T -- CMD      run once on any TARGETS list", false},
		{"/device add N H    register a machine reached over SSH", false},
		{"/help or f1        every command and key", false},
	}
	out := blankLines(w, h)
	top := max(0, (h-len(text))/2)
	for i, t := range text {
		y := top + i
		if y >= h {
			break
		}
		s := cut(t.s, w-2)
		pad := max(1, (w-56)/2)
		line := spaces(pad) + s
		style := st.Muted
		if t.bold {
			style = st.Accent.Bold(true)
		}
		out[y] = style.Render(fit(line, w))
	}
	return out
}

// promptView is the prompt before the input: the current target, or the
// search.
func (m *Model) promptView() (string, int) {
	st := m.st
	label := m.target
	if m.targetCount > 1 {
		label = fmt.Sprintf("%s (%d)", m.target, m.targetCount)
	}
	if m.search != nil {
		label = "find in " + m.search.pane.Title()
	}
	width := max(8, m.width/3)
	if m.secret != nil {
		label, _ = m.secretView()
		label, width = strings.TrimSuffix(label, ":"), max(8, m.width*2/3)
	}
	label = cut(label, width)
	arrow := " ❯ "
	if m.ag != nil && m.ag.on && m.search == nil {
		arrow = " ? "
	}
	return st.PromptTarget.Render(label) + st.Prompt.Render(arrow), ansi.StringWidth(label) + ansi.StringWidth(arrow)
}

// messageLines is the message area's content, wrapped to w, styled.
func (m *Model) messageLines(w int) []string {
	if w <= 0 || m.st == nil {
		return nil
	}
	var out []string
	if m.verb != nil {
		out = append(out, m.st.Warning.Render(fit(spinnerAt(m.now(), m.verb.started)+" "+m.verb.line+" "+fmtDuration(m.now().Sub(m.verb.started)), w)))
	}
	style := m.st.Message
	switch m.msg.kind {
	case msgNone:
		return out
	case msgError:
		style = m.st.MessageError
	case msgInfo:
		style = m.st.Muted
	}
	for _, l := range m.msg.lines {
		if m.msg.kind == msgOutput {
			// Command output keeps its columns: cut, not wrapped.
			out = append(out, style.Render(fit(l, w)))
			continue
		}
		for _, wl := range wrapText(l, w) {
			out = append(out, style.Render(fit(wl, w)))
		}
	}
	return out
}

// statusView is the bottom line: key help on the left, counts on the
// right.
func (m *Model) statusView(g geometry, w int) string {
	st := m.st
	var parts []string
	if n := m.runningTasks(); n > 0 {
		parts = append(parts, fmt.Sprintf("%d running", n))
	}
	if m.rolling != "" {
		parts = append(parts, m.rolling)
	}
	if n := len(m.panes); n > 0 {
		if g.shown > 0 && g.shown < n {
			parts = append(parts, fmt.Sprintf("panes %d-%d of %d", g.first+1, g.first+g.shown, n))
		} else {
			parts = append(parts, plural(n, "pane", "panes"))
		}
	}
	switch {
	case m.gather != nil:
		parts = append(parts, "gathered")
	case m.zoom:
		parts = append(parts, "zoomed")
	}
	parts = append(parts, m.layout)
	parts = append(parts, m.agentStatus()...)
	right := " " + strings.Join(parts, " · ") + " "
	cast := ""
	if m.broadcast != nil {
		cast = fmt.Sprintf(" ⇶ broadcast to %s ", plural(len(m.broadcast.live()), "terminal", "terminals"))
	}
	rw := ansi.StringWidth(right) + ansi.StringWidth(cast)
	if rw > w/2 {
		right, rw = "", ansi.StringWidth(cast)
	}
	if rw > w/2 {
		cast, rw = "", 0
	}
	hm := m.help
	hm.SetWidth(max(0, w-rw-1))
	left := st.Status.Render(" ") + hm.ShortHelpView(m.keys.ShortHelp())
	if d := m.dialogs.Front(); d != nil && m.typing() == nil {
		left = st.Status.Render(" ") + hm.ShortHelpView(d.Help())
	} else if p := m.keyPane(); p != nil {
		help := m.attachedHelp(p)
		if m.typing() != nil && (m.dialogs.Len() > 0 || m.secret != nil) {
			help = "a question waits: " + bindingHelp(m.keys.Detach) + " to answer it · " + help
		}
		left = st.StatusRight.Render(fit(help, max(0, w-rw)))
	} else if p := m.focusedTerm(); p != nil && m.search == nil && m.gather == nil {
		left = st.Status.Render(fit(m.termHelp(p), max(0, w-rw)))
	}
	lw := ansi.StringWidth(left)
	if lw > w-rw {
		left = ansi.Truncate(left, w-rw, "")
		lw = ansi.StringWidth(left)
	}
	out := left + st.Status.Render(spaces(w-rw-lw))
	if cast != "" {
		out += st.Pane.Broadcast.Reverse(true).Render(cast)
	}
	if right != "" {
		out += st.StatusRight.Render(right)
	}
	return out
}

// sideRow is one row of the sidebar's list: a target, a heading or a
// note; name is the target's, "" for the others.
type sideRow struct {
	name    string
	entry   *sidebarEntry
	sel     bool
	heading string // a kind of target
	count   int
	note    string
}

// sidebarLayout lays out the sidebar's list: a row per heading and
// target (drawn only when visible, so a registry of thousands costs a
// frame nothing), the first row shown (the list scrolls to keep the
// selected target in view), how many rows the list may use, and the
// detail lines below it.
func (m *Model) sidebarLayout(w, h int) (list []sideRow, start, listH int, detail []string) {
	cw := w - 1 // the last column is the border
	entries := m.sidebarEntries()
	sel := -1
	for i, e := range entries {
		if e.name == m.target {
			sel = i
		}
	}
	detail = m.detailLines(entries, sel, cw)
	detailH := min(len(detail)+1, max(0, h/2))
	listH = h - detailH
	detail = detail[:max(0, detailH-1)]

	counts := map[string]int{}
	for _, e := range entries {
		counts[e.kind]++
	}
	lastKind := ""
	selRow := -1
	for i := range entries {
		e := &entries[i]
		if e.kind != lastKind {
			if e.kind != "local" {
				list = append(list, sideRow{heading: e.kind, count: counts[e.kind]})
			}
			lastKind = e.kind
		}
		if i == sel {
			selRow = len(list)
		}
		list = append(list, sideRow{name: e.name, entry: e, sel: i == sel})
	}
	if counts["device"] == 0 {
		list = append(list, sideRow{note: " no devices yet:"}, sideRow{note: " /device add N HOST"})
	}
	if selRow >= listH {
		start = selRow - listH + 1
	}
	return list, start, listH, detail
}

// draw renders a sidebar row cw cells wide.
func (m *Model) drawSideRow(r sideRow, cw int) string {
	st := m.st
	switch {
	case r.entry != nil:
		return m.sidebarRow(*r.entry, cw, r.sel)
	case r.heading != "":
		titles := map[string]string{"device": "DEVICES", "group": "GROUPS", "host": "HOSTS"}
		return st.Sidebar.Section.Render(fit(fmt.Sprintf(" %s %d", titles[r.heading], r.count), cw))
	}
	return st.Muted.Render(fit(r.note, cw))
}

// sidebarView draws the target list and the selected target's details.
func (m *Model) sidebarView(w, h int) []string {
	if w <= 0 {
		return nil
	}
	st := m.st
	cw := w - 1
	list, start, listH, detail := m.sidebarLayout(w, h)
	rows := make([]string, 0, h)
	for i := start; i < len(list) && len(rows) < listH; i++ {
		rows = append(rows, m.drawSideRow(list[i], cw))
	}
	for len(rows) < listH {
		rows = append(rows, spaces(cw))
	}
	if listH < h {
		rows = append(rows, st.Sidebar.Border.Render(strings.Repeat("─", cw)))
		for i := 0; len(rows) < h; i++ {
			if i < len(detail) {
				rows = append(rows, detail[i])
			} else {
				rows = append(rows, spaces(cw))
			}
		}
	}
	border := st.Sidebar.Border.Render("│")
	for i := range rows {
		rows[i] += border
	}
	return rows
}

// stateGlyph marks a connection state.
func stateGlyph(s engine.State) string {
	switch {
	case s == engine.Connecting:
		return "◌"
	case s == engine.Bootstrapping:
		return "◍"
	case s == engine.Ready:
		return "●"
	case s.Failure():
		return "✗"
	}
	return "○"
}

// sidebarRow draws one target: glyph, name, state — the longest form of
// the state that leaves the name room.
func (m *Model) sidebarRow(e sidebarEntry, w int, selected bool) string {
	st := m.st
	if e.kind == "group" {
		s := fmt.Sprintf(" ▸ %s (%d)", e.name, e.members)
		if selected {
			return st.Sidebar.Selected.Render(fit(s, w))
		}
		return st.Sidebar.Item.Render(fit(s, w))
	}
	c := m.states.Get(e.name)
	want := min(ansi.StringWidth(e.name), 8)
	word := ""
	for _, f := range stateForms(c) {
		if w-5-ansi.StringWidth(f) >= want {
			word = f
			break
		}
	}
	// " ● " name " " word " "
	nameW := max(1, w-5-ansi.StringWidth(word))
	name := fit(cut(e.name, nameW), nameW)
	glyph := stateGlyph(c.State)
	if selected {
		return st.Sidebar.Selected.Render(" " + glyph + " " + name + " " + word + " ")
	}
	ss := st.stateStyle(c.State)
	return ss.Render(" "+glyph+" ") + st.Sidebar.Item.Render(name) + ss.Render(" "+word+" ")
}

// detailLines describes the selected target: its address, what the last
// contact said and when, and the sentence of its last failure.
func (m *Model) detailLines(entries []sidebarEntry, sel, w int) []string {
	st := m.st
	if sel < 0 {
		return []string{st.Sidebar.Detail.Render(fit(" target: "+m.target, w)), st.Sidebar.Detail.Render(fit(fmt.Sprintf(" %s", plural(m.targetCount, "machine", "machines")), w))}
	}
	e := entries[sel]
	out := []string{st.Sidebar.Item.Bold(true).Render(fit(" "+e.name, w))}
	if e.kind == "group" {
		g, _ := m.reg.Group(e.name)
		out = append(out, st.Sidebar.Detail.Render(fit(" group of "+plural(len(g.Members), "device", "devices"), w)))
		for _, l := range wrapText(strings.Join(g.Members, ", "), w-1) {
			out = append(out, st.Sidebar.Detail.Render(fit(" "+l, w)))
		}
		return out
	}
	out = append(out, st.Sidebar.Detail.Render(fit(" "+e.addr, w)))
	c := m.states.Get(e.name)
	label := c.Label()
	if !c.At.IsZero() && c.State != engine.Connecting && c.State != engine.Bootstrapping {
		label += " · " + c.At.Format("15:04:05")
	}
	for _, l := range wrapText(label, w-1) {
		out = append(out, st.stateStyle(c.State).Render(fit(" "+l, w)))
	}
	if c.Err != "" && c.State.Failure() {
		for _, l := range wrapText(c.Err, w-1) {
			out = append(out, st.Sidebar.Error.Render(fit(" "+l, w)))
		}
	}
	return out
}

// helpView is the overlay of commands and keys, scrolled to helpTop
// (which Update keeps in range).
func (m *Model) helpView(w, h int) []string {
	st := m.st
	lines := m.helpLines(w - 4)
	body := h - 2
	top := min(m.helpTop, max(0, len(lines)-body))
	view := make([]string, 0, body)
	for _, l := range lines[top:min(len(lines), top+body)] {
		view = append(view, " "+l+" ")
	}
	var foot boxSeg
	if len(lines) > body {
		foot = seg(st.Muted, fmt.Sprintf("lines %d-%d of %d · ↑/↓ pgup/pgdn scroll", top+1, min(len(lines), top+body), len(lines)))
	}
	return drawBox(st.Pane.BorderFocused, w, h, seg(st.OverlayTitle, "rex help"), boxSeg{}, foot, view)
}

// helpLines is the help's text, every line exactly w cells: descriptions
// wrap rather than being cut, so the help reads at 80×24 and scrolls.
func (m *Model) helpLines(w int) []string {
	if w <= 0 {
		return nil
	}
	st := m.st
	var lines []string
	add := func(s string) { lines = append(lines, s) }
	para := func(style lipgloss.Style, text string) {
		for _, l := range wrapText(text, w) {
			add(style.Render(fit(l, w)))
		}
	}
	// entry is a head in the accent colour and its description, wrapped
	// beside it in a column of width cw.
	entry := func(head, desc string, col, cw int) []string {
		var out []string
		for i, l := range wrapText(desc, max(1, cw-col)) {
			h := ""
			if i == 0 {
				h = head
			}
			out = append(out, st.Help.FullKey.Render(fit(h, col))+st.Overlay.Render(fit(l, cw-col)))
		}
		return out
	}

	add(st.OverlayTitle.Render(fit("Commands", w)))
	heads := make([]string, 0, 24)
	col := 0
	for _, c := range slashCommands() {
		head := "  /" + c.name
		if c.args != "" {
			head += " " + c.args
		}
		heads = append(heads, head)
		col = max(col, ansi.StringWidth(head)+2)
	}
	col = min(col, w/2)
	for i, c := range slashCommands() {
		head := heads[i]
		if ansi.StringWidth(head) > col-2 {
			// A long synopsis gets a line of its own.
			add(st.Help.FullKey.Render(fit(head, w)))
			head = ""
		}
		lines = append(lines, entry(head, c.summary, col, w)...)
	}
	para(st.Overlay, "A line without a slash runs as a shell command on the target in the prompt (on every member of a group at once), in that target's panes: one per machine, each reading like that machine's terminal history. A line starting with ? asks the agent, whose commands go to the same target after you allow them. A leading space keeps a line out of history.")
	add(spaces(w))

	// Keys, in as many columns of at least keyColumn cells as fit.
	const keyColumn = 44
	ncol := max(1, w/keyColumn)
	cw := w / ncol
	titles := []string{"Command line", "Panes", "Scrolling and targets", "Terminal panes (/attach), from the command line"}
	for gi, group := range m.keys.FullHelp() {
		add(st.OverlayTitle.Render(fit(titles[min(gi, len(titles)-1)], w)))
		kcol := 2
		for _, b := range group {
			kcol = max(kcol, ansi.StringWidth(b.Help().Key)+4)
		}
		kcol = min(kcol, cw/2)
		var cells [][]string
		for _, b := range group {
			cells = append(cells, entry("  "+b.Help().Key, b.Help().Desc, kcol, cw))
		}
		for r := 0; r < len(cells); r += ncol {
			row := cells[r:min(len(cells), r+ncol)]
			height := 0
			for _, c := range row {
				height = max(height, len(c))
			}
			for y := range height {
				var b strings.Builder
				for _, c := range row {
					if y < len(c) {
						b.WriteString(c[y])
					} else {
						b.WriteString(spaces(cw))
					}
				}
				b.WriteString(spaces(w - cw*len(row)))
				add(b.String())
			}
		}
		if gi == len(m.keys.FullHelp())-1 {
			para(st.Overlay, "While a terminal pane has the keys, every key goes to its program except "+bindingHelp(m.keys.Detach)+", which gives the keys back to the command line; a question that opens meanwhile waits for it. The other keys above act from the command line on the focused terminal pane: "+bindingHelp(m.keys.Broadcast)+" turns broadcast on (and gives the terminal the keys) or off, "+bindingHelp(m.keys.EnterPane)+" types in it again.")
		}
		add(spaces(w))
	}
	para(st.Muted, "esc closes this help · ↑/↓ and pgup/pgdn scroll · every key can be changed in config.toml [keys]")
	return lines
}

// fit2 pads an already styled line to w cells, cutting it if wider.
func fit2(s string, w int) string {
	sw := ansi.StringWidth(s)
	if sw > w {
		return ansi.Truncate(s, w, "")
	}
	return s + spaces(w-sw)
}
