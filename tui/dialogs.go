package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/rexconsole/rex/tui/dialog"
	"github.com/rexconsole/rex/tui/engine"
)

// The console's dialogs.
const (
	quitDialog  = "quit"
	tasksDialog = "tasks"
)

// dialogDone is what the console does once a dialog has answered (a
// choice, a selection, or esc).
type dialogDone func(a dialog.Action) tea.Cmd

// openDialog puts d in front of the main view; it takes the keys until
// it answers, and done (may be nil) acts on the answer. A dialog with the
// same ID already open stays as it is.
func (m *Model) openDialog(d dialog.Dialog, done dialogDone) {
	if m.dialogs.Get(d.ID()) != nil {
		return
	}
	m.dialogs.Push(d)
	if m.dialogDone == nil {
		m.dialogDone = map[string]dialogDone{}
	}
	m.dialogDone[d.ID()] = done
}

// closeDialog closes dialog id without an answer.
func (m *Model) closeDialog(id string) {
	m.dialogs.Close(id)
	delete(m.dialogDone, id)
}

// dialogKey routes a key press to the front dialog; once it answers, the
// dialog closes and its done function acts on the answer.
func (m *Model) dialogKey(msg tea.KeyPressMsg) tea.Cmd {
	d := m.dialogs.Front()
	a := d.Update(msg)
	if a == nil {
		return nil
	}
	id := d.ID()
	done := m.dialogDone[id]
	m.closeDialog(id)
	if done != nil {
		return done(a)
	}
	// A dialog pushed without openDialog: the agent's consent question.
	switch a := a.(type) {
	case dialog.Close:
		m.agentAnswer(a.ID, dialog.ConsentDeny)
	case dialog.Choose:
		if m.agentAnswer(a.ID, a.Choice) {
			return m.ensureTick()
		}
	}
	return nil
}

// requestQuit is ctrl+q and /quit: with nothing running the console
// closes; otherwise a dialog says what runs and asks first. Behind a rex
// server it always asks: detach (everything runs on) or quit (stop it
// all).
func (m *Model) requestQuit() tea.Cmd {
	if m.host != nil {
		m.askLeave()
		return nil
	}
	text := m.runningWork()
	if text == nil {
		return m.quit()
	}
	quitKeys := append([]string{"y"}, m.keys.Quit.Keys()...)
	m.openDialog(dialog.NewConfirm(quitDialog, "Quit rex?", text, []dialog.Choice{
		{Label: "Quit and stop them", Keys: key.NewBinding(key.WithKeys(quitKeys...), key.WithHelp("y", "quit"))},
		{Label: "Keep working", Keys: key.NewBinding(key.WithKeys("n"), key.WithHelp("n", "stay"))},
	}, 1), func(a dialog.Action) tea.Cmd {
		if c, ok := a.(dialog.Choose); ok && c.Choice == 0 {
			return m.quit()
		}
		return nil
	})
	return nil
}

// askLeave is the quit dialog behind a rex server: detach is the default.
func (m *Model) askLeave() {
	quitKeys := append([]string{"q"}, m.keys.Quit.Keys()...)
	m.openDialog(dialog.NewConfirm(quitDialog, "Leave the console?", m.leaveText(), []dialog.Choice{
		{Label: "Detach (tasks keep running)", Keys: key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "detach"))},
		{Label: "Quit (stop everything)", Keys: key.NewBinding(key.WithKeys(quitKeys...), key.WithHelp("q", "quit"))},
		{Label: "Stay", Keys: key.NewBinding(key.WithKeys("n"), key.WithHelp("n", "stay"))},
	}, 0), func(a dialog.Action) tea.Cmd {
		c, ok := a.(dialog.Choose)
		switch {
		case !ok:
		case c.Choice == 0:
			m.host.Detach("detached from the console")
		case c.Choice == 1:
			return m.quit()
		}
		return nil
	})
}

// leaveText is the text of the dialog behind a rex server.
func (m *Model) leaveText() []string {
	text := m.runningWork()
	if text == nil {
		text = []string{"Nothing runs."}
	} else {
		text = text[:len(text)-1] // the line about quitting
	}
	return append(text, "Detach leaves it all running in the rex server: rex attaches again. Quit stops it all.")
}

// runningWork says what quitting would stop, as the quit dialog's text;
// nil when nothing runs.
func (m *Model) runningWork() []string {
	var text []string
	if running := m.tasks.Running(); len(running) > 0 {
		var what []string
		for _, t := range running {
			what = append(what, fmt.Sprintf("%s on %s", cut(t.Command, 40), targetWords(t)))
		}
		text = append(text, fmt.Sprintf("%s running: %s.", plural(len(running), "task is", "tasks are"), listWords(what, 4)))
	}
	var terms []string
	for _, p := range m.panes {
		if tp, ok := p.(*ptyPane); ok {
			if ph := tp.phase(); ph == termLive || ph == termOpening {
				terms = append(terms, fmt.Sprintf("%s (%s)", tp.Title(), cut(tp.task.command, 24)))
			}
		}
	}
	if len(terms) > 0 {
		text = append(text, fmt.Sprintf("%s open: %s.", plural(len(terms), "terminal is", "terminals are"), listWords(terms, 4)))
	}
	if m.verb != nil {
		text = append(text, m.verb.line+" is running.")
	}
	if m.ag != nil && m.ag.turn != nil {
		text = append(text, "The agent is working on: "+cut(m.ag.turn.prompt, 60)+".")
	}
	if text == nil {
		return nil
	}
	return append(text, "Quitting stops them: their remote processes are ended.")
}

// targetWords says where a task runs: "web1", "web (4 targets)".
func targetWords(t *engine.Task) string {
	if len(t.Runs) == 1 && t.Runs[0].Target == t.Spec {
		return t.Spec
	}
	return fmt.Sprintf("%s (%s)", cut(t.Spec, 24), plural(len(t.Runs), "target", "targets"))
}

// listWords joins items, at most n of them, saying how many more.
func listWords(items []string, n int) string {
	if len(items) > n {
		return strings.Join(items[:n], "; ") + fmt.Sprintf("; and %d more", len(items)-n)
	}
	return strings.Join(items, "; ")
}

// openTasks opens the task list.
func (m *Model) openTasks() {
	l := dialog.NewList(tasksDialog, "", "no command has run yet; type one on the command line", "↑/↓ select · enter opens its output · esc closes")
	m.openDialog(l, func(a dialog.Action) tea.Cmd {
		if s, ok := a.(dialog.Select); ok {
			// The list is newest first.
			if tasks := m.tasks.List(); s.Index < len(tasks) {
				m.openTask(tasks[len(tasks)-1-s.Index])
			}
		}
		return nil
	})
	m.refreshTasks()
}

// refreshTasks fills an open task list, newest first.
func (m *Model) refreshTasks() {
	l, ok := m.dialogs.Get(tasksDialog).(*dialog.List)
	if !ok {
		return
	}
	tasks := m.tasks.List()
	now := m.now()
	items := make([]dialog.Item, 0, len(tasks))
	idw := len(fmt.Sprint(len(tasks)))
	for i := len(tasks) - 1; i >= 0; i-- {
		t := tasks[i]
		status, tone := taskStatus(t)
		where := t.Spec
		if len(t.Runs) != 1 || t.Runs[0].Target != t.Spec {
			where = fmt.Sprintf("%s (%d)", cut(t.Spec, 16), len(t.Runs))
		}
		text := fmt.Sprintf("#%-*d %s %7s  %s  %s  %s", idw, t.ID, fit(status, 28), fmtDuration(t.Duration(now)),
			t.Started.Format("15:04:05"), fit(where, 20), t.Command)
		if t.Released() {
			text += "  (output no longer kept)"
			tone = dialog.Muted
		}
		items = append(items, dialog.Item{Text: text, Tone: tone})
	}
	l.SetTitle(fmt.Sprintf("Tasks this session (%d)", len(tasks)))
	l.SetItems(items)
}

// taskStatus says how a task went, in a few words, and its tone.
func taskStatus(t *engine.Task) (string, dialog.Tone) {
	o := t.Outcome()
	var parts []string
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	if !t.Done() {
		add(o.Running, "running")
		add(o.OK, "ok")
		add(o.Failed, "failed")
		add(o.Unreachable, "unreachable")
		return "… " + strings.Join(parts, ", "), dialog.Running
	}
	add(o.OK, "ok")
	add(o.Failed, "failed")
	add(o.Unreachable, "unreachable")
	switch {
	case t.Cancelled():
		return "✗ cancelled: " + strings.Join(parts, ", "), dialog.Fail
	case o.Failed+o.Unreachable > 0:
		return "✗ " + strings.Join(parts, ", "), dialog.Fail
	}
	return "✓ " + strings.Join(parts, ", "), dialog.OK
}

// openTask shows an earlier task's output again: its panes if they are
// open, else a pane per target.
func (m *Model) openTask(t *engine.Task) {
	m.gather, m.gatherOn = nil, false
	for i, p := range m.panes {
		if op, ok := p.(*outputPane); ok && op.run != nil && op.run.Task == t {
			m.setFocus(i, false)
			m.zoom = false
			return
		}
	}
	if t.Released() {
		status, _ := taskStatus(t)
		m.fail(fmt.Errorf("task #%d (%s) ended %s; its output is no longer kept: the newest finished tasks keep theirs, up to %d lines", t.ID, cut(t.Command, 40), status, retainFactor*m.cfg.Scrollback))
		return
	}
	m.showTask(t)
	m.info("task #%d: %s on %s", t.ID, cut(t.Command, 60), targetWords(t))
}

// cmdTasks is /tasks [N]: the task list, or task N's output.
func (m *Model) cmdTasks(args []string) tea.Cmd {
	switch len(args) {
	case 0:
		m.openTasks()
		return nil
	case 1:
		var id int
		if _, err := fmt.Sscan(strings.TrimPrefix(args[0], "#"), &id); err == nil {
			if t := m.tasks.Get(id); t != nil {
				m.openTask(t)
				return nil
			}
		}
		n := len(m.tasks.List())
		if n == 0 {
			m.fail(fmt.Errorf("/tasks %s: no command has run yet", args[0]))
			return nil
		}
		m.fail(fmt.Errorf("/tasks %s: there is no such task; the tasks are #1 to #%d (/tasks lists them)", args[0], n))
		return nil
	}
	m.fail(fmt.Errorf("/tasks takes nothing (the list) or one task number, not %q", strings.Join(args, " ")))
	return nil
}

// overlayDialogs draws the open dialogs over the top h lines, centred.
func (m *Model) overlayDialogs(lines []string, w, h int) []string {
	for _, d := range m.dialogs.All() {
		box := d.View(&m.st.Dialog)
		if len(box) == 0 {
			continue
		}
		bw := ansi.StringWidth(box[0])
		x, y := max(0, (w-bw)/2), max(0, (h-len(box))/2)
		for i, row := range box {
			if y+i >= len(lines) {
				break
			}
			base := lines[y+i]
			lines[y+i] = ansi.Truncate(base, x, "") + ansi.ResetStyle + row + ansi.ResetStyle + ansi.TruncateLeft(base, x+bw, "")
		}
	}
	return lines
}
