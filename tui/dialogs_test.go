package tui

import (
	"fmt"
	"strings"
	"testing"

	"github.com/charmbracelet/x/exp/golden"
)

// TestQuitAsksFirst: with tasks running or terminals open, ctrl+q and
// /quit ask in a dialog that names what runs; "keep working" (the
// default) leaves everything running; quitting from the dialog stops it.
// With nothing running the console closes at once.
func TestQuitAsksFirst(t *testing.T) {
	e := newEnv(t, 120, 40, true)
	e.submit("/run web1,web2 -- sleep")
	e.press("ctrl+q")
	if e.m.quitting || e.m.dialogs.Get(quitDialog) == nil {
		t.Fatalf("ctrl+q with a running task: quitting %v, dialog %v", e.m.quitting, e.m.dialogs.Get(quitDialog))
	}
	s := e.screen()
	for _, want := range []string{"Quit rex?", "1 task is running: sleep on web1,web2 (2 targets).", "Quit and stop them (y)", "Keep working (n)"} {
		if !strings.Contains(s, want) {
			t.Errorf("the dialog lacks %q:\n%s", want, s)
		}
	}
	// Keys go to the dialog, not the command line.
	e.typeText("x")
	if e.m.input.Value() != "" {
		t.Errorf("a key reached the command line behind the dialog: %q", e.m.input.Value())
	}
	e.press("enter") // the default: keep working
	if e.m.quitting || e.m.dialogs.Len() != 0 || e.m.tasks.List()[0].Done() {
		t.Fatalf("keep working: quitting %v, dialogs %d, task done %v", e.m.quitting, e.m.dialogs.Len(), e.m.tasks.List()[0].Done())
	}
	// /quit asks too; esc cancels.
	e.submit("/quit")
	if e.m.dialogs.Get(quitDialog) == nil {
		t.Fatal("/quit did not ask")
	}
	e.press("esc")
	if e.m.dialogs.Len() != 0 || e.m.quitting {
		t.Fatal("esc did not cancel")
	}
	// Two ctrl+c on an idle line (the focused pane's task ended) ask as
	// well.
	e.submit("/run web3 -- echo x")
	e.press("ctrl+c", "ctrl+c")
	if e.m.quitting || e.m.dialogs.Get(quitDialog) == nil {
		t.Fatalf("ctrl+c twice with a task running elsewhere: quitting %v, asked %v", e.m.quitting, e.m.dialogs.Get(quitDialog) != nil)
	}
	e.press("n")
	// ctrl+q in the dialog quits, stopping the task.
	e.press("ctrl+q", "ctrl+q")
	if !e.m.quitting {
		t.Fatal("ctrl+q twice did not quit")
	}
	e.settle()
	if !e.m.tasks.List()[0].Done() {
		t.Error("quitting left the task running")
	}

	// Nothing running: no question.
	e2 := newEnv(t, 120, 40, true)
	e2.submit("/run web1 -- echo done")
	e2.press("ctrl+q")
	if !e2.m.quitting || e2.m.dialogs.Len() != 0 {
		t.Errorf("ctrl+q with nothing running: quitting %v, dialogs %d", e2.m.quitting, e2.m.dialogs.Len())
	}
}

// TestQuitNamesTerminals: an open terminal is work quitting would end.
func TestQuitNamesTerminals(t *testing.T) {
	e := newEnv(t, 120, 40, true)
	e.withTerms()
	e.attach("/attach web1")
	e.press("ctrl+]")
	e.press("ctrl+q")
	if s := e.screen(); !strings.Contains(s, "1 terminal is open: web1 (login shell).") {
		t.Errorf("the dialog does not name the terminal:\n%s", s)
	}
	e.press("y")
	if !e.m.quitting {
		t.Error("y did not quit")
	}
}

// TestTaskList: /tasks (and f3) list every command of the session,
// newest first, with status, duration and targets; enter opens one's
// output again, in a pane per target; /tasks N does the same.
func TestTaskList(t *testing.T) {
	e := newEnv(t, 120, 40, true)
	e.submit("/target web")
	e.submit("echo first")
	e.submit("/run web1,db1 -- fail")
	e.submit("hostname")
	e.press("f3")
	s := e.screen()
	for _, want := range []string{"Tasks this session (3)", "#3 ✓ 3 ok", "hostname", "#2 ✗ 1 failed, 1 unreachable", "web1,db1 (2)", "#1 ✓ 3 ok", "echo first", "web (3)"} {
		if !strings.Contains(strings.Join(strings.Fields(s), " "), want) {
			t.Errorf("the task list lacks %q:\n%s", want, s)
		}
	}
	panes := len(e.m.panes)
	e.press("end", "enter") // the oldest: #1
	if e.m.dialogs.Len() != 0 {
		t.Fatal("enter did not close the list")
	}
	if len(e.m.panes) != panes+3 {
		t.Fatalf("%d panes after opening #1, want %d", len(e.m.panes), panes+3)
	}
	for i := panes; i < panes+3; i++ {
		p := e.m.panes[i].(*outputPane)
		if p.run == nil || p.run.Task.ID != 1 || e.paneText(i) != "first\n" && e.paneText(i) != "different\n" {
			t.Errorf("pane %d: %v %q", i, p.run, e.paneText(i))
		}
	}
	if e.m.focus != panes {
		t.Errorf("focus %d, want the reopened task's first pane %d", e.m.focus, panes)
	}
	// Again: its panes are open already, they take the focus.
	e.m.focus = 0
	e.submit("/tasks 1")
	if len(e.m.panes) != panes+3 || e.m.focus != panes {
		t.Errorf("/tasks 1 again: %d panes, focus %d", len(e.m.panes), e.m.focus)
	}
	e.submit("/tasks 9")
	e.wantError("no such task", "#1 to #3")
}

// TestDialogsGolden: the quit dialog and the task list, at 80×24 and
// 120×40.
func TestDialogsGolden(t *testing.T) {
	for _, sz := range []struct{ w, h int }{{80, 24}, {120, 40}} {
		t.Run(fmt.Sprintf("quit/%dx%d", sz.w, sz.h), func(t *testing.T) {
			e := fleetScene(t, sz.w, sz.h)
			e.submit("/run web1,web2 -- sleep")
			e.press("ctrl+q")
			golden.RequireEqual(t, checkScreen(t, e, sz.w, sz.h))
		})
		t.Run(fmt.Sprintf("tasks/%dx%d", sz.w, sz.h), func(t *testing.T) {
			e := fleetScene(t, sz.w, sz.h)
			e.submit("/run web1,web2 -- sleep")
			e.press("f3")
			golden.RequireEqual(t, checkScreen(t, e, sz.w, sz.h))
		})
	}
}

// TestHelpGolden: the help at 80×24 wraps its descriptions (none is cut
// off) and scrolls: its first and its last page.
func TestHelpGolden(t *testing.T) {
	e := newEnv(t, 80, 24, true)
	e.press("f1")
	t.Run("first", func(t *testing.T) { golden.RequireEqual(t, checkScreen(t, e, 80, 24)) })
	for range 20 {
		e.press("pgdown")
	}
	t.Run("last", func(t *testing.T) {
		s := checkScreen(t, e, 80, 24)
		if !strings.Contains(s, "every key can be changed") {
			t.Errorf("the last page does not end the help:\n%s", s)
		}
		golden.RequireEqual(t, s)
	})
	if strings.Contains(strings.Join(e.m.helpLines(76), "\n"), "…") {
		t.Error("a help line is cut (…) at 80 columns")
	}
}
