package dialog

import (
	"strings"
	"testing"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

func press(s string) tea.KeyPressMsg {
	switch s {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "left":
		return tea.KeyPressMsg{Code: tea.KeyLeft}
	case "right":
		return tea.KeyPressMsg{Code: tea.KeyRight}
	case "up":
		return tea.KeyPressMsg{Code: tea.KeyUp}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	case "end":
		return tea.KeyPressMsg{Code: tea.KeyEnd}
	case "ctrl+q":
		return tea.KeyPressMsg{Code: 'q', Mod: tea.ModCtrl}
	}
	return tea.KeyPressMsg{Code: rune(s[0]), Text: s}
}

var st = &Styles{}

func TestConfirm(t *testing.T) {
	newQuit := func() *Confirm {
		return NewConfirm("quit", "Quit?", []string{"2 tasks run."}, []Choice{
			{Label: "Quit", Keys: key.NewBinding(key.WithKeys("y", "ctrl+q"), key.WithHelp("y", ""))},
			{Label: "Stay", Keys: key.NewBinding(key.WithKeys("n"), key.WithHelp("n", ""))},
		}, 1)
	}
	tests := []struct {
		keys []string
		want Action
	}{
		{[]string{"enter"}, Choose{ID: "quit", Choice: 1}}, // the safe default
		{[]string{"left", "enter"}, Choose{ID: "quit", Choice: 0}},
		{[]string{"right", "right", "enter"}, Choose{ID: "quit", Choice: 1}},
		{[]string{"y"}, Choose{ID: "quit", Choice: 0}},
		{[]string{"ctrl+q"}, Choose{ID: "quit", Choice: 0}},
		{[]string{"n"}, Choose{ID: "quit", Choice: 1}},
		{[]string{"esc"}, Close{ID: "quit"}},
		{[]string{"x"}, nil},
	}
	for _, tt := range tests {
		c := newQuit()
		var got Action
		for _, k := range tt.keys {
			got = c.Update(press(k))
		}
		if got != tt.want {
			t.Errorf("%v: %#v, want %#v", tt.keys, got, tt.want)
		}
	}
	// It draws within its size, every row as wide as the box.
	c := newQuit()
	c.SetSize(50, 12)
	rows := c.View(st)
	if len(rows) == 0 || len(rows) > 12 {
		t.Fatalf("%d rows in 12", len(rows))
	}
	for _, r := range rows {
		if w := ansi.StringWidth(r); w != ansi.StringWidth(rows[0]) || w > 50 {
			t.Errorf("row %q is %d cells", r, w)
		}
	}
	if !strings.Contains(strings.Join(rows, "\n"), "Stay (n)") {
		t.Errorf("no buttons:\n%s", strings.Join(rows, "\n"))
	}
}

func TestList(t *testing.T) {
	l := NewList("tasks", "Tasks", "nothing yet", "")
	l.SetSize(60, 6) // 2 rows of items
	if a := l.Update(press("enter")); a != nil {
		t.Errorf("enter on an empty list: %#v", a)
	}
	if rows := l.View(st); !strings.Contains(strings.Join(rows, ""), "nothing yet") {
		t.Errorf("an empty list does not say so: %q", rows)
	}
	l.SetItems([]Item{{Text: "a"}, {Text: "b"}, {Text: "c"}, {Text: "d"}})
	l.Update(press("down"))
	l.Update(press("down"))
	if l.Selected() != 2 || l.top != 1 {
		t.Errorf("after two downs: selected %d, top %d", l.Selected(), l.top)
	}
	view := strings.Join(l.View(st), "\n")
	if !strings.Contains(view, " b ") || !strings.Contains(view, " c ") || strings.Contains(view, " a ") {
		t.Errorf("the selection is not in view:\n%s", view)
	}
	l.Update(press("end"))
	if got := l.Update(press("enter")); got != (Select{ID: "tasks", Index: 3}) {
		t.Errorf("enter: %#v", got)
	}
	l.SetItems([]Item{{Text: "only"}})
	if l.Selected() != 0 {
		t.Errorf("fewer items: selected %d", l.Selected())
	}
	if got := l.Update(press("esc")); got != (Close{ID: "tasks"}) {
		t.Errorf("esc: %#v", got)
	}
}

func TestStack(t *testing.T) {
	var s Stack
	a, b := NewList("a", "", "", ""), NewList("b", "", "", "")
	s.Push(a)
	s.Push(b)
	if s.Front() != b || s.Get("a") != a || s.Len() != 2 {
		t.Fatal("push")
	}
	s.Close("a")
	if s.Front() != b || s.Get("a") != nil || s.Len() != 1 {
		t.Fatal("close")
	}
}
