package tui

import (
	"errors"
	"fmt"
	"github.com/rexconsole/rex/tui/engine"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"
)

var sizes = []struct{ w, h int }{{80, 24}, {120, 40}, {200, 50}}

// checkScreen asserts the screen's shape: exactly h lines of exactly w
// cells, whatever is on them.
func checkScreen(t *testing.T, e *testEnv, w, h int) string {
	t.Helper()
	s := e.screen()
	lines := strings.Split(s, "\n")
	if len(lines) != h {
		t.Fatalf("screen has %d lines, want %d:\n%s", len(lines), h, s)
	}
	for i, l := range lines {
		if got := ansi.StringWidth(l); got != w {
			t.Errorf("line %d is %d cells wide, want %d: %q", i, got, w, l)
		}
	}
	return s
}

// fleetScene opens the scene most golden files show: the web group as
// target, a fan-out with one differing host, a failure, an unreachable
// device with its error in the sidebar.
func fleetScene(t *testing.T, w, h int) *testEnv {
	e := newEnv(t, w, h, true)
	e.setState("web1", engine.Ready, nil)
	e.setState("web2", engine.Ready, nil)
	e.setState("web3", engine.Bootstrapping, nil)
	e.setState("db1", engine.Failed, errors.New("connect db1: dial tcp 10.0.0.9:2222: connect: connection refused"))
	e.submit("/target web")
	e.submit("echo hello from the fleet")
	e.submit("/run db1,web1 -- fail")
	return e
}

func TestLayoutGolden(t *testing.T) {
	for _, sz := range sizes {
		name := fmt.Sprintf("%dx%d", sz.w, sz.h)
		t.Run("welcome/"+name, func(t *testing.T) {
			e := newEnv(t, sz.w, sz.h, false)
			golden.RequireEqual(t, checkScreen(t, e, sz.w, sz.h))
		})
		t.Run("fleet/"+name, func(t *testing.T) {
			e := fleetScene(t, sz.w, sz.h)
			golden.RequireEqual(t, checkScreen(t, e, sz.w, sz.h))
		})
	}
}

func TestLayoutScenesGolden(t *testing.T) {
	tests := []struct {
		name string
		do   func(e *testEnv)
	}{
		{"help", func(e *testEnv) { e.press("f1") }},
		{"gathered", func(e *testEnv) {
			// Click the first pane (the echo task's), then gather.
			e.m.Update(tea.MouseClickMsg{X: sidebarWidth(120) + 3, Y: 2, Button: tea.MouseLeft})
			e.press("ctrl+g")
		}},
		{"zoomed", func(e *testEnv) { e.press("ctrl+o") }},
		{"rows", func(e *testEnv) { e.submit("/layout rows") }},
		{"columns", func(e *testEnv) { e.submit("/layout columns") }},
		{"running", func(e *testEnv) {
			e.submit("/run web1,web2 -- sleep")
			e.clock.Advance(3200 * time.Millisecond)
		}},
		{"light", func(e *testEnv) { e.submit("/theme light") }},
		{"device-selected", func(e *testEnv) { e.submit("/target db1") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := fleetScene(t, 120, 40)
			tt.do(e)
			golden.RequireEqual(t, checkScreen(t, e, 120, 40))
		})
	}
}

func TestLayoutTooSmall(t *testing.T) {
	e := newEnv(t, 30, 6, false)
	if s := e.screen(); !strings.Contains(s, "needs at least 40×8") || !strings.Contains(s, "30×6") {
		t.Errorf("screen = %q", s)
	}
}

// TestLayoutManyPanes shows pages of panes when they do not all fit, the
// page following the focus.
func TestLayoutManyPanes(t *testing.T) {
	e := newEnv(t, 80, 24, true)
	// Commands on other targets than the current one open panes of their
	// own.
	for range 20 {
		e.submit("/run web1 -- echo x")
	}
	checkScreen(t, e, 80, 24)
	g := e.m.geometry()
	if g.shown >= 20 || g.shown == 0 {
		t.Fatalf("%d of 20 panes shown at 80x24; want a page of them", g.shown)
	}
	if g.first > e.m.focus || e.m.focus >= g.first+g.shown {
		t.Errorf("focused pane %d is not on the page shown (%d-%d)", e.m.focus, g.first, g.first+g.shown-1)
	}
	if !strings.Contains(e.screen(), fmt.Sprintf("panes %d-%d of 20", g.first+1, g.first+g.shown)) {
		t.Errorf("status line does not say which panes show:\n%s", e.screen())
	}
	e.press("tab") // wraps to the first pane
	if g := e.m.geometry(); g.first != 0 || e.m.focus != 0 {
		t.Errorf("after tab: first %d, focus %d; want the first page", g.first, e.m.focus)
	}
}

func TestArrangeTiles(t *testing.T) {
	areas := []rect{{0, 0, 96, 37}, {24, 0, 176, 47}, {0, 0, 60, 21}}
	for _, kind := range []string{layoutGrid, layoutRows, layoutColumns} {
		for _, area := range areas {
			for n := 1; n <= 16; n++ {
				k := perPage(kind, n, area)
				if k < 1 || k > n {
					t.Fatalf("%s %v: perPage(%d) = %d", kind, area, n, k)
				}
				rs := arrange(kind, k, area)
				if len(rs) != k {
					t.Fatalf("%s %v n=%d: %d rects for %d panes", kind, area, n, len(rs), k)
				}
				// Every cell of the area is covered exactly once.
				cover := make([]int, area.w*area.h)
				for _, r := range rs {
					if k > 1 && (r.w < minPaneW || r.h < minPaneH) {
						t.Errorf("%s %v n=%d: pane %v is smaller than %dx%d", kind, area, k, r, minPaneW, minPaneH)
					}
					for y := r.y; y < r.y+r.h; y++ {
						for x := r.x; x < r.x+r.w; x++ {
							if !area.contains(x, y) {
								t.Fatalf("%s %v: pane %v leaves the area", kind, area, r)
							}
							cover[(y-area.y)*area.w+x-area.x]++
						}
					}
				}
				for i, c := range cover {
					if c != 1 {
						t.Fatalf("%s %v n=%d: cell %d covered %d times", kind, area, k, i, c)
					}
				}
			}
		}
	}
}
