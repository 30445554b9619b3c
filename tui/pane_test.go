package tui

import (
	"fmt"
	"github.com/rexconsole/rex/tui/engine"
	"hash/maphash"
	"strings"
	"sync"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/rexconsole/rex/themes"
)

// TestScrollbackConcurrent writes from many goroutines while reading, for
// the race detector, and checks that nothing is lost or torn.
func TestScrollbackConcurrent(t *testing.T) {
	s := engine.NewBuffer(100000, maphash.MakeSeed(), func() {})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				s.Write(g%2 == 1, fmt.Appendf(nil, "g%d-%d\n", g, i))
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		st := NewStyles(themes.MustDefault(), 1, false)
		p := newTextPane("x", s, &KeyMap{})
		p.SetSize(40, 10)
		for range 200 {
			p.View(&paneCtx{st: st})
		}
	}()
	wg.Wait()
	<-done
	text := s.Text()
	if n := strings.Count(text, "\n"); n != 8*500 {
		t.Errorf("%d lines, want %d", n, 8*500)
	}
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		var g, i int
		if _, err := fmt.Sscanf(l, "g%d-%d", &g, &i); err != nil {
			t.Fatalf("torn line %q", l)
		}
	}
}

// TestPaneScrolling scrolls a target's pane: its command's header line,
// the output, the status line.
func TestPaneScrolling(t *testing.T) {
	e := newEnv(t, 80, 24, false)
	e.submit("seq 200")
	e.press("ctrl+o") // zoom: one pane, a body of 19 lines
	p := e.m.panes[0].(*outputPane)
	body := func() []string {
		var out []string
		for _, l := range strings.Split(e.screen(), "\n") {
			// sidebar │ pane body │
			if parts := strings.Split(l, "│"); len(parts) == 4 {
				out = append(out, strings.TrimSpace(parts[2]))
			}
		}
		return out
	}
	last := func(n int) string { b := body(); return b[len(b)-1-n] }
	first := func() string { return body()[0] }
	if !p.follow || last(0) != "✓ exit 0 · 1.5s" || last(1) != "200" {
		t.Fatalf("following: last lines %q %q", last(1), last(0))
	}
	e.press("pgup")
	if p.follow || last(1) == "200" {
		t.Errorf("pgup: still at the bottom (%q)", last(0))
	}
	if !strings.Contains(e.screen(), "more") {
		t.Error("a scrolled pane does not say how much is below")
	}
	e.press("ctrl+home")
	if first() != "❯ seq 200 · 12:00:00" {
		t.Errorf("ctrl+home: first line %q", first())
	}
	e.press("shift+down")
	if first() != "1" {
		t.Errorf("shift+down: first line %q", first())
	}
	// New output does not move a scrolled pane.
	p.current().Buf.Write(false, []byte("201\n"))
	if first() != "1" {
		t.Errorf("output moved a scrolled pane to %q", first())
	}
	// The wheel scrolls; reaching the bottom follows again.
	for range 100 {
		e.m.Update(tea.MouseWheelMsg{X: 40, Y: 5, Button: tea.MouseWheelDown})
	}
	if !p.follow || last(1) != "201" {
		t.Errorf("wheel to the bottom: follow %v, last %q", p.follow, last(1))
	}
	e.m.Update(tea.MouseWheelMsg{X: 40, Y: 5, Button: tea.MouseWheelUp})
	if p.follow {
		t.Error("wheel up kept following")
	}
	e.press("ctrl+end")
	if !p.follow || last(1) != "201" {
		t.Errorf("ctrl+end: follow %v, last %q", p.follow, last(1))
	}
	// The next command shows at once, even in a pane scrolled back.
	e.press("pgup", "pgup")
	e.submit("echo next")
	if !p.follow || last(0) != "✓ exit 0 · 1.5s" || last(1) != "next" || last(2) != "❯ echo next · 12:00:00" {
		t.Errorf("after the next command: follow %v, %q", p.follow, body())
	}
}

func TestPaneSearch(t *testing.T) {
	e := newEnv(t, 80, 24, false)
	e.submit("seq 100")
	p := e.m.panes[0].(*outputPane)
	e.typeText("draft")
	e.press("ctrl+f")
	if e.m.search == nil || !strings.Contains(e.screen(), "find in local ❯") {
		t.Fatalf("ctrl+f did not start a search:\n%s", e.screen())
	}
	e.typeText("7")
	if got := p.SearchStatus(); got != "match 19 of 19" {
		t.Errorf("status %q", got) // 7, 17, 27, 37, 47, 57, 67, 70-79, 87, 97
	}
	e.press("up", "up")
	if got := p.SearchStatus(); got != "match 17 of 19" {
		t.Errorf("after up up: %q", got)
	}
	cur := p.matches[p.matchAt]
	e.press("down")
	if p.matches[p.matchAt] <= cur {
		t.Error("down did not move to a newer match")
	}
	e.press("enter")
	if e.m.search != nil || e.m.input.Value() != "draft" || p.query != "7" {
		t.Errorf("enter: search %v, line %q, query %q", e.m.search, e.m.input.Value(), p.query)
	}
	e.wantMessage("match 18 of 19")
	// Upper case in the query matches case exactly.
	e.press("ctrl+f")
	e.press("backspace")
	e.typeText("X")
	if got := p.SearchStatus(); got != "no match" {
		t.Errorf("X: %q", got)
	}
	e.press("esc")
	if p.query != "" || !p.follow {
		t.Errorf("esc: query %q, follow %v", p.query, p.follow)
	}
}

func TestPaneHeaders(t *testing.T) {
	st := NewStyles(themes.MustDefault(), 1, false)
	e := newEnv(t, 120, 40, true)
	e.submit("/run web1,db1 -- fail")
	e.submit("/run web2 -- hostname")
	screen := e.screen()
	for _, want := range []string{"web1 · fail", "exit 3 · 1.5s", "db1 · fail", "unreachable", "web2 · hostname", "exit 0 · 1.5s", "rex: connect db1", "boom"} {
		if !strings.Contains(screen, want) {
			t.Errorf("screen lacks %q:\n%s", want, screen)
		}
	}
	// Exit codes are coloured: success and failure styles differ.
	raw := e.m.View().Content
	if !strings.Contains(raw, st.Pane.ExitOK.Render(" exit 0 · 1.5s ")) || !strings.Contains(raw, st.Pane.ExitFail.Render(" exit 3 · 1.5s ")) {
		t.Error("exit codes are not drawn in their colours")
	}
	// stderr lines are drawn in the stderr style, stdout in its own.
	if !strings.Contains(raw, st.Pane.Stderr.Render("boom")) || !strings.Contains(raw, st.Pane.Stdout.Render("web2")) {
		t.Error("stdout and stderr are not styled apart")
	}
}

func TestPaneFocusAndZoom(t *testing.T) {
	e := newEnv(t, 120, 40, true)
	e.submit("/run web -- hostname")
	g := e.m.geometry()
	// Clicking the third pane focuses it.
	r := g.panes[2].r
	e.m.Update(tea.MouseClickMsg{X: r.x + 2, Y: r.y + 2, Button: tea.MouseLeft})
	if e.m.focus != 2 {
		t.Fatalf("click: focus %d, want 2", e.m.focus)
	}
	e.press("ctrl+o")
	if g := e.m.geometry(); len(g.panes) != 1 || g.panes[0].idx != 2 || g.panes[0].r != g.main {
		t.Fatalf("zoom: %+v", g.panes)
	}
	if !strings.Contains(e.screen(), "zoomed") {
		t.Error("status line does not say zoomed")
	}
	e.press("esc")
	if e.m.zoom || len(e.m.geometry().panes) != 3 {
		t.Error("esc did not unzoom")
	}
}

func TestSidebarTargets(t *testing.T) {
	e := newEnv(t, 120, 40, true)
	e.press("alt+down")
	if e.m.target != "db1" {
		t.Errorf("alt+down from local: %q, want db1", e.m.target)
	}
	e.press("alt+up", "alt+up")
	if e.m.target != "web" {
		t.Errorf("alt+up twice from db1: %q, want web (wrapping)", e.m.target)
	}
	// Clicking a row makes it the target; its error shows below.
	e.setState("web2", engine.Failed, fmt.Errorf("connect web2: host key mismatch"))
	y := -1
	for i, l := range strings.Split(e.screen(), "\n") {
		if strings.Contains(l, " web2 ") && strings.Index(l, "web2") < sidebarWidth(120) {
			y = i
		}
	}
	e.m.Update(tea.MouseClickMsg{X: 3, Y: y, Button: tea.MouseLeft})
	if e.m.target != "web2" {
		t.Fatalf("click on row %d: target %q", y, e.m.target)
	}
	if s := e.screen(); !strings.Contains(s, "host key") || !strings.Contains(s, "mismatch") || !strings.Contains(s, "root@10.0.0.2") {
		t.Errorf("selected device's details missing:\n%s", s)
	}
}

func TestCancelFocusedTask(t *testing.T) {
	e := newEnv(t, 120, 40, true)
	e.submit("/run web1 -- sleep")
	e.submit("/run web2 -- sleep")
	e.press("shift+tab") // focus web1's pane
	e.press("ctrl+c")
	e.settle()
	tasks := e.m.tasks.List()
	if !tasks[0].Done() || tasks[1].Done() {
		t.Fatalf("ctrl+c stopped tasks %v %v; want only the focused one", tasks[0].Done(), tasks[1].Done())
	}
	if e.m.quitting {
		t.Fatal("ctrl+c closed the console")
	}
	e.wantMessage("sleep — cancelled: 0 ok, 1 failed")
}

func TestWrapCells(t *testing.T) {
	tests := []struct {
		text string
		w    int
		want []string
	}{
		{"abcdef", 4, []string{"abcd", "ef"}},
		{"abc", 4, []string{"abc"}},
		{"日本語です", 4, []string{"日本", "語で", "す"}},
		{"a日本", 2, []string{"a", "日", "本"}},
		{"load average: 2.11, 2.50", 16, []string{"load average: ", "2.11, 2.50"}},
		{"a verylongword", 8, []string{"a verylo", "ngword"}}, // no space in the second half
		{"connection refused", 12, []string{"connection ", "refused"}},
	}
	for _, tt := range tests {
		rows := wrapCells(tt.text, ansi.StringWidth(tt.text), tt.w)
		var got []string
		for _, r := range rows {
			got = append(got, r.text)
			if r.width > tt.w || r.width != ansi.StringWidth(r.text) {
				t.Errorf("row %q is %d cells wide, limit %d", r.text, r.width, tt.w)
			}
		}
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("wrapCells(%q, %d) = %q, want %q", tt.text, tt.w, got, tt.want)
		}
	}
}
